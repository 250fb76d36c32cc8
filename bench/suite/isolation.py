"""Cases run in a process of their own, so that one fault costs one case.

Which cases: those whose kernels declare it (``isolated=True`` on the implementation, e.g. the
wgmma/TMA GEMM, whose unbounded barrier wait can hang and whose faults are sticky: after an
illegal address every later CUDA call of the process fails). ``Backend.isolated(case)`` reads
the declaration; no list of names is kept anywhere.

How: a worker process (``python -m roofbench.bench.suite.case_child``) opens the same backend
and runs the cases it is sent one at a time, the whole case (inputs, compile, validation,
timing) as the runner would, and answers each with its CaseResult. A case that does not answer
within its time is a hang: the worker is killed and the case recorded as ``error`` with the
timeout. A case that ends in an error (a sticky one included) is recorded with it and its
worker exits, so the next isolated case starts in a clean process. A worker that dies without
answering (an abort, a trap) is recorded with the last line it wrote. The run goes on.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import queue
import signal
import subprocess
import sys
import threading
import time
from dataclasses import asdict
from typing import Any

from roofbench.bench.errors import UserError
from roofbench.bench.suite.case_record import case_record
from roofbench.kernels.spec import Case

from roofbench.boundary import die_with_parent
from roofbench.paths import child_env
from roofbench.readers import read_case
from roofbench.records import CaseResult
from roofbench.timing import TimerConfig

RESULT_MARK = "ROOFBENCH_CASE_RESULT "
TIMEOUT_ENV = "ROOFBENCH_CASE_TIMEOUT_S"
# Seconds one isolated case may take, its process's start-up included: a 4096^3 wgmma case is
# ~10 s on an H200 (start-up, an sm_90a compile, device-side inputs and reference, a 0.5 s
# timing loop; docs/gpu-check.md), so a hang costs at most this.
CASE_TIMEOUT_S = 45.0


def case_timeout() -> float:
    """CASE_TIMEOUT_S, or $ROOFBENCH_CASE_TIMEOUT_S (positive seconds; else a UserError)."""
    raw = os.environ.get(TIMEOUT_ENV)
    if not raw:
        return CASE_TIMEOUT_S
    try:
        v = float(raw)
    except ValueError:
        v = -1.0
    if not (v > 0 and math.isfinite(v)):
        raise UserError(f"{TIMEOUT_ENV}={raw!r}: give the seconds an isolated case may take "
                        "(a positive number, finite)")
    return v


class IsolatedCases:
    """The worker of a run's isolated cases, started on first use and after each fault."""

    def __init__(self, backend: str, timeout_s: float | None = None) -> None:
        self.backend = backend
        self.timeout_s = case_timeout() if timeout_s is None else timeout_s
        self._proc: subprocess.Popen[str] | None = None
        self._lines: queue.Queue[str | None] = queue.Queue()
        self._stderr: list[str] = []

    # -- the worker ----------------------------------------------------------------------
    def _start(self) -> subprocess.Popen[str]:
        if self._proc is not None and self._proc.poll() is None:
            return self._proc
        self._lines = queue.Queue()
        self._stderr = []
        cmd = [sys.executable, "-m", "roofbench.bench.suite.case_child", "--backend",
               self.backend]
        self._proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                      stderr=subprocess.PIPE, text=True, bufsize=1,
                                      env=child_env(PYTHONUNBUFFERED="1"),
                                      start_new_session=True, preexec_fn=die_with_parent)
        threading.Thread(target=self._pump, args=(self._proc.stdout, self._lines),
                         daemon=True).start()
        threading.Thread(target=self._pump_err, args=(self._proc.stderr, self._stderr),
                         daemon=True).start()
        return self._proc

    @staticmethod
    def _pump(stream: Any, lines: queue.Queue[str | None]) -> None:
        for line in stream:
            lines.put(line)
        lines.put(None)  # end of output: the worker exited

    @staticmethod
    def _pump_err(stream: Any, into: list[str]) -> None:
        for line in stream:
            into.append(line.rstrip("\n"))
            del into[:-20]

    def _stop(self) -> None:
        p, self._proc = self._proc, None
        if p is None:
            return
        if p.poll() is None:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(p.pid, signal.SIGKILL)  # the worker and anything it started
        with contextlib.suppress(subprocess.TimeoutExpired):
            p.wait(timeout=10)

    def close(self) -> None:
        if self._proc is not None and self._proc.poll() is None and self._proc.stdin:
            with contextlib.suppress(OSError):
                self._proc.stdin.close()  # end of requests: the worker exits
            with contextlib.suppress(subprocess.TimeoutExpired):
                self._proc.wait(timeout=10)
        self._stop()

    # -- one case ------------------------------------------------------------------------
    def run(self, case: Case, cfg: TimerConfig, launch_cfg: TimerConfig | None,
            per_launch: bool, seed: int) -> CaseResult:
        request = {"workload": case.workload.name, "variant": case.variant.name,
                   "dtype": case.dtype, "size": list(case.size), "seed": seed,
                   "cfg": asdict(cfg), "launch_cfg": asdict(launch_cfg) if launch_cfg else None,
                   "per_launch": per_launch,
                   "occupancy_level": (asdict(case.occupancy_level) if case.occupancy_level
                                       else None)}
        t0 = time.perf_counter()
        proc = self._start()
        try:
            assert proc.stdin is not None
            proc.stdin.write(json.dumps(request) + "\n")
            proc.stdin.flush()
        except OSError:
            pass  # it died already: the wait below says how
        deadline = t0 + self.timeout_s
        while True:
            left = deadline - time.perf_counter()
            try:
                if left <= 0:
                    raise queue.Empty
                line = self._lines.get(timeout=left)
            except queue.Empty:
                return self._fault(case, time.perf_counter() - t0, timed_out=True)
            if line is None:  # its output ended: the worker died without answering
                return self._fault(case, time.perf_counter() - t0, timed_out=False)
            if line.startswith(RESULT_MARK):
                rec = read_case(json.loads(line[len(RESULT_MARK):]))
                rec.evidence.extra = {
                    **(rec.evidence.extra or {}),
                    "isolated": "ran in its own process",
                }
                if rec.outcome.status == "error":  # the worker exits after it (its context may be
                    self._stop()            # poisoned): the next case starts afresh
                return rec

    def _fault(self, case: Case, seconds: float, timed_out: bool) -> CaseResult:
        if timed_out:
            self._stop()
            why = (f"timed out after {seconds:.0f} s in its own process (a hang: the case "
                   f"was stopped and the run goes on; limit {self.timeout_s:.0f} s, "
                   f"{TIMEOUT_ENV})")
        else:
            p = self._proc
            rc = p.wait(timeout=10) if p is not None else None
            time.sleep(0.05)  # the stderr pump's last lines
            last = next((ln for ln in reversed(self._stderr) if ln.strip()), "no output")
            why = f"its own process ended (exit {rc}) before it reported: {last.strip()}"
            self._stop()
        return case_record(case, _Named(self.backend), status="error", error=why,
                           extra={"isolated": "ran in its own process"})


class _Named:
    """Enough of a backend for a record the parent writes itself."""

    kind = "gpu"

    def __init__(self, name: str) -> None:
        self.name = name
