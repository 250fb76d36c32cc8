"""What the CPU probes and non-temporal-store kernels compile to on x86 CPUs this machine is not,
and on this machine.

numba compiles for whichever CPU ``NUMBA_CPU_NAME`` / ``NUMBA_CPU_FEATURES`` name, on any x86
host; nothing is run (tests/standins/codegen_matrix.py runs tests/roofs/codegen_child.py, which
only compiles, then reads the assembly). The matrix is the ten CPUs below and the host, one more
row compiled with numba's defaults. For each target the emitted loops must show:

- FMA probe: packed FMAs of the widest vectors the target has, at least latency x pipes
  independent chains (distinct accumulator registers), no stack operand in the loop; in the
  environment the probe runs in (its own process: ``widest_vector_env``) and in numba's
  default tuning (the in-process fallback) alike.
- STREAM scale/add/triad: a vector loop at the width numba's default tuning gives (they run in
  the bench process): the widest, except on Intel AVX-512 cores, whose LLVM tuning prefers
  256-bit vectors for auto-vectorised loops (a memory-bound loop runs alike at both widths;
  the STREAM roofs there matched a zmm C/OpenMP triad). copy may become a memcpy call.
  Plain stores: the cached STREAM kernels never stream. No gather.
- non-temporal-store kernels (and rownorm's row kernels built on nt_stores.scale_row): every
  vector store of the main loop non-temporal (vmovnt*), whole 64-byte lines, no vector spill,
  no gather or scatter anywhere in the kernel.
- the cache sweep's read and read+write passes, in the environment its child runs in: loads
  (and stores) of the widest vectors, plain stores, no gather, no spill.

The kernels' own assertions (tests/kernels/test_cpu_kernels.py) run over the same matrix.

The oracle (ORACLE, each row with its source) is written from LLVM 19's scheduling models
(llvm-mca-19 -mcpu=<cpu> -instruction-info on vfmadd231pd), uops.info, Agner Fog's tables and
the vendors' optimisation guides, not from the code's table (roofs/probes/fma_model.py);
``test_oracle_matches_llvm_scheduling_models`` checks its latencies against LLVM's models when
llvm-mca 17+ is installed. docs/cpu-roofs.md has the same table with the sources in full. The
host row takes the oracle's row of its CPU name; a CPU the oracle does not name falls back to
the code's table (then the host row checks the compiled probe against the model, not the model
against a source).
"""

from __future__ import annotations

import re
import shutil
import subprocess
from dataclasses import dataclass

import numpy as np
import pytest
from codegen_matrix import FOREIGN, HOST, MATRIX, NOT_X86, X86, host_cpu, matrix_facts
from patience import patience
from roofbench.roofs.probes import cpu_fma, x86_asm
from roofbench.roofs.probes.cpu_features import widest_vector_env
from roofbench.roofs.probes.fma_model import fma_shape


@dataclass(frozen=True)
class Target:
    name: str  # the matrix row (codegen_matrix.MATRIX)
    cpu: str  # the LLVM CPU name
    widest: int  # bits of the widest vector registers
    registers: int
    latency: int  # FMA latency, cycles
    pipes: int  # FMAs of the widest vector per cycle
    stream_bits: int  # auto-vectorised loops under numba's default tuning
    features: str  # llvmlite's feature string on such a machine

    @property
    def needed(self) -> int:
        return self.latency * self.pipes


# cpu: widest bits, registers, FMA latency, FMAs of the widest vector per cycle, default-
# tuning width of auto-vectorised loops. Sources: [llvm] LLVM 19 model via llvm-mca
# (latency, reciprocal throughput); [uops] uops.info VFMADD231PD; [agner] Agner Fog's tables;
# [amd] AMD Software Optimization Guide; [intel] Intel Optimization Reference Manual.
ORACLE = {
    "znver2": (256, 16, 5, 2, 256),  # [llvm] 5, 0.5; [uops] ZEN2; [amd] 56305
    "znver3": (256, 16, 4, 2, 256),  # [llvm] 4, 0.5; [amd] 56665
    # [llvm] zmm 4, 1.0; [uops] ZEN4; [amd] 57647: a zmm FMA takes both 256-bit pipes
    "znver4": (512, 32, 4, 1, 512),
    "haswell": (256, 16, 5, 2, 256),  # [llvm] 5, 0.5; [uops] HSW; [agner]
    "skylake": (256, 16, 4, 2, 256),  # [llvm] 4, 0.5; [uops] SKL; [agner]
    # [llvm] zmm 4, 0.5; [uops] SKX; [intel] two 512-bit FMA units (ports 0+1 and 5)
    "skylake-avx512": (512, 32, 4, 2, 256),
    # [llvm] zmm latency 4 (its rthroughput 1.0 is the client core's); [intel] two units
    "icelake-server": (512, 32, 4, 2, 256),
    "sapphirerapids": (512, 32, 4, 2, 256),  # same
    # as sapphirerapids; the EMR VM measured 176.6 GFLOP/s FP64 on 2 cores: two units
    "emeraldrapids": (512, 32, 4, 2, 256),
    # no microarchitecture: [llvm] generic model 5, 0.5, as the slowest AVX2 cores
    "x86-64-v3": (256, 16, 5, 2, 256),
}


def _host_row() -> Target:
    cpu, features = host_cpu()
    shape = fma_shape(cpu, features, machine="x86_64")
    row = ORACLE.get(cpu)
    if row is None or row[0] != shape.vector_bits:  # a CPU the oracle does not name
        # LLVM's Intel AVX-512 tunings prefer 256-bit auto-vectorised loops, AMD's do not.
        stream = 256 if shape.vector_bits == 512 and not cpu.startswith("znver") \
            else shape.vector_bits
        row = (shape.vector_bits, shape.registers, shape.latency, shape.pipes, stream)
    return Target(HOST, cpu, *row, features)


TARGETS = [Target(t.name, t.name, *ORACLE[t.name], t.features) for t in FOREIGN]
if X86:
    TARGETS.append(_host_row())
assert not X86 or [t.name for t in TARGETS] == [t.name for t in MATRIX]

pytestmark = pytest.mark.skipif(not X86, reason=NOT_X86)


@pytest.fixture(scope="module")
def codegen(tmp_path_factory) -> dict[tuple[str, str], dict]:
    """Every target's facts: numba's default tuning ("bench") for all, the FMA probe's own
    environment ("fma-child") where it differs (the 512-bit targets). The "fma-child" rows
    compile only what their tests read, the FMA probe and the cache sweep, in "all"'s order
    (the probe first, the sweep last: the same facts as after stream and nt_stores, compared
    on every row in docs/tests.md; 8 of a child's 10.6 CPU seconds were those two units)."""
    rows = {t.name: t for t in MATRIX}
    extra = [(rows[t.name], widest_vector_env(t.features, environ={})["NUMBA_CPU_FEATURES"])
             for t in TARGETS if t.widest == 512]
    facts = matrix_facts(["all"], tmp_path_factory.mktemp("numba-cache"), jobs=extra,
                         job_units=["fma", "sweep"])
    return {(name, "bench" if f is None else "fma-child"): res
            for (name, f), res in facts.items()}


def _fma_envs(codegen, t: Target) -> list[tuple[str, dict]]:
    return [(k, codegen[(t.name, k)]["fma"]) for k in ("bench", "fma-child")
            if (t.name, k) in codegen]


IDS = [t.name for t in TARGETS]


# ----------------------------------------------------------------------------- FMA probe


@pytest.mark.parametrize("t", TARGETS, ids=IDS)
def test_fma_probe_uses_the_widest_vectors(codegen, t: Target) -> None:
    for env, fma in _fma_envs(codegen, t):
        assert fma["shape"]["vector_bits"] == t.widest, env
        for prec in ("fp64", "fp32"):
            loop = fma[prec]
            assert loop["fma_bits"] == [t.widest], (env, prec, loop)
            assert loop["vector_bits"] == t.widest, (env, prec, loop)


@pytest.mark.parametrize("t", TARGETS, ids=IDS)
def test_fma_probe_chains_cover_latency_times_pipes(codegen, t: Target) -> None:
    for env, fma in _fma_envs(codegen, t):
        shape = fma["shape"]
        assert shape["needed_chains"] >= t.needed, (env, shape)  # the model is not optimistic
        for prec in ("fp64", "fp32"):
            loop = fma[prec]
            assert loop["fma_chains"] >= t.needed, (env, prec, loop)
            assert loop["fma_chains"] == shape["accumulators"], (env, prec, loop)
            # The hot loop is the probe's: STEPS sweeps over every chain per trip (or more,
            # should LLVM unroll it further).
            assert loop["fmas"] % loop["fma_chains"] == 0
            assert loop["fmas"] >= cpu_fma.STEPS * loop["fma_chains"]


@pytest.mark.parametrize("t", TARGETS, ids=IDS)
def test_fma_probe_keeps_its_chains_in_registers(codegen, t: Target) -> None:
    for env, fma in _fma_envs(codegen, t):
        assert fma["shape"]["registers"] == t.registers
        assert fma["shape"]["accumulators"] + 2 <= t.registers  # chains + the two constants
        for prec in ("fp64", "fp32"):
            assert fma[prec]["stack_operands"] == 0, (env, prec, fma[prec])


# ----------------------------------------------------------------------------- STREAM


@pytest.mark.parametrize("t", TARGETS, ids=IDS)
def test_stream_kernels_are_vector_loops_with_plain_stores(codegen, t: Target) -> None:
    stream = codegen[(t.name, "bench")]["stream"]
    for name in ("scale", "add", "triad"):
        loop = stream[name]
        assert loop["store_bits"] == [t.stream_bits], (name, loop)
        assert loop["nontemporal_stores"] == 0, (name, loop)  # the cached kernels never stream
        assert loop["vector_spills"] == 0, (name, loop)
        assert loop["gathers"] == [], (name, loop)
    copy = stream["copy"]
    if copy["loop"] is None:  # LLVM's loop-idiom pass: the copy is a memcpy (glibc's code)
        assert copy["memcpy"] is True
    else:
        assert copy["store_bits"] == [t.stream_bits] and copy["nontemporal_stores"] == 0


@pytest.mark.parametrize("t", TARGETS, ids=IDS)
def test_streaming_store_kernels_stream_whole_lines(codegen, t: Target) -> None:
    for name, loop in codegen[(t.name, "bench")]["nt_stores"].items():
        assert loop["loop"] is not None, name
        assert loop["stores"] > 0 and loop["nontemporal_stores"] == loop["stores"], (name, loop)
        # The explicit 64-byte vector: one zmm where the target has them, two ymm halves
        # otherwise; either way whole cache lines per trip.
        assert loop["store_bits"] == [t.widest], (name, loop)
        assert loop["stores"] * t.widest % (64 * 8) == 0, (name, loop)
        assert loop["vector_spills"] == 0, (name, loop)
        assert loop["gathers"] == [], (name, loop)  # peel and tail: contiguous or scalar


# ----------------------------------------------------------------------------- cache sweep


@pytest.mark.parametrize("t", TARGETS, ids=IDS)
def test_cache_sweep_passes_move_the_widest_vectors(codegen, t: Target) -> None:
    # As the sweep's child compiles them (its own process, widest_vector_env), and as numba's
    # default tuning does (the loops are IR of 64-byte vectors: prefer-256-bit on the Intel
    # AVX-512 rows does not narrow them): the read pass a loop of vector loads of the widest
    # width, eight lines or more per trip, no store; read+write two loads per store, plain
    # stores of that width. Moves only: no vector ALU instruction (one per line loaded held L1
    # at 0.85 of carm-roofline's figure), every address a base register plus a constant (no
    # index register: Intel cores split such micro-ops). No gather, no non-temporal store, no
    # spill, in either.
    for env in {"fma-child" if (t.name, "fma-child") in codegen else "bench", "bench"}:
        sweep = codegen[(t.name, env)]["sweep"]
        read, rw = sweep["read"], sweep["read+write"]
        lines = 512 // t.widest * 8  # vector loads per trip of eight lines
        assert read["loop"] and read["load_bits"] == [t.widest], read
        assert read["loads"] >= lines and read["stores"] == 0, read
        assert rw["loop"] and rw["store_bits"] == [t.widest] == rw["load_bits"], rw
        assert rw["loads"] == 2 * rw["stores"] > 0, rw
        for facts in (read, rw):
            assert facts["vector_alu"] == [] and facts["indexed"] == [], facts
            assert facts["gathers"] == [] and facts["nontemporal"] == 0, facts
            assert facts["vector_spills"] == 0, facts


# ----------------------------------------------------------------------------- the oracle


def test_targets_cover_the_required_cpus() -> None:
    assert IDS[-1] == HOST and len(IDS) == len(set(IDS))
    assert set(IDS[:-1]) == set(ORACLE) == {
        "znver2", "znver3", "znver4", "haswell", "skylake", "skylake-avx512", "icelake-server",
        "sapphirerapids", "emeraldrapids", "x86-64-v3"}


@pytest.mark.parametrize("t", TARGETS, ids=IDS)
def test_model_agrees_with_the_oracle(t: Target) -> None:
    # The code's table (fma_model) against this one, for the CPUs it names; x86-64-v3 falls
    # back to the most demanding latency x pipes of the cores of its width.
    shape = fma_shape(t.cpu, t.features, machine="x86_64")
    assert (shape.vector_bits, shape.registers) == (t.widest, t.registers)
    assert shape.needed >= t.needed
    assert t.needed <= shape.accumulators <= t.registers - 2


def _llvm_mca() -> str | None:
    for name in ("llvm-mca-19", "llvm-mca-18", "llvm-mca-17", "llvm-mca"):
        path = shutil.which(name)
        if not path:
            continue
        out = subprocess.run([path, "--version"], capture_output=True, text=True).stdout
        m = re.search(r"version (\d+)", out)
        if m and int(m.group(1)) >= 17:  # znver4 and sapphirerapids models
            return path
    return None


def _mca_fma(mca: str, cpu: str, bits: int) -> tuple[int, float]:
    reg = {256: "ymm", 512: "zmm"}[bits]
    p = subprocess.run([mca, "-mtriple=x86_64", f"-mcpu={cpu}", "-instruction-info",
                        "-iterations=1"], input=f"vfmadd231pd %{reg}1, %{reg}2, %{reg}0\n",
                       capture_output=True, text=True, timeout=patience(60))
    m = re.search(r"^\s*\d+\s+(\d+)\s+([\d.]+)\s+.*vfmadd231pd", p.stdout, re.M)
    assert m, p.stdout + p.stderr
    return int(m.group(1)), float(m.group(2))


@pytest.mark.parametrize("t", TARGETS, ids=IDS)
def test_oracle_matches_llvm_scheduling_models(t: Target) -> None:
    mca = _llvm_mca()
    if mca is None:
        pytest.skip("no llvm-mca 17+ (apt-get install llvm-19): LLVM's scheduling models "
                    "not consulted")
    latency, rthroughput = _mca_fma(mca, t.cpu, t.widest)
    assert latency == t.latency
    # LLVM models Ice Lake server and Sapphire/Emerald Rapids with the client core's single
    # 512-bit FMA unit; the oracle counts the two units of the server parts. Never fewer.
    assert t.pipes >= round(1 / rthroughput)


# ----------------------------------------------------------------------------- planted faults
# The readers above must fail on the faults they exist for: run here, on this machine's own
# target, with shapes the model would never choose.


def _host_fma_loop(lanes: int, accumulators: int) -> x86_asm.Loop:
    from numba import types

    kernel = cpu_fma.fma_kernel(lanes, accumulators)
    sig = (types.Array(types.float64, 2, "C"), types.float64, types.float64, types.intp)
    kernel.compile(sig)
    asm = kernel.inspect_asm(sig)
    loop = x86_asm.fma_loop(asm)
    assert loop is not None
    return loop


def _host_registers() -> int:
    return cpu_fma.probe_shape().registers


def test_planted_spill_is_seen() -> None:
    # Twice the register file in chains cannot stay in registers.
    loop = _host_fma_loop(2, _host_registers() * 2)
    assert loop.stack_operands() and loop.vector_spills()


def test_planted_narrow_vectors_are_seen() -> None:
    loop = _host_fma_loop(2, 8)  # 2 FP64 lanes: 128-bit
    assert {b for _, b, _ in loop.fmas()} == {128}


def test_planted_short_chains_are_seen() -> None:
    assert _host_fma_loop(4, 3).chains() == 3  # fewer than any target's latency x pipes


def test_asm_reader_on_a_known_listing() -> None:
    asm = """f:
\tmovq\t%rsp, %rbp
.LBB0_1:
\tvmovupd\t(%rdi,%rax,8), %ymm0
.LBB0_2:
\tvfmadd213pd\t%ymm1, %ymm0, %ymm2
\tvfmadd213pd\t%ymm1, %ymm0, %ymm3
\tvfmadd213pd\t%ymm1, %ymm0, %ymm2
\tvmovupd\t%ymm3, -40(%rbp)
\tvmovss\t%xmm4, (%rcx)
\tdecq\t%r10
\tjne\t.LBB0_2
\tvmovntpd\t%ymm2, (%rsi)
\tjb\t.LBB0_1
"""
    inner = x86_asm.fma_loop(asm)
    assert inner.label == ".LBB0_2" and inner.chains() == 2
    assert inner.vector_spills(frame_pointer=True) and not inner.stack_operands()
    outer = x86_asm.store_loop(asm.replace("-40(%rbp)", "(%rdx)"))
    assert outer.label == ".LBB0_2"  # innermost first: the outer loop contains it
    assert [m for m, _ in outer.stores()] == ["vmovupd"]  # the scalar vmovss is no vector
    facts = x86_asm.loop_facts(x86_asm.loops(asm)[1], asm)
    assert facts["nontemporal_stores"] == 1 and facts["stack_operands"] == 1
    assert np.isclose(facts["vector_bits"], 256)
    # The vmovntpd sits in the outer loop only: no innermost loop stores non-temporally.
    assert x86_asm.store_loop(asm, nontemporal=True) is None
    # Only numba's parallel loop body is the kernel; its wrappers are not.
    listing = ("wrapper:\n\tvmovups\t%ymm0, (%rdi)\n"
               "__gufunc__._ZN13__numba_parfor_gufunc_1:\n\tret\n")
    part = x86_asm.kernel_part(listing)
    assert part.startswith("__gufunc__") and "%ymm0" not in part
    assert x86_asm.kernel_part("f:\n\tret\n") == "f:\n\tret\n"
