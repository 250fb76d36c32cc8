"""Threads of this process still spinning when a timing starts.

A BLAS library's worker threads spin-wait after each call before they sleep (OpenBLAS: 2^28
cycles, about 0.1 s): a float64 reference computed with numpy just before a CPU case is timed
leaves one spinning on a core that the case's own threads need. On a 2-core VM a 2-thread
Numba gemv then took 7.9 ms a call instead of 0.29 (two runs of eight of `roofbench occupancy
--workload gemv --quick`; none with OPENBLAS_NUM_THREADS=1), each parallel region waiting for
a scheduler slice, with a steady CV that no noise rule flagged. :func:`settle` waits, bounded,
until no other thread of this process wants a core; what it saw is returned for the record.

A thread wants a core over a window when it was runnable (state R in
``/proc/self/task/<tid>/stat``) at most of the looks taken through it, or ran or waited on a
run queue for most of it (``schedstat``: nanoseconds on a CPU, then waiting for one; the
kernel adds a wait only once the thread runs, so on a loaded machine the states see a spinner
first). A sleeping worker is neither; a spinner is one or the other however loaded the
machine is.
"""

from __future__ import annotations

import os
import threading
import time
from dataclasses import dataclass
from pathlib import Path

TASKS = Path("/proc/self/task")
WINDOW_S = 0.02  # one look at the threads: how long each is watched
LOOKS = 5  # states read through a window
WANTS = 0.5  # runnable at this share of the looks, or ran + waited this share of the window
SETTLE_MAX_S = 0.5  # the longest a timing waits for spinners to sleep


@dataclass(frozen=True)
class Settled:
    """What :func:`settle` saw: how long it waited, how many other threads wanted a core at
    its first look and at its last (0: the timing starts with this process's other threads
    asleep)."""

    waited_s: float
    spinning_at_start: int
    still_spinning: int

    def flag(self) -> str | None:
        """A timing flag when spinners outlasted the wait: the samples share cores with
        them."""
        if not self.still_spinning:
            return None
        return (f"{self.still_spinning} other thread(s) of this process kept a core busy "
                f"through the {self.waited_s:.2f} s waited before timing (a library's worker "
                "threads spinning?): the samples shared cores with them")


def _look(task_dir: Path, skip: int) -> dict[int, tuple[int, bool]]:
    """Each thread but ``skip``: ns it ran plus waited for a core so far, and whether it is
    runnable now ({} without procfs)."""
    out: dict[int, tuple[int, bool]] = {}
    try:
        names = os.listdir(task_dir)
    except OSError:
        return out
    for name in names:
        if not name.isdigit() or int(name) == skip:
            continue
        try:
            ran, waited = (task_dir / name / "schedstat").read_text().split()[:2]
            stat = (task_dir / name / "stat").read_text()
            state = stat[stat.rindex(")") + 1:].split()[0]  # after the (comm), which may hold ")"
            out[int(name)] = (int(ran) + int(waited), state == "R")
        except (OSError, ValueError, IndexError):
            continue  # a thread that ended meanwhile
    return out


def wanting_threads(window_s: float = WINDOW_S, task_dir: Path = TASKS) -> int:
    """How many threads of this process other than the caller wanted a core for most of the
    next ``window_s`` (the caller sleeps through it, looking ``LOOKS`` times)."""
    me = threading.get_native_id()
    first = _look(task_dir, me)
    runnable: dict[int, int] = dict.fromkeys(first, 0)
    t0 = time.perf_counter()
    last = first
    for _ in range(LOOKS):
        time.sleep(window_s / LOOKS)
        last = _look(task_dir, me)
        for tid, (_, r) in last.items():
            if tid in runnable and r:
                runnable[tid] += 1
    span_ns = (time.perf_counter() - t0) * 1e9
    return sum(1 for tid, (ns, _) in last.items() if tid in first
               and (runnable[tid] >= WANTS * LOOKS or ns - first[tid][0] >= WANTS * span_ns))


def settle(max_s: float = SETTLE_MAX_S, window_s: float = WINDOW_S,
           task_dir: Path = TASKS) -> Settled:
    """Wait until no other thread of this process wants a core, at most about ``max_s``."""
    t0 = time.perf_counter()
    first = last = wanting_threads(window_s, task_dir)
    while last and time.perf_counter() - t0 < max_s:
        last = wanting_threads(window_s, task_dir)
    return Settled(time.perf_counter() - t0, first, last)
