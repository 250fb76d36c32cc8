"""Wait, before a roof sample, for the case's thread pools to stop spinning.

A library's pool does not sleep when its call returns: OpenBLAS's threads spin for about
0.1 s, GNU OpenMP's for about 10 ms. A roof sample taken in that window shares the cores with
them: on the 2-core Zen 3 VM (12-04) the FMA probe ran at 50 GFLOP/s right after a NumPy
dgemm and at 102 GFLOP/s 0.2 s later, so dgemm read 1.2x its paired FMA roof. The pools are
seen, not guessed: a thread of this process in state ``R`` in ``/proc/self/task`` is running.

``before()`` waits (bounded) until no thread but the caller's and the roof probe's own pool
runs; when it waited, ``after()`` waits for the probe's pool too, so that the case's next
sample does not share the cores with it. A thread still running at the bound (a user's busy
worker) is not waited for again. Where ``/proc`` has no task list both return at once.
"""

from __future__ import annotations

import os
import threading
import time

TASKS = "/proc/self/task"
STEP_S = 0.002
BEFORE_LIMIT_S = 0.25  # beyond OpenBLAS's default spin (2^28 cycles: ~0.1 s at 2.5 GHz)
AFTER_LIMIT_S = 0.05  # GNU OpenMP's default spin is ~10 ms


def running_threads() -> set[int]:
    """The ids of this process's threads in state R, the caller's excepted."""
    me = threading.get_native_id()
    out: set[int] = set()
    try:
        tids = os.listdir(TASKS)
    except OSError:
        return out
    for t in tids:
        try:
            with open(f"{TASKS}/{t}/stat") as f:
                stat = f.read()
        except OSError:
            continue  # the thread ended
        tid = int(t)
        if tid != me and stat[stat.rindex(")") + 2:stat.rindex(")") + 3] == "R":
            out.add(tid)
    return out


class PoolQuiet:
    """The waits around a roof sample (module doc); one per process (``QUIET``)."""

    def __init__(self, before_limit_s: float = BEFORE_LIMIT_S,
                 after_limit_s: float = AFTER_LIMIT_S) -> None:
        self.before_limit_s, self.after_limit_s = before_limit_s, after_limit_s
        self.ours: set[int] = set()  # the roof probes' pool: seen running after a probe
        self.ignored: set[int] = set()  # still running at a bound: not waited for again
        self.waited = False
        self.waited_s = 0.0  # in all, for the cost

    def _wait(self, limit_s: float, skip: set[int]) -> float:
        busy = running_threads() - skip
        if not busy:
            return 0.0
        t0 = time.perf_counter()
        while busy and time.perf_counter() - t0 < limit_s:
            time.sleep(STEP_S)
            busy = running_threads() - skip
        self.ignored |= busy
        dt = time.perf_counter() - t0
        self.waited_s += dt
        return dt

    def before(self) -> float:
        """Wait until the case's pools are still; the seconds waited (0.0 when none ran)."""
        dt = self._wait(self.before_limit_s, self.ours | self.ignored)
        self.waited = dt > 0.0
        return dt

    def after(self) -> float:
        """Note the probe's pool; when ``before`` waited, wait for it to be still too."""
        self.ours |= running_threads() - self.ignored
        if not self.waited:
            return 0.0
        return self._wait(self.after_limit_s, self.ignored)


QUIET = PoolQuiet()
