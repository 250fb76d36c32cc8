"""Machines unlike the developer's: the size rule, the memory budget, cache reports, thread
counts and the vector-width choice for simulated CPUs (LLC 1 MiB..512 MiB, 1..64 cores,
4..512 GiB, AVX2-only and AVX-512, Intel and AMD sysfs/lscpu reports), so that no real machine
can turn `make test` red by being different. Nothing here measures speed."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest
from roofbench.bench.backends.cpu import CpuBackend
from roofbench.bench.suite.session import select_cases
from roofbench.kernels.registry import workloads
from roofbench.kernels.spec import Case, SizeContext
from roofbench.roofs.probes import cpu_features as feat
from roofbench.roofs.probes import cpu_fma as fma
from roofbench.roofs.probes import cpu_stream as cs
from roofbench.roofs.probes import host_memory as hm
from roofbench.roofs.probes.fma_model import FMA_UNITS, accumulators_for, fma_shape

from roofbench import cpu_cache as llc

KiB, MiB, GiB = 1 << 10, 1 << 20, 1 << 30


@dataclass(frozen=True)
class Machine:
    name: str
    llc: int
    cores: int
    available: int  # MemAvailable


MACHINES = [
    Machine("tiny-no-l3", 1 * MiB, 1, 4 * GiB),
    Machine("amd-zen4-2c", 32 * MiB, 2, 22 * GiB),
    Machine("intel-emr-2c", 260 * MiB, 2, 22 * GiB),
    Machine("intel-emr-2c-small-mem", 260 * MiB, 2, 4 * GiB),
    Machine("amd-genoa-64c", 256 * MiB, 64, 500 * GiB),
    Machine("big-llc", 512 * MiB, 64, 128 * GiB),
    Machine("big-llc-4g", 512 * MiB, 8, 4 * GiB),
]


class SimCpu(CpuBackend):
    """The CPU backend with the machine facts of a simulated machine."""

    def __init__(self, m: Machine) -> None:
        super().__init__()
        self.m = m

    def last_level_cache(self) -> int:
        return self.m.llc

    def memory_budget(self) -> int:
        return hm.case_memory_budget(self.m.available)


MAIN = {"vector_add": "a", "l2norm": "a", "rownorm": "x", "gemv": "W"}  # the memory-bound ones


def _grow(size: tuple[int, ...]) -> tuple[int, ...]:
    return (size[0] + 1, *size[1:])  # one more unit (element or row)


def _largest_footprint(w, dtype: str, size) -> int:
    return max(Case(w, v, dtype, size).footprint() for v in w.variants.values()
               if "cpu" in v.impls and dtype in v.dtypes)


@pytest.mark.parametrize("m", MACHINES, ids=lambda m: m.name)
def test_default_sizes_follow_the_rule_and_always_run(m: Machine) -> None:
    be = SimCpu(m)
    budget = be.memory_budget()
    cases, skipped = select_cases(be)
    assert cases
    # No default case is refused for its size on any machine (only GPU-only variants skip).
    assert not [s for s in skipped if "budget" in (s.outcome.error or "")], [
        s.outcome.error for s in skipped
    ]
    for c in cases:
        assert c.footprint() <= budget, c.key
        name = c.workload.name
        if name not in MAIN:
            continue
        main = c.buffers()[MAIN[name]].nbytes
        target = max(4 * m.llc, 64 * MiB)
        # The rule, in whole bytes: at least 4x LLC (and 64 MiB), unless one more element or
        # row would push the largest variant of this workload past the budget.
        if main < target:
            assert _largest_footprint(c.workload, c.dtype, _grow(c.size)) > budget, c.key
        else:  # and not more than needed: one unit fewer would miss the target
            unit = main // c.size[0]
            assert main - unit < target, c.key


@pytest.mark.parametrize("llc,budget", [(1 * MiB, 1 * GiB), (260 * MiB, 2 * GiB),
                                        (260 * MiB, 1365 * MiB), (512 * MiB, 2 * GiB),
                                        (333 * MiB + 7, 2 * GiB - 1)])
@pytest.mark.parametrize("dtype", ["fp32", "fp64"])
def test_size_count_is_exact_at_the_edges(llc: int, budget: int, dtype: str) -> None:
    ctx = SizeContext("cpu", llc, budget, dtype)
    item = np.dtype(np.float32 if dtype == "fp32" else np.float64).itemsize
    for arrays in (3, 6):
        n = ctx.elements(arrays)
        assert n * item * arrays <= budget
        assert n * item >= ctx.target_bytes() or (n + 1) * item * arrays > budget


def test_budget_is_a_third_of_free_memory_at_most_2_gib() -> None:
    for avail, want in [(4 * GiB, 4 * GiB // 3), (6 * GiB, 2 * GiB), (24 * GiB, 2 * GiB),
                        (512 * GiB, 2 * GiB), (0, 0)]:
        assert hm.case_memory_budget(avail) == want
    meminfo = "MemTotal:       24576000 kB\nMemFree:  100 kB\nMemAvailable:   20000000 kB\n"
    assert hm.available_memory_bytes(meminfo) == 20000000 * 1024


# ----------------------------------------------------------------------------- cache reports


def _sysfs(root: Path, caches: dict[int, list[tuple[int, str, str, str]]]) -> Path:
    """A fake /sys/devices/system/cpu: cpu -> [(level, type, size, shared_cpu_list)]."""
    for cpu, entries in caches.items():
        for i, (level, ctype, size, shared) in enumerate(entries):
            d = root / f"cpu{cpu}" / "cache" / f"index{i}"
            d.mkdir(parents=True)
            (d / "level").write_text(f"{level}\n")
            (d / "type").write_text(f"{ctype}\n")
            (d / "size").write_text(f"{size}\n")
            (d / "shared_cpu_list").write_text(f"{shared}\n")
    return root


def test_intel_sysfs_one_shared_l3(tmp_path: Path) -> None:
    # The Emerald Rapids VM of results/intel-r-xeon-r-processor: 2 cores, one 260 MiB L3
    # shared by both.
    root = _sysfs(tmp_path, {c: [(1, "Data", "48K", str(c)), (1, "Instruction", "32K", str(c)),
                                 (2, "Unified", "2048K", str(c)),
                                 (3, "Unified", "266240K", "0-1")] for c in (0, 1)})
    assert llc.llc_from_sysfs(root) == 260 * MiB


def test_amd_sysfs_sums_every_ccd_l3(tmp_path: Path) -> None:
    # Zen 4, 16 cores with SMT, 2 CCDs of 32 MiB: each L3 listed by the CPUs sharing it.
    caches = {}
    for cpu in range(32):
        ccd = (cpu % 16) // 8
        shared = "0-7,16-23" if ccd == 0 else "8-15,24-31"
        caches[cpu] = [(1, "Data", "32K", str(cpu)), (2, "Unified", "1024K", str(cpu)),
                       (3, "Unified", "32768K", shared)]
    assert llc.llc_from_sysfs(_sysfs(tmp_path, caches)) == 64 * MiB


def test_sysfs_without_l3_takes_the_l2(tmp_path: Path) -> None:
    root = _sysfs(tmp_path, {0: [(1, "Data", "32K", "0"), (2, "Unified", "1024K", "0")]})
    assert llc.llc_from_sysfs(root) == 1 * MiB
    assert llc.llc_from_sysfs(tmp_path / "nothing-here") is None


@pytest.mark.parametrize("text,size", [
    ("L1d cache: 96 KiB (2 instances)\nL1i cache: 64 KiB (2 instances)\n"
     "L2 cache: 4 MiB (2 instances)\nL3 cache: 260 MiB (1 instance)\n", 260 * MiB),
    ("L1d cache:  98304 (2 instances)\nL2 cache:  4194304 (2 instances)\n"
     "L3 cache:  272629760 (1 instance)\n", 260 * MiB),  # lscpu -B, Intel
    ("L1d cache: 2 MiB (64 instances)\nL1i cache: 2 MiB (64 instances)\n"
     "L2 cache: 64 MiB (64 instances)\nL3 cache: 256 MiB (8 instances)\n", 256 * MiB),  # Genoa
    ("L1d cache:  65536 (2 instances)\nL2 cache:  2097152 (2 instances)\n"
     "L3 cache:  33554432 (1 instance)\n", 32 * MiB),  # lscpu -B, Zen 4 VM
    ("L1d cache: 32 KiB (1 instance)\nL2 cache: 1 MiB (1 instance)\n", 1 * MiB),  # no L3
    ("Architecture: x86_64\n", None),
])
def test_lscpu_reports(text: str, size: int | None) -> None:
    assert llc.llc_from_lscpu(text) == size


# ----------------------------------------------------------------------------- vector width

AVX2_ONLY = "+avx,+avx2,+fma,+f16c,-avx512f,-avx512bw,-avx512vl,+sse4.2"
AVX512_INTEL = "+avx,+avx2,+fma,+avx512f,+avx512bw,+avx512vl,+avx512dq,-amx-tile,+sse4.2"
AVX512_ZEN4 = "+avx,+avx2,+fma,+avx512f,+avx512bf16,+avx512vl,+sse4.2"
SSE_ONLY = "+sse2,+sse4.2,-avx,-avx2"


@pytest.mark.parametrize("flat,bits", [(AVX2_ONLY, 256), (AVX512_INTEL, 512),
                                       (AVX512_ZEN4, 512), (SSE_ONLY, 128), ("", 128)])
def test_widest_vector_bits(flat: str, bits: int) -> None:
    assert feat.widest_vector_bits(feat.parse_features(flat)) == bits


def test_widest_vector_env_lifts_prefer_256_bit_only_for_avx512() -> None:
    for flat in (AVX512_INTEL, AVX512_ZEN4):
        env = feat.widest_vector_env(flat, environ={})
        assert env == {"NUMBA_CPU_FEATURES": flat + ",-prefer-256-bit"}
    assert feat.widest_vector_env(AVX2_ONLY, environ={}) == {}  # 256-bit is already the widest
    assert feat.widest_vector_env(SSE_ONLY, environ={}) == {}
    # A user's own choice stands.
    assert feat.widest_vector_env(AVX512_INTEL, environ={"NUMBA_CPU_FEATURES": "+avx2"}) == {}
    assert feat.widest_vector_env(AVX512_INTEL, environ={"NUMBA_CPU_NAME": "znver4"}) == {}


@pytest.mark.parametrize("cpu,flat,bits,regs,acc", [
    ("znver3", AVX2_ONLY, 256, 16, 12),  # 4 x 2 = 8 needed, 12 of the 14 free ymm
    ("haswell", AVX2_ONLY, 256, 16, 14),  # 5 x 2 = 10 needed: capped by the registers
    ("skylake-avx512", AVX512_INTEL, 512, 32, 12),
    ("znver4", AVX512_ZEN4, 512, 32, 12),  # its two 256-bit pipes counted: 8 needed
    ("some-future-cpu", AVX2_ONLY, 256, 16, 14),  # unknown: the most demanding known need
    ("x86-64", SSE_ONLY, 128, 16, 14),
])
def test_fma_shape_follows_the_target(cpu, flat, bits, regs, acc) -> None:
    shape = fma_shape(cpu, flat, machine="x86_64")
    assert (shape.vector_bits, shape.registers, shape.accumulators) == (bits, regs, acc)
    assert shape.needed <= shape.accumulators <= regs - 2  # every pipe busy, nothing spilled
    assert shape.lanes(8) == bits // 64 and shape.lanes(4) == bits // 32


def test_every_tabled_cpu_gets_enough_chains_that_fit() -> None:
    for cpu, unit in FMA_UNITS.items():
        for regs in (16, 32):
            acc = accumulators_for(unit, regs)
            assert acc <= regs - 2, cpu
            if unit.latency * unit.pipes <= regs - 2:
                assert acc >= unit.latency * unit.pipes, cpu
    assert fma_shape("neoverse-v2", "+neon", machine="aarch64").registers == 32


# ----------------------------------------------------------------------------- thread counts


@pytest.mark.parametrize("threads", [1, 2, 3, 16, 64])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_fma_rows_one_page_per_thread(threads: int, dtype) -> None:
    row = 12 * 16
    x = fma.aligned_rows(threads, row, np.dtype(dtype), np.random.default_rng(0))
    assert x.shape[0] == threads and x.shape[1] >= row
    starts = [x[t].ctypes.data for t in range(threads)]
    assert all(s % 4096 == 0 for s in starts)
    assert len({s // 4096 for s in starts}) == threads  # no two threads share a page
    assert np.all((x[:, :row] >= 0.5) & (x[:, :row] <= 1.5))


@pytest.mark.parametrize("m", MACHINES, ids=lambda m: m.name)
def test_stream_arrays_fit_their_budget_on_every_machine(m: Machine) -> None:
    budget = cs.default_stream_budget(m.available)
    for factor in (4.0, 8.0):
        n = cs.stream_elements(m.llc, budget, factor=factor)
        assert 3 * 8 * n <= max(budget, 3 * 8 * 1024)
        assert 8 * n >= factor * m.llc or 3 * 8 * (n + 1024) > budget


def test_workloads_cover_the_cpu() -> None:
    # Every memory-bound workload the size rule speaks of has a CPU implementation.
    ws = workloads()
    for name in MAIN:
        assert any("cpu" in v.impls for v in ws[name].variants.values())
