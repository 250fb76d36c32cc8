"""How many independent FMA chains a CPU needs, and how many fit, decided from its facts.

A core retires ``pipes`` vector FMAs per cycle and each takes ``latency`` cycles before its
result can feed the next FMA of the same chain, so the FMA pipes stay busy only with at
least ``latency x pipes`` independent chains in flight (Little's law). Each chain is one
vector register for the whole loop; the loop's two constants take two more. The register
file is 16 vector registers without AVX-512 (ymm0-15) and 32 with it (zmm0-31): 24 chains of
ymm spill on AVX2 and run at half rate (measured with the C probe on Zen 3).

The probe uses half again the minimum (slack for the loop counter and for an FMA that issues
a cycle late) and never more than the register file holds:
``accumulators = min(registers - 2, ceil(1.5 x latency x pipes))``. On Zen 3 that is 12 of
the 14 free ymm registers; the C reference measured 8 chains below 12, and 16 spilling.

``pipes`` counts FMA pipes, for the widest vectors. Where a source gives a smaller figure the
table takes the larger, which asks for more chains, never fewer: Zen 1 and Zen 4 split a
widest-vector FMA over both of their narrower pipes (one zmm FMA per cycle on Zen 4, LLVM's
reciprocal throughput 1.0), and the table counts the two pipes, so Zen 4 keeps the 12 zmm
chains its C and numba probes ran at peak; Intel Xeon Scalable cores have two 512-bit FMA
units (ports 0+1 fused and port 5) on the Gold 6000/Platinum parts, where LLVM's Ice Lake and
Sapphire Rapids models describe the one-unit client core (reciprocal throughput 1.0).

Sources (the ``source`` of each row; docs/cpu-roofs.md has the full table):
  [llvm] LLVM 19 scheduling models, ``llvm-mca-19 -mcpu=<cpu> -instruction-info`` on
         ``vfmadd231pd`` (latency, reciprocal throughput); tests/roofs/test_cpu_codegen.py checks
         the table against it when llvm-mca is installed.
  [uops] uops.info instruction tables, VFMADD231PD (YMM/ZMM): https://uops.info/table.html
  [agner] Agner Fog, Instruction tables (2022), https://www.agner.org/optimize/
  [amd]  AMD Software Optimization Guides: Zen 2 (pub. 56305), Zen 3 (56665), Zen 4 (57647).
  [intel] Intel 64 and IA-32 Architectures Optimization Reference Manual (two FMA units on
         Xeon Scalable); the Emerald Rapids VM measured 176.6 GFLOP/s FP64 on 2 cores
         (results/intel-r-xeon-r-processor/), 32 FLOP/cycle/core at any clock it can run at.

numba-free: the cross-target codegen tests and the simulated machines use it without a JIT.
"""

from __future__ import annotations

import math
import platform
from dataclasses import asdict, dataclass
from typing import Any

from .cpu_features import parse_features, widest_vector_bits

RESERVED_REGISTERS = 2  # the multiplier and the addend, broadcast once before the loop
SLACK = 1.5  # chains beyond latency x pipes


@dataclass(frozen=True)
class FmaUnit:
    """FMA facts of one microarchitecture, for its widest vectors."""

    latency: int  # cycles from an FMA's inputs to its result
    pipes: int  # FMAs of the widest vector started per cycle
    source: str


_AVX2_LAT5 = FmaUnit(5, 2, "[llvm] lat 5, rthroughput 0.5; [uops] [agner]")
# The Xeons whose LLVM scheduling model is another core's: the facts are that core's.
_SKX_MODEL = FmaUnit(4, 2, "[llvm] zmm lat 4, rthroughput 0.5 (SKX model); [intel]")
_CLIENT_MODEL = FmaUnit(4, 2, "[llvm] zmm lat 4 (rthroughput 1.0: client model); "
                              "[intel] two units")
# LLVM CPU names (llvmlite.binding.get_host_cpu_name(), NUMBA_CPU_NAME).
FMA_UNITS: dict[str, FmaUnit] = {
    "znver1": FmaUnit(5, 2, "[agner] [amd] two 128-bit FMA pipes; a ymm FMA takes both"),
    "znver2": FmaUnit(5, 2, "[llvm] lat 5, rthroughput 0.5; [uops] [amd] 56305"),
    "znver3": FmaUnit(4, 2, "[llvm] lat 4, rthroughput 0.5; [uops] [amd] 56665"),
    "znver4": FmaUnit(4, 2, "[llvm] zmm lat 4, rthroughput 1.0 (ymm 0.5); [uops] [amd] 57647: "
                            "two 256-bit FMA pipes, a zmm FMA takes both"),
    "znver5": FmaUnit(4, 2, "[llvm] zmm lat 4 (rthroughput 1.0: Zen 4 model); [amd] Zen 5 "
                            "desktop/server: 512-bit datapath, two FMA pipes"),
    "haswell": _AVX2_LAT5,
    "broadwell": _AVX2_LAT5,
    "skylake": FmaUnit(4, 2, "[llvm] lat 4, rthroughput 0.5; [uops] [agner]"),
    "alderlake": FmaUnit(4, 2, "[llvm] lat 4, rthroughput 0.5; [uops]"),
    "skylake-avx512": FmaUnit(4, 2, "[llvm] zmm lat 4, rthroughput 0.5; [uops] [intel]"),
    "cascadelake": _SKX_MODEL,
    "cooperlake": _SKX_MODEL,
    "icelake-server": _CLIENT_MODEL,
    "sapphirerapids": _CLIENT_MODEL,
    "emeraldrapids": FmaUnit(4, 2, "[llvm] zmm lat 4 (rthroughput 1.0: client model); "
                                   "[intel] two units, measured 176.6 GFLOP/s on 2 cores"),
    "graniterapids": FmaUnit(4, 2, "[llvm] zmm lat 4; [intel] two units"),
}
# A CPU name not in the table (x86-64-v3, a future core): the largest latency x pipes of the
# cores with that width, so the chains are never too few; the register file still caps them.
UNKNOWN_CPU = FmaUnit(5, 2, "not in the table: latency 5 x 2 pipes, the most any listed core "
                            "needs")


def vector_registers(features: dict[str, bool], machine: str | None = None) -> int:
    """Architectural vector registers: x86-64 16 (xmm/ymm), 32 with AVX-512; AArch64 32."""
    machine = (machine or platform.machine()).lower()
    if machine in ("aarch64", "arm64"):
        return 32
    return 32 if features.get("avx512f") else 16


@dataclass(frozen=True)
class FmaShape:
    """The FMA probe's shape for one target CPU, with the facts it was derived from."""

    cpu: str
    vector_bits: int
    registers: int
    latency: int
    pipes: int
    accumulators: int  # independent vector chains per thread
    source: str

    @property
    def needed(self) -> int:
        """Chains that keep every FMA pipe busy: latency x pipes."""
        return self.latency * self.pipes

    def lanes(self, itemsize: int) -> int:
        return self.vector_bits // (8 * itemsize)

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "needed_chains": self.needed}


def accumulators_for(unit: FmaUnit, registers: int) -> int:
    """``min(registers - 2, ceil(1.5 x latency x pipes))``: every pipe busy with slack, no
    spill."""
    want = math.ceil(SLACK * unit.latency * unit.pipes)
    return max(1, min(registers - RESERVED_REGISTERS, want))


def fma_shape(cpu: str, features_flat: str, machine: str | None = None) -> FmaShape:
    """The shape for the LLVM CPU name ``cpu`` with the feature string ``features_flat``
    (llvmlite's "+avx2,-avx512f,..." form): widest vectors, registers, chains."""
    feats = parse_features(features_flat)
    unit = FMA_UNITS.get(cpu, UNKNOWN_CPU)
    regs = vector_registers(feats, machine)
    return FmaShape(cpu=cpu, vector_bits=widest_vector_bits(feats), registers=regs,
                    latency=unit.latency, pipes=unit.pipes,
                    accumulators=accumulators_for(unit, regs), source=unit.source)
