"""Real cache layouts as the OS reports them, written as sysfs-like trees or lscpu text: the
machines the cache sweep and the placement rule are tested on (each from what such a machine
prints; sizes as sysfs writes them, in K).

- ``INTEL_VM``: this project's 2-vCPU KVM guest (Xeon, AVX-512): 48K L1d and 2048K L2 per
  vCPU, one 491520K (480 MiB) L3 shared by both: the host's L3, as the hypervisor reports it.
- ``ZEN3_VM``: an AMD EPYC (Zen 3) 2-vCPU cloud VM: one core, two SMT threads sharing its
  32K L1d and 512K L2, and one 32 MiB L3 (the CCX).
- ``ZEN4``: a 16-core Zen 4 (2 CCX of 8 cores, SMT: CPU i and i+16 are siblings): 32K L1d,
  1 MiB L2 per core, 32 MiB L3 per CCX.
- ``SKX_2S``: a 2-socket Intel Skylake-SP server (28 cores per socket, SMT: CPU i and i+56
  siblings): 32K L1d, 1 MiB L2 per core, 38.5 MiB (39424K) non-inclusive L3 per socket.
- ``NO_SYSFS_LSCPU``: a machine whose sysfs has no cache directory (some containers, older
  ARM kernels): lscpu's older format, one instance's size and no count.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from roofbench.roof_records import RoofSet


@dataclass(frozen=True)
class Cache:
    level: int
    kind: str  # "Data", "Instruction", "Unified"
    size_k: int
    groups: list[list[int]]  # the CPUs sharing each instance


@dataclass(frozen=True)
class Layout:
    name: str
    cpus: int
    caches: list[Cache]


def _cpulist(cpus: list[int]) -> str:
    """[0, 1, 2, 5] -> '0-2,5' (the kernel's format)."""
    out, run = [], [cpus[0]]
    for c in cpus[1:]:
        if c == run[-1] + 1:
            run.append(c)
        else:
            out.append(run)
            run = [c]
    out.append(run)
    return ",".join(f"{r[0]}-{r[-1]}" if len(r) > 1 else str(r[0]) for r in out)


def per_core(n_cores: int, smt: int = 1) -> list[list[int]]:
    """Core k's CPUs: k, k + n_cores, ... (Linux numbers SMT siblings a core-count apart)."""
    return [[k + t * n_cores for t in range(smt)] for k in range(n_cores)]


def groups_of(cores: list[list[int]], size: int) -> list[list[int]]:
    """Consecutive cores, ``size`` at a time, as one sharing group each."""
    return [sorted(c for core in cores[i:i + size] for c in core)
            for i in range(0, len(cores), size)]


INTEL_VM = Layout("intel-vm", 2, [
    Cache(1, "Data", 48, per_core(2)), Cache(1, "Instruction", 64, per_core(2)),
    Cache(2, "Unified", 2048, per_core(2)), Cache(3, "Unified", 491520, [[0, 1]])])

ZEN3_VM = Layout("zen3-vm", 2, [
    Cache(1, "Data", 32, [[0, 1]]), Cache(1, "Instruction", 32, [[0, 1]]),
    Cache(2, "Unified", 512, [[0, 1]]), Cache(3, "Unified", 32768, [[0, 1]])])

_ZEN4_CORES = per_core(16, smt=2)
ZEN4 = Layout("zen4", 32, [
    Cache(1, "Data", 32, _ZEN4_CORES), Cache(1, "Instruction", 32, _ZEN4_CORES),
    Cache(2, "Unified", 1024, _ZEN4_CORES),
    Cache(3, "Unified", 32768, groups_of(_ZEN4_CORES, 8))])

_SKX_CORES = per_core(56, smt=2)
SKX_2S = Layout("skx-2s", 112, [
    Cache(1, "Data", 32, _SKX_CORES), Cache(1, "Instruction", 32, _SKX_CORES),
    Cache(2, "Unified", 1024, _SKX_CORES),
    Cache(3, "Unified", 39424, groups_of(_SKX_CORES, 28))])

LAYOUTS = [INTEL_VM, ZEN3_VM, ZEN4, SKX_2S]


def write_sysfs(root: Path, layout: Layout, with_cache: bool = True) -> Path:
    """``root``/cpu<N>/cache/index<i>/{level,type,size,shared_cpu_list} for every CPU of
    ``layout`` (without the cache directories when ``with_cache`` is False); returns root."""
    for cpu in range(layout.cpus):
        d = root / f"cpu{cpu}"
        d.mkdir(parents=True, exist_ok=True)
        if not with_cache:
            continue
        for i, c in enumerate(layout.caches):
            group = next(g for g in c.groups if cpu in g)
            idx = d / "cache" / f"index{i}"
            idx.mkdir(parents=True, exist_ok=True)
            (idx / "level").write_text(f"{c.level}\n")
            (idx / "type").write_text(f"{c.kind}\n")
            (idx / "size").write_text(f"{c.size_k}K\n")
            (idx / "shared_cpu_list").write_text(_cpulist(group) + "\n")
    return root


# ``lscpu -B`` on the Intel VM (util-linux 2.39: totals in bytes, instance counts).
INTEL_VM_LSCPU_B = """\
Architecture:                            x86_64
CPU(s):                                  2
On-line CPU(s) list:                     0,1
Vendor ID:                               GenuineIntel
Model name:                              Intel(R) Xeon(R) Processor
Thread(s) per core:                      1
Core(s) per socket:                      2
Socket(s):                               1
L1d cache:                               98304 (2 instances)
L1i cache:                               131072 (2 instances)
L2 cache:                                4194304 (2 instances)
L3 cache:                                503316480 (1 instance)
NUMA node(s):                            1
"""

# An older lscpu (util-linux 2.32) on a 4-CPU machine whose sysfs has no cache directory:
# one instance's size, no count.
NO_SYSFS_LSCPU = """\
Architecture:        x86_64
CPU(s):              4
On-line CPU(s) list: 0-3
Thread(s) per core:  2
Core(s) per socket:  2
Socket(s):           1
Model name:          AMD EPYC 7B13
L1d cache:           32K
L1i cache:           32K
L2 cache:            512K
L3 cache:            32768K
"""


def cache_roofset(device: str = "test cpu with caches",
                  rates: dict[str, float] | None = None, dram: float = 15e9,
                  slow_l3_at: int | None = 360 * (1 << 20)) -> RoofSet:
    """A CPU roof set as the sweep writes it for the Intel VM (2 cores: L1 48K and L2 2 MiB
    each, one 480 MiB L3), with hand-set rates (B/s) per level; the L3 sweep's largest point
    ran at DRAM speed when ``slow_l3_at`` is given (what a VM sharing its host's L3 shows)."""
    from roofbench.cache_records import CacheSweep, SweepPoint
    from roofbench.roof_records import Roof, RoofSet

    rates = rates or {"l1": 500e9, "l2": 300e9, "l3": 60e9}
    inst = {"l1": (48 << 10, 2, 1), "l2": (2 << 20, 2, 1), "l3": (480 << 20, 1, 2)}
    roofs = [Roof("dram stream-add-nt", "memory", dram, "measured", level="dram"),
             Roof("fp64 FMA peak", "compute", 2e11, "measured", precision="fp64"),
             Roof("fp32 FMA peak", "compute", 4e11, "measured", precision="fp32")]
    for level, rate in rates.items():
        size, n, per = inst[level]
        for access, f in (("read", 1.0), ("read+write", 0.8)):
            pts = [SweepPoint(level, int(size * n * 0.5), access, rate * f, rate * f * 0.9)]
            if level == "l3" and slow_l3_at:
                pts.append(SweepPoint(level, slow_l3_at, access, dram * 0.6, dram * 0.5))
            sweep = CacheSweep(level, access, size, n, per, 2, "sysfs",
                               [pts[0].working_set_bytes, pts[-1].working_set_bytes], pts)
            roofs.append(Roof(f"{level} sweep-{access}", "memory", rate * f, "measured",
                              level=level, cache=sweep, evidence={"probe": "cache-sweep"}))
    return RoofSet(device, roofs)
