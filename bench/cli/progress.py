"""Progress on stderr for long jobs (logs, CI jobs, a GPU box over ssh): one helper, with the
heartbeat, for a run's cases, its roofs, `calibrate` and `roofs`."""

from __future__ import annotations

import contextlib
import sys
import threading
import time
from collections.abc import Callable, Iterator

from rich.console import Console
from rich.progress import Progress, SpinnerColumn, TextColumn, TimeElapsedColumn


class Heartbeat:
    """Stderr lines while a run works: each finished case, and a "still running" line whenever
    a case has been silent for ``every_s`` (a slow compile, a large reference), so a log never
    goes quiet for long."""

    def __init__(self, every_s: float = 5.0) -> None:
        self.every_s = every_s
        self._key: str | None = None
        self._started = self._last = time.perf_counter()
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True)

    def __enter__(self) -> Heartbeat:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(timeout=2)

    def start(self, key: str) -> None:
        with self._lock:
            self._key, self._started = key, time.perf_counter()

    def say(self, line: str) -> None:
        with self._lock:
            print(line, file=sys.stderr, flush=True)
            self._key, self._last = None, time.perf_counter()

    def _loop(self) -> None:
        while not self._stop.wait(0.5):
            with self._lock:
                now = time.perf_counter()
                if self._key is not None and now - self._last >= self.every_s:
                    print(f"  ... {self._key} still running ({now - self._started:.0f} s)",
                          file=sys.stderr, flush=True)
                    self._last = now


@contextlib.contextmanager
def steps(name: str, timed: bool = False) -> Iterator[Callable[[str], None]]:
    """Progress of a long job made of steps (roof probes, a calibration): a spinner with the
    current step on a terminal; elsewhere (a log, a CI job) one line per step, and the
    heartbeat's "still running" line whenever a step is silent for long. Yields ``say(step)``.
    ``timed``: each line starts with the seconds since the job began."""
    t0 = time.perf_counter()
    with Progress(SpinnerColumn(), TextColumn("{task.description}"), TimeElapsedColumn(),
                  console=Console(stderr=True), transient=True,
                  disable=not sys.stderr.isatty()) as prog:
        task = prog.add_task(name, total=None)
        with Heartbeat() as beat:
            def say(msg: str) -> None:
                prog.update(task, description=f"{name}: {msg}")
                if prog.disable:
                    when = f" [{time.perf_counter() - t0:5.1f} s]" if timed else ""
                    beat.say(f"{name}{when}: {msg}")
                    beat.start(f"{name}: {msg}")

            yield say
