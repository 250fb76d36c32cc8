"""Cache-level CPU roofs: a working-set sweep planned from the cache topology the OS reports.

For each cache level (roofs/probes/cache_topology.py: sysfs, else lscpu) the plan takes a band of
working sets between the level below it and the level itself, over the cores this process may
use: from twice the inner level's capacity (a quarter of L1's for L1) to 3/4 of the level's
own capacity for those cores (carm-roofline's coverage), capped by the memory budget, at
``POINTS`` geometric steps. Where the inner level is as large as the level (an L3 smaller than
the sum of the L2s, as on Intel server parts whose L3 is a victim cache), the band runs from
1.25x the inner capacity to the inner capacity plus 3/4 of the level's.

Each working set is split into one contiguous chunk per thread (numba ``prange`` over the
threads, one per core of the process), of 8-byte words. Two accesses, counted as carm-roofline
counts its load-only (1:0) and default two-loads-per-store (2:1) tests, bytes loaded plus bytes
stored, with moves only, as carm's are (an ALU instruction per line loaded costs the L1
figure): ``read`` (every 64-byte line loaded once per pass, the widest vectors, their values
unused: 8 B per word per pass) and ``read+write`` (the chunk as groups of three lines a, b, c:
c = a with b loaded beside it, then a = c: 8 B per word of the working set per pass, two
thirds loads, one third stores; a stored line is read for ownership first below L1, as a
kernel's output is). Both loops are LLVM IR written here (numba intrinsics): their addresses
a base register plus constants, their loads volatile so that LLVM keeps them.
Each thread passes over its chunk in bursts of about ``BURST_S`` and times every burst itself
with the cycle counter (rdtsc, rate calibrated against the host clock): a preemption lengthens
one burst, not the measurement, where a host-clock timing of a parallel region waits for its
slowest thread (milliseconds on a loaded VM). Each point's timed bursts follow ``WARMUP_S``
of untimed ones: on the quiet Xeon VM every L2 point's first 2-10 ms ran 17% faster than the
rest (a transient of the core, not a rate a kernel running longer sees). A point's rate is
each thread's sustained burst rate, the one a tenth of its bursts reach
(``SUSTAINED_QUANTILE``), summed over the threads: a ceiling, but not one lucky burst; the
best, median and mean bursts are kept beside it. A level's roof of each access is the best
point of its band, and the whole band is stored on the roof (``Roof.cache``, a CacheSweep).
DRAM stays STREAM's (cpu_stream.py).

Run in a child process with the widest vectors, as the FMA probe is (numba reads
``NUMBA_CPU_FEATURES`` once): ``python -m roofbench.roofs.probes.cpu_cache_sweep [--quick]``
prints the roofs as one JSON list.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
from dataclasses import dataclass
from typing import Any

import numpy as np
from numba import njit, prange
from roofbench.roofs.probes.cache_topology import CacheTopology, allowed_cpus, this_machine

from roofbench.cache_records import CACHE_LEVELS, CacheSweep, SweepPoint
from roofbench.readers import read_roof
from roofbench.roof_records import Roof

from .cpu_cache_passes import LINE_WORDS, add_passes, cycle_counter, read_passes, ticks
from .cpu_stream import aligned_empty, default_stream_budget
from .numba_env import env, threads
from .probe_child import child_answer

POINTS = 3  # working sets per level
L1_POINTS = 2
COVERAGE = 0.75  # of a level's capacity, at most (carm-roofline's _CACHE_COVERAGE)
BURST_S = 100e-6  # seconds one timed burst of passes should last (shorter than a time slice)
POINT_S = 0.08  # seconds of bursts per working set and access (half with quick)
# Seconds of untimed bursts before a point's timed ones: on the Xeon VM the first 2-10 ms of
# an L2 point ran 17% faster than the rest of it, every point (a state the core leaves).
WARMUP_S = 0.05
MIN_BURSTS, MAX_BURSTS = 5, 2000
TICKS_MACHINES = ("x86_64", "amd64")  # rdtsc: constant-rate, readable from user space
CHILD_TIMEOUT_S = 300.0
ACCESSES = ("read", "read+write")
COUNTING = {"read": "8 B per word of the working set per pass: every word loaded once "
                    "(carm-roofline's 1:0)",
            "read+write": "8 B per word of the working set per pass: two thirds of the words "
                          "loaded, one third stored (carm-roofline's default 2:1)"}


@dataclass(frozen=True)
class LevelPlan:
    """The working sets planned for one cache level, and what the level is for these cores."""

    level: str  # "l1", "l2", "l3"
    sizes: list[int]  # working sets in bytes (all threads together), ascending
    instance_bytes: int
    instances: int  # touched by the cores
    cpus_per_instance: int
    capacity: int  # instance_bytes x instances


def _geometric(lo: float, hi: float, n: int, align: int) -> list[int]:
    if hi <= lo or n <= 1:
        return [int(hi) // align * align]
    ratio = (hi / lo) ** (1.0 / (n - 1))
    raw = [lo, *(lo * ratio ** k for k in range(1, n - 1)), hi]  # the ends exactly
    out = sorted({int(round(x)) // align * align for x in raw})
    return [s for s in out if s > 0]


def plan_sweep(topo: CacheTopology, cpus: frozenset[int] | None, budget_bytes: int,
               points: int = POINTS, l1_points: int = L1_POINTS) -> list[LevelPlan]:
    """The sweep of every cache level of ``topo`` the CPUs ``cpus`` use (None: all), at most
    three levels (l1, l2, l3; a fourth, rare, is left out), each band as the module says,
    every working set a multiple of 64 B per thread and within ``budget_bytes``."""
    plans: list[LevelPlan] = []
    inner = 0
    for name, lv in zip(CACHE_LEVELS, topo.levels, strict=False):
        touched = lv.touched(cpus)
        if not touched:
            continue
        cap = sum(i.size for i in touched)
        n_cpus = len(cpus & topo.cpus) if cpus and topo.cpus else len(topo.cpus) or 1
        per_inst = max(1, n_cpus // len(touched))
        if inner == 0:
            lo, hi, n = 0.25 * cap, COVERAGE * cap, l1_points
        elif 2 * inner <= 0.5 * COVERAGE * cap:
            lo, hi, n = 2.0 * inner, COVERAGE * cap, points
        else:  # the level is not much larger than the ones below: a victim cache's band
            lo, hi, n = 1.25 * inner, inner + COVERAGE * cap, points
        hi = min(hi, budget_bytes)
        lo = min(lo, hi)
        sizes = _geometric(lo, hi, n, align=64 * max(1, n_cpus))
        if sizes:
            plans.append(LevelPlan(name, sizes, max(i.size for i in touched), len(touched),
                                   per_inst, cap))
        inner = cap
    return plans


@njit(parallel=True, cache=True)
def sweep_bursts(buf: np.ndarray, parts: int, write: bool, reps: int, bursts: int,
                 times: np.ndarray, sums: np.ndarray) -> None:
    """Each thread passes over its own chunk ``reps`` times per burst, ``bursts`` times,
    timing every burst with the cycle counter: ``times[t, k]`` its k-th burst (ticks),
    ``sums[t]`` the lines its passes moved."""
    chunk = buf.shape[0] // parts
    for t in prange(parts):
        x = buf[t * chunk:(t + 1) * chunk]
        acc = np.uint64(0)
        for k in range(bursts):
            t0 = cycle_counter()
            if write:
                acc += np.uint64(add_passes(x, reps))
            else:
                acc += np.uint64(read_passes(x, reps))
            times[t, k] = cycle_counter() - t0
        sums[t] = acc


def ticks_per_second(window_s: float = 0.02) -> float:
    """The cycle counter's rate against the host clock, over ``window_s``."""
    import time

    ticks()
    t0, c0 = time.perf_counter(), ticks()
    while time.perf_counter() - t0 < window_s:
        pass
    return (ticks() - c0) / (time.perf_counter() - t0)


@njit(parallel=True, cache=True)
def _fill(x: np.ndarray) -> None:
    # First touch in parallel (numpy's temporaries took seconds for the 360 MiB of a VM's L3).
    for i in prange(x.shape[0]):
        x[i] = np.uint64(i) * np.uint64(0x9E3779B97F4A7C15)  # every word different


CHUNK_WORDS = 192  # a thread's chunk is whole trips of both passes (64 and 96 words)


class SweepBuffer:
    """One buffer of 8-byte words, the largest working set, filled once; each point uses a
    prefix, one contiguous chunk per thread, a whole number of both passes' trips."""

    def __init__(self, max_bytes: int, parts: int) -> None:
        self.parts = parts
        self.data = aligned_empty(max(1, max_bytes // 8)).view(np.uint64)
        _fill(self.data)
        self.times = np.zeros((parts, MAX_BURSTS), dtype=np.uint64)
        self.bursts = 0
        self.sums = np.zeros(parts, dtype=np.uint64)

    def view(self, working_set: int) -> np.ndarray:
        chunk = working_set // 8 // self.parts // CHUNK_WORDS * CHUNK_WORDS
        return self.data[:chunk * self.parts]

    def counted_words(self, access: str, working_set: int) -> int:
        """Words one thread's pass moves (loads plus stores): its whole chunk, either access."""
        return self.view(working_set).shape[0] // self.parts

    def run(self, access: str, working_set: int, reps: int, bursts: int) -> None:
        sweep_bursts(self.view(working_set), self.parts, access == "read+write",
                     reps + reps % 2, bursts, self.times, self.sums)
        self.bursts = bursts

    def burst_ticks(self) -> np.ndarray:
        """Every burst of the last run, per thread (ticks): shape (threads, bursts)."""
        return self.times[:, :self.bursts]

    def check(self, working_set: int) -> None:
        """Both accesses, two passes each, on this working set: each thread's passes moved
        the lines counted (``counted_words``; the read pass's values go nowhere, its loads are
        asserted in its code by the codegen matrix); read+write leaves each group's a and b as
        they were and c a copy of a, against numpy. The data is then put back."""
        chunks = np.split(self.view(working_set).copy(), self.parts)
        lines = 2 * self.counted_words("read", working_set) // LINE_WORDS
        self.run("read", working_set, 2, 1)
        if [int(v) for v in self.sums] != [lines] * self.parts:
            raise RuntimeError(f"cache sweep: the read kernel loaded {self.sums.tolist()} "
                               f"lines, not the {lines} per thread counted")
        self.run("read+write", working_set, 2, 1)
        moved = [int(v) for v in self.sums]
        for was, now in zip(chunks, np.split(self.view(working_set), self.parts), strict=True):
            g, h = was.reshape(-1, 3, LINE_WORDS), now.reshape(-1, 3, LINE_WORDS)
            if not (np.array_equal(h[:, :2], g[:, :2]) and np.array_equal(h[:, 2], g[:, 0])
                    and moved == [lines] * self.parts):
                raise RuntimeError("cache sweep: the read+write kernel did not store what "
                                   "it loaded")
        self.view(working_set)[:] = np.concatenate(chunks)  # as it was: every word different


def _burst_reps(buf: SweepBuffer, access: str, working_set: int, hz: float) -> int:
    """Passes per burst so that a burst lasts about ``BURST_S`` (one pass at least)."""
    buf.run(access, working_set, 2, 3)
    per_pass = max(float(buf.burst_ticks().min(axis=1).max()) / hz / 2, 1e-9)
    return max(2, int(BURST_S / per_pass) // 2 * 2)


@dataclass(frozen=True)
class PointRates:
    """One working set's bytes/s, each thread's statistic of its bursts summed over the
    threads."""

    sustained: float  # the burst one in ``1 / (1 - SUSTAINED_QUANTILE)`` reaches (the roof's)
    best: float
    median: float
    mean: float  # all bytes over all the bursts' time


SUSTAINED_QUANTILE = 0.9  # of each thread's burst rates: a ceiling that one lucky burst is not


def rates_of(times: np.ndarray, bytes_per_burst: float, hz: float) -> PointRates:
    """The statistics of bursts that took ``times`` ticks (threads x bursts) and each moved
    ``bytes_per_burst``."""
    r = bytes_per_burst * hz / np.maximum(times.astype(np.float64), 1.0)
    return PointRates(float(np.quantile(r, SUSTAINED_QUANTILE, axis=1).sum()),
                      float(r.max(axis=1).sum()), float(np.median(r, axis=1).sum()),
                      float((bytes_per_burst * times.shape[1] * hz
                             / np.maximum(times.sum(axis=1).astype(np.float64), 1.0)).sum()))


def measure_point(buf: SweepBuffer, access: str, working_set: int, hz: float,
                  point_s: float) -> tuple[PointRates, dict[str, Any]]:
    """The rates of one working set and access, and the evidence."""
    reps = _burst_reps(buf, access, working_set, hz)  # even: the kernels' passes exactly
    burst_s = max(float(buf.burst_ticks().min(axis=1).max()) / hz / 2 * reps, 1e-9)
    warm = int(min(MAX_BURSTS, max(1, WARMUP_S / burst_s)))
    buf.run(access, working_set, reps, warm)  # untimed: the core leaves its start state
    bursts = int(min(MAX_BURSTS, max(MIN_BURSTS, point_s / burst_s)))
    buf.run(access, working_set, reps, bursts)
    times = buf.burst_ticks()
    rates = rates_of(times, 8 * buf.counted_words(access, working_set) * reps, hz)
    return rates, {"working_set_bytes": int(8 * buf.view(working_set).shape[0]),
                   "passes_per_burst": reps, "warmup_bursts": warm, "bursts": bursts,
                   "best_burst_s": [float(b) / hz for b in times.min(axis=1)],
                   "median_burst_s": [float(b) / hz for b in np.median(times, axis=1)]}


def measure_sweep(plans: list[LevelPlan], source: str, progress: Any = None,
                  quick: bool = False) -> list[Roof]:
    """Every planned point of both accesses; one roof per (level, access)."""
    parts = threads()
    biggest = max((s for p in plans for s in p.sizes), default=0)
    if not plans or biggest <= 0:
        return []
    buf = SweepBuffer(biggest, parts)
    buf.check(min(s for p in plans for s in p.sizes))
    hz = ticks_per_second()
    point_s = POINT_S / 2 if quick else POINT_S
    roofs = []
    for plan in plans:
        if progress:
            progress(f"cpu roofs: {plan.level} sweep ({', '.join(_mib(s) for s in plan.sizes)})")
        for access in ACCESSES:
            pts, evid = [], []
            for ws in plan.sizes:
                rates, ev = measure_point(buf, access, ws, hz, point_s)
                pts.append(SweepPoint(plan.level, ev["working_set_bytes"], access,
                                      rates.sustained, rates.mean, rates.best, rates.median))
                evid.append(ev)
            k = max(range(len(pts)), key=lambda i: pts[i].bytes_per_s)
            sweep = CacheSweep(plan.level, access, plan.instance_bytes, plan.instances,
                               plan.cpus_per_instance, parts, source,
                               [plan.sizes[0], plan.sizes[-1]], pts)
            roofs.append(Roof(
                name=f"{plan.level} sweep-{access}", kind="memory", level=plan.level,
                value=pts[k].bytes_per_s, median=pts[k].median_bytes_per_s,
                source="measured", cache=sweep,
                evidence={"probe": f"cache-sweep-{access}", "dtype": "uint64",
                          "implementation": "numba njit(parallel=True), one chunk per thread, "
                                            "loops of vector moves written in LLVM IR, "
                                            "bursts of passes timed by each thread (rdtsc)",
                          "counting": COUNTING[access],
                          "value_from": "each thread's sustained burst rate (reached by "
                                        f"{1 - SUSTAINED_QUANTILE:.0%} of its bursts), summed "
                                        "over the threads, at the best working set of the band",
                          "best_working_set_bytes": pts[k].working_set_bytes,
                          "mean_burst_bytes_per_s": pts[k].mean_bytes_per_s,
                          "best_burst_bytes_per_s": pts[k].best_bytes_per_s,
                          "median_burst_bytes_per_s": pts[k].median_bytes_per_s,
                          "ticks_per_s": hz, "threads": parts, "points": evid, **env()}))
    return roofs


def _mib(n: int) -> str:
    return f"{n / (1 << 20):.3g} MiB" if n >= 1 << 20 else f"{n / 1024:.3g} KiB"


def cache_roofs_in_process(quick: bool = False, progress: Any = None,
                           topo: CacheTopology | None = None,
                           budget: int | None = None) -> list[Roof]:
    """The sweep in this process: plan from the topology, measure, one roof per level and
    access (none when the OS reports no cache)."""
    topo = topo or this_machine()
    plans = plan_sweep(topo, allowed_cpus(), budget or default_stream_budget())
    return measure_sweep(plans, topo.source, progress, quick)


def isolated_cache_roofs(quick: bool, timeout: float = CHILD_TIMEOUT_S) -> list[Roof]:
    """The sweep in a child process started with the widest vectors (see cpu_fma_child).
    Raises RuntimeError with a one-line reason when the child fails."""
    from .cpu_features import widest_vector_env

    extra = widest_vector_env()
    cmd = [sys.executable, "-m", "roofbench.roofs.probes.cpu_cache_sweep"]
    if quick:
        cmd.append("--quick")
    answer = child_answer(cmd, "cache sweep child", {**os.environ, **extra}, timeout)
    roofs = [read_roof(d) for d in answer]
    for roof in roofs:
        roof.evidence["process"] = "own process (numba started with the environment below)"
        roof.evidence["child_environment"] = extra
    return roofs


def cache_roofs(quick: bool, progress: Any = None) -> list[Roof]:
    """The sweep in its own process (widest vectors). None on a CPU without a constant-rate
    cycle counter readable from user space (``TICKS_MACHINES``: elsewhere, AArch64's
    PMCCNTR_EL0, reading it can kill the process), nor when the child fails: the run then has
    no cache roofs and places every case on DRAM, as before the sweep; the progress line
    says why."""
    if platform.machine().lower() not in TICKS_MACHINES:
        if progress:
            progress(f"cpu roofs: no cache sweep on {platform.machine()} (no user-space "
                     "cycle counter known to be safe)")
        return []
    if progress:
        progress("cpu roofs: cache sweep, L1/L2/L3 working sets (own process)")
    try:
        return isolated_cache_roofs(quick)
    except RuntimeError as e:
        if progress:
            progress(f"cpu roofs: no cache roofs: {e}")
        return []


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m roofbench.roofs.probes.cpu_cache_sweep",
                                 description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true")
    args = ap.parse_args(argv)
    roofs = cache_roofs_in_process(args.quick,
                                   progress=lambda s: print(s, file=sys.stderr, flush=True))
    print(json.dumps([r.to_dict() for r in roofs]), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
