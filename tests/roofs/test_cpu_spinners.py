"""roofs/probes/cpu_spinners.py: a CPU timing starts once this process's other threads stop
wanting a core (BLAS workers spinning after the untimed reference), and says so when they
never do."""

from __future__ import annotations

import hashlib
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from roofbench.bench.backends.cpu import CpuBackend
from roofbench.roofs.probes import cpu_spinners as cs

from roofbench.timing import TimerConfig

LINUX = sys.platform.startswith("linux") and Path("/proc/self/task").is_dir()


class _Clock:
    """A fake clock for wanting_threads: each sleep moves time, the threads' schedstat by
    ``grow`` ns and their state to ``state``."""

    def __init__(self, tasks: Path, grow: dict[int, int], state: dict[int, str]) -> None:
        self.tasks, self.grow, self.state, self.now = tasks, grow, state, 0.0

    def perf_counter(self) -> float:
        return self.now

    def sleep(self, s: float) -> None:
        self.now += s
        for tid, ns in self.grow.items():
            f = self.tasks / str(tid) / "schedstat"
            ran, waited, slices = (int(x) for x in f.read_text().split())
            f.write_text(f"{ran + ns // 2} {waited + ns - ns // 2} {slices}\n")
            (self.tasks / str(tid) / "stat").write_text(
                f"{tid} (a (b) c) {self.state[tid]} 1 2 3\n")


def _tasks(root: Path, tids: list[int]) -> None:
    for tid in tids:
        (root / str(tid)).mkdir()
        (root / str(tid) / "schedstat").write_text("1000 2000 3\n")
        (root / str(tid) / "stat").write_text(f"{tid} (a (b) c) S 1 2 3\n")


def test_a_thread_that_ran_or_waited_most_of_the_window_wants_a_core(tmp_path, monkeypatch):
    me = threading.get_native_id()
    _tasks(tmp_path, [me, 11, 12, 13])
    per_look = 10_000_000 // cs.LOOKS  # ns of a 10 ms window, one look's share
    # 11 spins (ran + waited the whole window), 12 woke briefly, 13 slept; none was seen
    # runnable; the caller is never counted however busy.
    clock = _Clock(tmp_path, {me: per_look, 11: per_look, 12: per_look // 10, 13: 0},
                   {me: "R", 11: "S", 12: "S", 13: "S"})
    monkeypatch.setattr(cs, "time", clock)
    assert cs.wanting_threads(0.01, tmp_path) == 1
    clock.grow[12] = per_look * 6 // 10
    assert cs.wanting_threads(0.01, tmp_path) == 2


def test_a_thread_seen_runnable_at_most_looks_wants_a_core(tmp_path, monkeypatch):
    # On a loaded machine the kernel adds a queued thread's wait only once it runs: its
    # schedstat may not move within the window, its state does.
    me = threading.get_native_id()
    _tasks(tmp_path, [me, 21, 22])
    clock = _Clock(tmp_path, {me: 0, 21: 0, 22: 0}, {me: "S", 21: "R", 22: "S"})
    monkeypatch.setattr(cs, "time", clock)
    assert cs.wanting_threads(0.01, tmp_path) == 1


def test_no_procfs_is_no_thread_and_no_wait(tmp_path):
    got = cs.settle(max_s=1.0, window_s=0.001, task_dir=tmp_path / "absent")
    assert (got.spinning_at_start, got.still_spinning, got.flag()) == (0, 0, None)


@pytest.fixture
def spinner() -> Iterator[threading.Event]:
    """A thread of this process that keeps a core busy (hashing outside the GIL) until the
    event is set."""
    stop, started = threading.Event(), threading.Event()
    buf = bytes(1 << 20)

    def spin() -> None:
        while not stop.is_set():
            hashlib.sha256(buf).digest()
            started.set()

    t = threading.Thread(target=spin, daemon=True)
    t.start()
    assert started.wait(30)
    yield stop
    stop.set()
    t.join(30)


@pytest.mark.skipif(not LINUX, reason="needs /proc/self/task/*/schedstat")
def test_a_spinning_sibling_is_seen_and_a_stopped_one_is_not(spinner):
    got = cs.settle(max_s=0.05)
    assert got.spinning_at_start >= 1 and got.still_spinning >= 1
    assert "kept a core busy" in (got.flag() or "")
    spinner.set()
    assert cs.settle(max_s=5.0).still_spinning == 0


@pytest.mark.skipif(not LINUX, reason="needs /proc/self/task/*/schedstat")
def test_a_cpu_timing_beside_a_spinner_is_flagged(spinner):
    cfg = TimerConfig(warmup_s=0.0, warmup_min_runs=1, min_samples=3, max_samples=3,
                      budget_s=1.0)
    t = CpuBackend().time(lambda: None, cfg)
    assert any("kept a core busy" in f for f in t.flags), t.flags
    spinner.set()
    t = CpuBackend().time(lambda: None, cfg)
    assert not any("kept a core busy" in f for f in t.flags), t.flags
