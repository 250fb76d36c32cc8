"""Why a CPU timing varied: what else happened on the machine while it was being timed.

A CPU case's samples can spread for reasons outside the kernel: other processes on the same
cores (on a 2-core VM one busy neighbour takes half the machine and a parallel launch waits
for its slowest thread), hypervisor steal (another guest on the host takes the vCPU for tens
of milliseconds at a time: one stolen burst inside a sample makes it an outlier), page faults
inside the timed window (first touch of fresh memory, reclaim). :class:`NoiseProbe` snapshots
the counters the kernel keeps for those (``/proc/stat`` for all CPUs, ``getrusage`` for this
process, and ``/proc/self/task/*/schedstat``: the nanoseconds this process's threads ran and
waited on a run queue for a core another process held) around a timing, and
:func:`noise_cause` names the likeliest cause in one line, from the numbers alone. The wait
is the load's own effect on the timed code: a process that waited a fraction w of the time
it could run took 1/(1-w) times as long (the regression gate's load rule reads it).
"""

from __future__ import annotations

import os
import resource
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

# Thresholds for naming a cause (fractions of all cores' time over the timed window).
OTHER_BUSY = 0.05  # other processes used more than this share of the cores
# The hypervisor took more than this share. On a VM that is otherwise quiet, steal time in
# bursts goes with a high CV for every case that has it and a low one for the cases without.
STEAL = 0.01
FAULTS_PER_S = 100.0  # page faults per second of timing: memory touched inside the window


@dataclass
class CpuTimes:
    """Jiffies over all CPUs from /proc/stat's first line."""

    busy: int = 0
    idle: int = 0
    steal: int = 0

    @classmethod
    def parse(cls, text: str) -> CpuTimes:
        for line in text.splitlines():
            if line.startswith("cpu "):
                v = [int(x) for x in line.split()[1:]]
                v += [0] * (8 - len(v))
                user, nice, system, idle, iowait, irq, softirq, steal = v[:8]
                return cls(busy=user + nice + system + irq + softirq, idle=idle + iowait,
                           steal=steal)
        return cls()


@dataclass
class NoiseReport:
    """What the machine did during one timing window (deltas over the window)."""

    wall_s: float
    cores: int
    other_busy: float  # share of all cores' time used by other processes
    steal: float  # share of all cores' time taken by the hypervisor
    minor_faults: int
    major_faults: int
    involuntary_switches: int  # this process preempted
    load_avg_1m: float
    # share of the time this process's threads could run that they waited for a core another
    # process held (schedstat); None where the kernel does not keep it
    waited: float | None = None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def noise_cause(r: NoiseReport) -> str:
    """The likeliest outside cause of spread samples, in one line."""
    return outside_load(r) or (
        "no outside cause seen (no page faults, no other load, no steal): the "
        "machine's own variation, e.g. a VM whose memory bandwidth changes state")


def outside_load(r: NoiseReport) -> str:
    """What else used the machine during the window, in one line; empty when nothing did."""
    causes = []
    faults = r.minor_faults + r.major_faults
    if r.major_faults or (r.wall_s > 0 and faults / r.wall_s > FAULTS_PER_S):
        causes.append(f"{faults} page faults in the timed window ({r.major_faults} major): "
                      "memory touched or reclaimed while timing")
    if r.other_busy > OTHER_BUSY or (r.waited or 0.0) > OTHER_BUSY:
        waited = ("" if r.waited is None else
                  f" and waited for a core {r.waited:.1%} of the time it could run")
        causes.append(f"other processes used {r.other_busy:.0%} of the {r.cores} cores "
                      f"(load average {r.load_avg_1m:.1f}; this process was preempted "
                      f"{r.involuntary_switches} times{waited})")
    if r.steal > STEAL:
        causes.append(f"the hypervisor stole {r.steal:.1%} of the CPU time "
                      f"({r.steal * r.cores * r.wall_s * 1e3:.0f} ms over the {r.cores} cores): "
                      "another guest on the host")
    return "; ".join(causes)


@dataclass(frozen=True)
class _Usage:
    """getrusage's totals for this process (and its waited-for children where asked)."""

    cpu_s: float
    minflt: int
    majflt: int
    nivcsw: int

    @classmethod
    def now(cls, children: bool) -> _Usage:
        rus = [resource.getrusage(who)
               for who in (resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN)[:1 + children]]
        return cls(cpu_s=sum(r.ru_utime + r.ru_stime for r in rus),
                   minflt=sum(r.ru_minflt for r in rus), majflt=sum(r.ru_majflt for r in rus),
                   nivcsw=sum(r.ru_nivcsw for r in rus))


def run_and_wait_ns(task_dir: Path = Path("/proc/self/task")) -> tuple[int, int] | None:
    """(ns on a core, ns runnable but waiting for one), summed over this process's threads;
    None where the kernel keeps no schedstat."""
    run = wait = 0
    try:
        tasks = list(task_dir.iterdir())
    except OSError:
        return None
    for t in tasks:
        try:
            fields = (t / "schedstat").read_text().split()
            run, wait = run + int(fields[0]), wait + int(fields[1])
        except (OSError, ValueError, IndexError):
            continue  # a thread that ended meanwhile
    return (run, wait) if tasks else None


class ThreadWaits:
    """The nanoseconds this process's threads have waited for a core another process held,
    cheap enough to read around every sample (the load recorded per sample, which the gate
    reads): each thread's schedstat is kept open and re-read with pread (under a microsecond;
    listing /proc/self/task costs hundreds), and re-opened when the thread count changes (the
    task folder's link count, one fstat). Calling it returns the sum, or None where the
    kernel keeps no schedstat. ``close()`` (or ``with``) releases the files."""

    def __init__(self, task_dir: Path = Path("/proc/self/task")) -> None:
        self.task_dir = task_dir
        self.fds: list[int] = []
        self.count = -1
        try:
            self.dir_fd: int | None = os.open(task_dir, os.O_RDONLY | os.O_DIRECTORY)
        except OSError:
            self.dir_fd = None

    def _threads(self) -> int:
        try:  # procfs: 2 + the threads (a plain folder: its own count, re-read on change)
            return os.fstat(self.dir_fd).st_nlink if self.dir_fd is not None else -1
        except OSError:
            return -1

    def _reopen(self) -> None:
        self._close_tasks()
        try:
            names = sorted(os.listdir(self.task_dir))
        except OSError:
            return
        for name in names:
            try:
                self.fds.append(os.open(self.task_dir / name / "schedstat", os.O_RDONLY))
            except OSError:
                continue  # a thread that ended meanwhile

    def __call__(self) -> int | None:
        n = self._threads()
        if n != self.count or not self.fds:
            self._reopen()
            self.count = n
        total, read = 0, False
        for fd in self.fds:
            try:
                total += int(os.pread(fd, 128, 0).split()[1])
                read = True
            except (OSError, ValueError, IndexError):
                continue  # a thread that ended: its wait leaves the sum (clamped per sample)
        return total if read else None

    def _close_tasks(self) -> None:
        for fd in self.fds:
            os.close(fd)
        self.fds = []

    def close(self) -> None:
        self._close_tasks()
        if self.dir_fd is not None:
            os.close(self.dir_fd)
            self.dir_fd = None

    def __del__(self) -> None:  # a timing that raised before close()
        self.close()

    def __enter__(self) -> ThreadWaits:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class NoiseProbe:
    """Snapshot before a timing, :meth:`report` after it. ``children``: the timed work runs
    in child processes (waited for before the report), whose time is then "own" too."""

    def __init__(self, stat_path: Path = Path("/proc/stat"), children: bool = False) -> None:
        self.stat_path = stat_path
        self.children = children
        self.cores = os.cpu_count() or 1
        self.t0 = time.perf_counter()
        self.cpu0 = self._cpu()
        self.ru0 = _Usage.now(children)
        self.sched0 = None if children else run_and_wait_ns()

    def _cpu(self) -> CpuTimes:
        try:
            return CpuTimes.parse(self.stat_path.read_text())
        except OSError:
            return CpuTimes()

    def report(self) -> NoiseReport:
        wall = time.perf_counter() - self.t0
        cpu1, ru1 = self._cpu(), _Usage.now(self.children)
        sched1 = run_and_wait_ns() if self.sched0 is not None else None
        waited = None
        if self.sched0 is not None and sched1 is not None:
            ran, wait = (max(b - a, 0) for a, b in zip(self.sched0, sched1, strict=True))
            waited = wait / (ran + wait) if ran + wait > 0 else None
        hz = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100
        total = max(self.cores * wall, 1e-9)
        own = ru1.cpu_s - self.ru0.cpu_s
        busy = (cpu1.busy - self.cpu0.busy) / hz
        try:
            load = os.getloadavg()[0]
        except OSError:
            load = 0.0
        return NoiseReport(
            wall_s=wall, cores=self.cores,
            other_busy=min(max((busy - own) / total, 0.0), 1.0),
            steal=min(max((cpu1.steal - self.cpu0.steal) / hz / total, 0.0), 1.0),
            minor_faults=ru1.minflt - self.ru0.minflt,
            major_faults=ru1.majflt - self.ru0.majflt,
            involuntary_switches=ru1.nivcsw - self.ru0.nivcsw,
            load_avg_1m=load, waited=waited)


def huge_page_fraction(spans: list[tuple[int, int]], smaps: str | None = None) -> float | None:
    """Share of the resident bytes of the mappings overlapping ``spans`` ([start, end) data
    addresses of a case's buffers) that transparent huge pages back, from /proc/self/smaps (or
    the given text); None when unknown. In a VM a 4 KiB-page stream costs a two-level page
    walk per page, so a case whose buffers did not get huge pages can run far below the
    bandwidth of one that did; recorded beside every CPU case to tell the two apart."""
    if smaps is None:
        try:
            smaps = Path("/proc/self/smaps").read_text()
        except OSError:
            return None
    rss = huge = 0
    inside = False
    for line in smaps.splitlines():
        head = line.split(" ", 1)[0]
        if "-" in head and ":" not in head:
            try:
                lo, hi = (int(x, 16) for x in head.split("-"))
            except ValueError:
                continue
            inside = any(lo < end and start < hi for start, end in spans)
        elif inside and line.startswith("Rss:"):
            rss += int(line.split()[1])
        elif inside and line.startswith("AnonHugePages:"):
            huge += int(line.split()[1])
    return huge / rss if rss else None
