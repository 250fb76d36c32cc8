"""The CPU's cache levels as the OS reports them: sysfs first, ``lscpu -B`` as the fallback.

One level (1, 2, 3) is a list of instances, each a size and the set of CPUs sharing it
(``shared_cpu_list``): Intel's L3 is one instance shared by a socket's cores, AMD's one per
CCX, an L1d or L2 one per core (two hyperthreads share it). What a probe or a case can use of
a level is the sum of the instances its CPUs touch (``CacheLevel.capacity``). Data and unified
caches only; instruction caches are left out.

Sources, in order: sysfs ``/sys/devices/system/cpu/cpu*/cache/index*/{level,type,size,
shared_cpu_list}``; ``lscpu -B`` (the total per level over its instances, "L2 cache: 4194304
(2 instances)", CPUs shared evenly over the instances, since lscpu does not say which); none
(an empty topology: no cache roofs, every case placed on DRAM). numba-free, part of the
shared root: the probes, the placement rule and the tests read the same figures.
"""

from __future__ import annotations

import os
import re
import subprocess
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path

from roofbench.cpu_cache import parse_size
from roofbench.roof_context import cpu_list_parts

SYSFS_CPU = Path("/sys/devices/system/cpu")


def parse_cpu_list(text: str) -> frozenset[int]:
    """'0-3,8,10-11' -> {0, 1, 2, 3, 8, 10, 11} (the kernel's cpulist format)."""
    # Unchecked, unlike roof_context.parse_cpu_list: sysfs writes it ("" for no CPU).
    return frozenset(c for _, lo, hi in cpu_list_parts(text)
                     for c in range(int(lo), int(hi or lo) + 1))


@dataclass(frozen=True)
class CacheInstance:
    size: int  # bytes
    cpus: frozenset[int]  # the CPUs sharing it


@dataclass(frozen=True)
class CacheLevel:
    level: int
    instances: tuple[CacheInstance, ...]

    def touched(self, cpus: frozenset[int] | None = None) -> list[CacheInstance]:
        """The instances at least one of ``cpus`` uses (every instance for None)."""
        return [i for i in self.instances if cpus is None or i.cpus & cpus]

    def capacity(self, cpus: frozenset[int] | None = None) -> int:
        """Bytes of this level the given CPUs hold between them: the sum of the instances
        they touch (a core's private L2, counted once for its two hyperthreads)."""
        return sum(i.size for i in self.touched(cpus))

    def instance_bytes(self) -> int:
        return max(i.size for i in self.instances)


@dataclass(frozen=True)
class CacheTopology:
    levels: tuple[CacheLevel, ...]  # innermost first
    source: str  # "sysfs", "lscpu" or "none"
    cpus: frozenset[int] = field(default_factory=frozenset)  # the CPUs it describes

    def level(self, n: int) -> CacheLevel | None:
        return next((lv for lv in self.levels if lv.level == n), None)

    def last_level(self) -> CacheLevel | None:
        return self.levels[-1] if self.levels else None


def from_sysfs(cpu_root: Path = SYSFS_CPU) -> CacheTopology | None:
    """The topology sysfs reports, or None when it reports no data or unified cache."""
    found: dict[tuple[int, frozenset[int]], int] = {}
    cpus: set[int] = set()
    for idx in sorted(cpu_root.glob("cpu[0-9]*/cache/index[0-9]*")):
        try:
            if (idx / "type").read_text().strip() == "Instruction":
                continue
            level = int((idx / "level").read_text())
            shared = parse_cpu_list((idx / "shared_cpu_list").read_text())
            size = parse_size((idx / "size").read_text())
        except (OSError, ValueError):
            continue
        cpu = int(idx.parent.parent.name.removeprefix("cpu"))
        shared = shared or frozenset({cpu})
        cpus.add(cpu)
        found[(level, shared)] = max(size, found.get((level, shared), 0))
    if not found:
        return None
    return _build(found, "sysfs", frozenset(cpus))


def _build(found: dict[tuple[int, frozenset[int]], int], source: str,
           cpus: frozenset[int]) -> CacheTopology:
    levels = []
    for n in sorted({lv for lv, _ in found}):
        inst = tuple(CacheInstance(size, shared) for (lv, shared), size in
                     sorted(found.items(), key=lambda kv: min(kv[0][1])) if lv == n)
        levels.append(CacheLevel(n, inst))
    return CacheTopology(tuple(levels), source, cpus)


_LSCPU_LINE = re.compile(
    r"\s*L(\d)([di]?) cache:\s*([\d.]+\s*[KMG]?i?B?)\s*(?:\((\d+) instances?\))?")


def from_lscpu(text: str) -> CacheTopology | None:
    """The topology of ``lscpu`` / ``lscpu -B`` output, or None without any cache line.

    lscpu gives each level's total and its instance count, not which CPUs share an
    instance: the on-line CPUs are dealt out evenly, in order. An older lscpu prints one
    instance's size and no count: then L1/L2 are taken per core and the last level per
    socket."""
    cpus = _lscpu_cpus(text)
    sockets = re.search(r"^Socket\(s\):\s*(\d+)", text, re.M)
    cores = re.search(r"^Core\(s\) per socket:\s*(\d+)", text, re.M)
    threads = re.search(r"^Thread\(s\) per core:\s*(\d+)", text, re.M)
    n_sockets = int(sockets.group(1)) if sockets else 1
    tpc = int(threads.group(1)) if threads else 1
    n_cores = int(cores.group(1)) * n_sockets if cores else max(1, len(cpus) // tpc)
    lines = [m for m in map(_LSCPU_LINE.match, text.splitlines()) if m and m.group(2) != "i"]
    if not lines or not cpus:
        return None
    top = max(int(m.group(1)) for m in lines)
    found: dict[tuple[int, frozenset[int]], int] = {}
    ordered = sorted(cpus)
    for m in lines:
        level, size = int(m.group(1)), parse_size(m.group(3))
        if m.group(4):
            count = max(1, int(m.group(4)))
            size //= count
        else:  # one instance's size: per core below the last level, per socket at it
            count = n_sockets if level == top else n_cores
        share = max(1, len(ordered) // count)
        for k in range(count):
            group = frozenset(ordered[k * share:(k + 1) * share] if k < count - 1
                              else ordered[k * share:])
            if group:
                found[(level, group)] = size
    return _build(found, "lscpu", frozenset(cpus))


def _lscpu_cpus(text: str) -> frozenset[int]:
    m = re.search(r"^On-line CPU\(s\) list:\s*([\d,\-]+)", text, re.M)
    if m:
        return parse_cpu_list(m.group(1))
    m = re.search(r"^CPU\(s\):\s*(\d+)", text, re.M)
    return frozenset(range(int(m.group(1)))) if m else frozenset()


def read_topology(cpu_root: Path = SYSFS_CPU, lscpu: str | None = None) -> CacheTopology:
    """sysfs, then lscpu (``lscpu`` given as text, else ``lscpu -B`` is run), then none."""
    topo = from_sysfs(cpu_root)
    if topo is not None:
        return topo
    if lscpu is None:
        try:
            lscpu = subprocess.run(["lscpu", "-B"], capture_output=True, text=True,
                                   timeout=5).stdout
        except (OSError, subprocess.SubprocessError):
            lscpu = ""
    return from_lscpu(lscpu) or CacheTopology((), "none")


@cache
def this_machine() -> CacheTopology:
    """This machine's topology, read once per process."""
    return read_topology()


def allowed_cpus() -> frozenset[int]:
    """The CPUs this process may run on (its affinity: taskset, cpuset, cgroup)."""
    try:
        return frozenset(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return frozenset(range(os.cpu_count() or 1))
