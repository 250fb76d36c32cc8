"""Cache-level CPU roofs: a working-set sweep planned from the cache topology the OS reports.

For each cache level (roofbench/cache_topology.py: sysfs, else lscpu) the plan takes a band of
working sets between the level below it and the level itself, over the cores this process may
use: from twice the inner level's capacity (a quarter of L1's for L1) to 3/4 of the level's
own capacity for those cores (carm-roofline's coverage), capped by the memory budget, at
``POINTS`` geometric steps. Where the inner level is as large as the level (an L3 smaller than
the sum of the L2s, as on Intel server parts whose L3 is a victim cache), the band runs from
1.25x the inner capacity to the inner capacity plus 3/4 of the level's.

Each working set is split into one contiguous chunk per thread (numba ``prange`` over the
threads, one per core of the process), of 8-byte words. Two accesses, counted as carm-roofline
counts its load-only (1:0) and default two-loads-per-store (2:1) tests, bytes loaded plus bytes
stored: ``read`` (every word loaded and xor'ed into a value: 8 B per word per pass) and
``read+write`` (the last third of the chunk stored as the xor of the first two, then the first
as the xor of the last two: 8 B per word of the working set per pass, two thirds loads, one
third stores; a stored line is read for ownership first below L1, as a kernel's output is).
Each thread passes over its chunk in bursts of about ``BURST_S`` and times every burst itself
with the cycle counter (rdtsc, rate calibrated against the host clock): a preemption lengthens
one burst, not the measurement, where a host-clock timing of a parallel region waits for its
slowest thread (milliseconds on a loaded VM). A point's rate is each thread's best burst,
summed over the threads (the mean burst is kept beside it); a level's roof of each access is
the best point of its band (a ceiling, as STREAM's "Best Rate"), and the whole band is stored
on the roof (``Roof.cache``, a CacheSweep). DRAM stays STREAM's (cpu_stream.py).

Run in a child process with the widest vectors, as the FMA probe is (numba reads
``NUMBA_CPU_FEATURES`` once): ``python -m roofbench.roofs.probes.cpu_cache_sweep [--quick]``
prints the roofs as one JSON list.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
from dataclasses import dataclass
from typing import Any

import numpy as np
from llvmlite import ir
from numba import njit, prange, types
from numba.core import cgutils
from numba.extending import intrinsic

from roofbench.boundary import die_with_parent
from roofbench.cache_records import CACHE_LEVELS, CacheSweep, SweepPoint
from roofbench.cache_topology import CacheTopology, allowed_cpus, this_machine
from roofbench.readers import read_roof
from roofbench.records import Roof

from .cpu_stream import aligned_empty, default_stream_budget
from .numba_env import env, threads

POINTS = 3  # working sets per level
L1_POINTS = 2
COVERAGE = 0.75  # of a level's capacity, at most (carm-roofline's _CACHE_COVERAGE)
BURST_S = 100e-6  # seconds one timed burst of passes should last (shorter than a time slice)
POINT_S = 0.08  # seconds of bursts per working set and access (half with quick)
MIN_BURSTS, MAX_BURSTS = 5, 2000
TICKS_MACHINES = ("x86_64", "amd64")  # rdtsc: constant-rate, readable from user space
CHILD_TIMEOUT_S = 300.0
ACCESSES = ("read", "read+write")
COUNTING = {"read": "8 B per word of the working set per pass: every word loaded once",
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


# ----------------------------------------------------------------------------- kernels


def _ticks_typing(typingctx: Any) -> Any:
    """The cycle counter (x86: rdtsc, constant-rate on every CPU since ~2008)."""
    def codegen(context: Any, builder: Any, sig: Any, args: Any) -> Any:
        fn = cgutils.get_or_insert_function(builder.module, ir.FunctionType(ir.IntType(64), []),
                                            "llvm.readcyclecounter")
        return builder.call(fn, [])
    return types.uint64(), codegen


_ticks: Any = intrinsic(_ticks_typing)  # called without arguments inside njit code


@njit(cache=True)
def ticks() -> int:
    return _ticks()


@njit(cache=True)
def _read_passes(x: np.ndarray, reps: int) -> int:
    # Every word loaded once per pass and xor'ed into the pass's value, two loads per xor (a
    # vpternlogq on AVX-512 takes both): the loads, not an ALU port, bound the loop. An FP sum
    # needs one vector add per load, and a core with one 512-bit add port (Rocket Lake, the
    # Xeon VM) then reads L1 at one load a cycle, 0.6 of carm-roofline's figure.
    # The halves as slices indexed from 0 (``x[h + i]`` could wrap around for all LLVM knows,
    # and it gathered), each of whole 64-byte lines: the vector loads stay aligned.
    h = x.shape[0] // 16 * 8
    lo, hi, rest = x[:h], x[h:2 * h], x[2 * h:]
    s = np.uint64(0)
    for _ in range(reps):
        a = np.uint64(0)
        for i in range(h):
            a ^= lo[i] ^ hi[i]
        for i in range(rest.shape[0]):
            a ^= rest[i]
        s += a
    return s


@njit(cache=True)
def _add_passes(x: np.ndarray, reps: int) -> None:
    # Two loads per store, carm-roofline's default 2:1 (and STREAM add's, vector_add's): the
    # chunk's thirds a, b, c; c = a ^ b, then a = c ^ b (a as it was), ``reps`` even. A stored
    # line is not one just loaded: below L1 it is read for ownership first, as a kernel's
    # output is.
    t = x.shape[0] // 24 * 8  # whole 64-byte lines: no vector load or store splits a line
    a, b, c = x[:t], x[t:2 * t], x[2 * t:3 * t]
    for r in range(reps):
        if r % 2 == 0:
            for i in range(t):
                c[i] = a[i] ^ b[i]
        else:
            for i in range(t):
                a[i] = c[i] ^ b[i]


@njit(parallel=True, cache=True)
def sweep_bursts(buf: np.ndarray, parts: int, write: bool, reps: int, bursts: int,
                 best: np.ndarray, total: np.ndarray, sums: np.ndarray) -> None:
    """Each thread passes over its own chunk ``reps`` times per burst, ``bursts`` times,
    timing every burst with the cycle counter: ``best[t]`` its fastest burst, ``total[t]``
    all of them (ticks)."""
    chunk = buf.shape[0] // parts
    for t in prange(parts):
        x = buf[t * chunk:(t + 1) * chunk]
        b = np.uint64(1) << np.uint64(62)
        tot = np.uint64(0)
        acc = np.uint64(0)
        for _ in range(bursts):
            t0 = _ticks()
            if write:
                _add_passes(x, reps)
            else:
                acc += _read_passes(x, reps)
            dt = _ticks() - t0
            tot += dt
            if dt < b:
                b = dt
        best[t], total[t], sums[t] = b, tot, acc


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


class SweepBuffer:
    """One buffer of 8-byte words, the largest working set, filled once; each point uses a
    prefix, one contiguous chunk per thread."""

    def __init__(self, max_bytes: int, parts: int) -> None:
        self.parts = parts
        self.data = aligned_empty(max(1, max_bytes // 8)).view(np.uint64)
        _fill(self.data)
        self.best = np.zeros(parts, dtype=np.uint64)
        self.total = np.zeros(parts, dtype=np.uint64)
        self.sums = np.zeros(parts, dtype=np.uint64)

    def view(self, working_set: int) -> np.ndarray:
        n = working_set // 8 // self.parts * self.parts
        return self.data[:n]

    def counted_words(self, access: str, working_set: int) -> int:
        """Words one thread's pass moves: its chunk (read), its three thirds (read+write)."""
        chunk = self.view(working_set).shape[0] // self.parts
        return chunk if access == "read" else chunk // 24 * 8 * 3

    def run(self, access: str, working_set: int, reps: int, bursts: int) -> None:
        sweep_bursts(self.view(working_set), self.parts, access == "read+write",
                     reps + reps % 2, bursts, self.best, self.total, self.sums)

    def check(self, working_set: int) -> None:
        """Both accesses once (two passes) on this working set, against numpy: each thread's
        read value is twice the xor of its chunk; read+write leaves a chunk's first and second
        thirds as they were and its last the xor of both. The data is then put back."""
        chunks = np.split(self.view(working_set).copy(), self.parts)
        self.run("read", working_set, 2, 1)
        want = [2 * int(np.bitwise_xor.reduce(c)) % 2 ** 64 for c in chunks]
        if [int(v) for v in self.sums] != want:
            raise RuntimeError("cache sweep: the read kernel's value differs from numpy's")
        self.run("read+write", working_set, 2, 1)
        for was, now in zip(chunks, np.split(self.view(working_set), self.parts), strict=True):
            t = was.shape[0] // 24 * 8
            if not (np.array_equal(now[:2 * t], was[:2 * t])
                    and np.array_equal(now[2 * t:3 * t], was[:t] ^ was[t:2 * t])):
                raise RuntimeError("cache sweep: the read+write kernel did not store what "
                                   "it loaded")
        self.view(working_set)[:] = np.concatenate(chunks)  # as it was: every word different


def _burst_reps(buf: SweepBuffer, access: str, working_set: int, hz: float) -> int:
    """Passes per burst so that a burst lasts about ``BURST_S`` (one pass at least)."""
    buf.run(access, working_set, 2, 3)
    per_pass = max(float(buf.best.max()) / hz / 2, 1e-9)
    return max(2, int(BURST_S / per_pass) // 2 * 2)


def measure_point(buf: SweepBuffer, access: str, working_set: int, hz: float,
                  point_s: float) -> tuple[float, float, dict[str, Any]]:
    """(bytes/s from each thread's best burst, summed over threads; from each thread's mean
    burst; evidence)."""
    reps = _burst_reps(buf, access, working_set, hz)  # even: the kernels' passes exactly
    burst_s = max(float(buf.best.max()) / hz / 2 * reps, 1e-9)
    bursts = int(min(MAX_BURSTS, max(MIN_BURSTS, point_s / burst_s)))
    buf.run(access, working_set, reps, bursts)
    per_thread = 8 * buf.counted_words(access, working_set) * reps
    best = sum(per_thread / (float(b) / hz) for b in buf.best)
    mean = sum(per_thread * bursts / (float(t) / hz) for t in buf.total)
    return best, mean, {"working_set_bytes": int(8 * buf.view(working_set).shape[0]),
                        "passes_per_burst": reps, "bursts": bursts,
                        "best_burst_s": [float(b) / hz for b in buf.best]}


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
                best, mean, ev = measure_point(buf, access, ws, hz, point_s)
                pts.append(SweepPoint(plan.level, ev["working_set_bytes"], access, best, mean))
                evid.append(ev)
            k = max(range(len(pts)), key=lambda i: pts[i].bytes_per_s)
            sweep = CacheSweep(plan.level, access, plan.instance_bytes, plan.instances,
                               plan.cpus_per_instance, parts, source,
                               [plan.sizes[0], plan.sizes[-1]], pts)
            roofs.append(Roof(
                name=f"{plan.level} sweep-{access}", kind="memory", level=plan.level,
                value=pts[k].bytes_per_s, source="measured", cache=sweep,
                evidence={"probe": f"cache-sweep-{access}", "dtype": "uint64",
                          "implementation": "numba njit(parallel=True), one chunk per thread, "
                                            "bursts of passes timed by each thread (rdtsc)",
                          "counting": COUNTING[access],
                          "value_from": "each thread's best burst, summed over the threads, "
                                        "at the best working set of the band",
                          "best_working_set_bytes": pts[k].working_set_bytes,
                          "mean_burst_bytes_per_s": pts[k].mean_bytes_per_s,
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
    try:
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout,
                           env={**os.environ, **extra}, preexec_fn=die_with_parent)
    except (OSError, subprocess.TimeoutExpired) as e:
        raise RuntimeError(f"cache sweep child did not finish: {e}") from None
    lines = r.stdout.strip().splitlines()
    if r.returncode != 0 or not lines:
        why = (r.stderr.strip().splitlines() or ["no output"])[-1]
        raise RuntimeError(f"cache sweep child failed (exit {r.returncode}): {why}")
    roofs = [read_roof(d) for d in json.loads(lines[-1])]
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
