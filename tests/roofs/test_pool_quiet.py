"""A roof sample waits for the case's spinning thread pools (roofs/probes/pool_quiet.py): a
thread of this process that keeps running after the case's sample (as OpenBLAS's pool spins
~0.1 s after a dgemm) is finished before the roof's timed window, one that never stops is
waited for once, and the roof probe's own pool is not waited for."""

from __future__ import annotations

import ctypes
import threading
import time

from roofbench.roofs.probes import pool_quiet as pq
from roofbench.roofs.probes.cpu_pairs import StreamPair
from roofbench.roofs.probes.cpu_stream import StreamBracket


class Spinner:
    """A thread that runs (state R) for ``spin_s`` after each ``go()``, then blocks: a
    library pool's worker after its call returns. ``forever`` spins until ``stop()``. It
    spins in ctypes' memset, without the GIL, as a native pool does (a thread waiting for
    the GIL sleeps in a futex: state S)."""

    BUF = ctypes.create_string_buffer(8 << 20)

    def __init__(self, spin_s: float, forever: bool = False) -> None:
        self.spin_s, self.forever = spin_s, forever
        self.go_event, self.quit = threading.Event(), False
        self.spinning = threading.Event()
        self.idle = threading.Event()
        self.idle.set()
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self) -> None:
        while not self.quit:
            self.go_event.wait()
            self.go_event.clear()
            if self.quit:
                return
            self.idle.clear()
            self.spinning.set()
            t0 = time.perf_counter()
            while not self.quit and (self.forever or time.perf_counter() - t0 < self.spin_s):
                ctypes.memset(self.BUF, 1, len(self.BUF))
            self.spinning.clear()
            self.idle.set()

    def go(self) -> None:
        self.idle.clear()
        self.go_event.set()
        assert self.spinning.wait(5)

    def stop(self) -> None:
        self.quit = True
        self.go_event.set()
        self.thread.join(5)


def test_a_spinning_pool_is_still_before_the_roof_sample():
    quiet = pq.PoolQuiet()
    s = Spinner(0.05)
    try:
        s.go()
        assert s.thread.native_id in pq.running_threads() or s.idle.is_set()
        waited = quiet.before()
        assert s.idle.is_set(), "the roof sample would have shared the cores with the pool"
        assert waited > 0 and quiet.waited
        assert quiet.after() >= 0.0
    finally:
        s.stop()


def test_nothing_running_costs_no_wait():
    quiet = pq.PoolQuiet()
    assert quiet.before() == 0.0 and not quiet.waited
    assert quiet.after() == 0.0  # nothing waited before: the probe's pool is not waited for


def test_a_thread_that_never_stops_is_waited_for_once():
    """A user's busy worker would cost the bound at every pair: it is waited for once."""
    quiet = pq.PoolQuiet(before_limit_s=0.03)
    s = Spinner(0.0, forever=True)
    try:
        s.go()
        quiet.before()
        assert s.thread.native_id in quiet.ignored
        assert quiet.before() == 0.0  # still spinning, no longer waited for
    finally:
        s.stop()


def test_the_probes_own_pool_is_not_waited_for():
    """Threads seen running right after a roof sample are the probe's pool: the case's next
    sample (a Numba kernel on the same pool) does not wait on them."""
    quiet = pq.PoolQuiet()
    s = Spinner(0.05)
    try:
        s.go()  # running when the "probe" returns
        quiet.after()
        assert s.thread.native_id in quiet.ours
        s.idle.wait(5)
        s.go()
        assert quiet.before() == 0.0
    finally:
        s.stop()


def test_without_a_task_list_it_does_not_wait(monkeypatch):
    monkeypatch.setattr(pq, "TASKS", "/nonexistent/task")
    assert pq.running_threads() == set()
    assert pq.PoolQuiet().before() == 0.0


def test_the_stream_pair_waits_for_the_case_pool(monkeypatch):
    """Through a real sampler: the case's pool spins when the case's sample returns, and has
    stopped by the time the roof's STREAM call starts."""
    quiet = pq.PoolQuiet()
    monkeypatch.setattr("roofbench.roofs.probes.cpu_pairs.QUIET", quiet)
    b = StreamBracket(1 << 16, "add-nt")
    pair = StreamPair(b)
    pair()  # allocates; the probe's own pool is noted
    s = Spinner(0.05)
    seen: list[bool] = []
    arrays = b.arrays
    assert arrays is not None
    call = arrays.call

    def watched(kernel: str):
        fn = call(kernel)

        def run() -> None:
            seen.append(s.idle.is_set())
            fn()
        return run

    monkeypatch.setattr(arrays, "call", watched)
    try:
        s.go()
        assert pair() > 0
        assert seen == [True]
    finally:
        s.stop()
        b.close()
