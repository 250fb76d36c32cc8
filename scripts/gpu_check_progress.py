"""pytest plugin of `make gpu-check` (``-p gpu_check_progress``, scripts/ on PYTHONPATH): every
test's outcome written to $GPU_CHECK_PROGRESS as it happens, so a step killed at its limit still
says what ran and what failed; and a trapping kernel costs one test, not the rest of the step.

Lines: ``start <nodeid>`` before a test, then ``passed|failed|skipped <nodeid>[: reason]``.
On start-up the tests the file already records (finished, or started and never finished: the
process died in them) are deselected, so running the same command again goes on with the rest.
A failure whose text is a sticky CUDA error (after an illegal address or a trap every later CUDA
call of the process fails) ends the session with status 75: scripts/gpu_check.sh then starts
pytest again, in a fresh process, for the tests not yet run.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest
from sticky_cuda import RESUME, STICKY


def _file() -> Path | None:
    p = os.environ.get("GPU_CHECK_PROGRESS")
    return Path(p) if p else None


def _write(line: str) -> None:
    f = _file()
    if f is None:
        return
    with open(f, "a") as out:
        out.write(line + "\n")
        out.flush()
        os.fsync(out.fileno())


def recorded(path: Path) -> set[str]:
    """Node ids the progress file names (any line)."""
    if not path.is_file():
        return set()
    out = set()
    for ln in path.read_text().splitlines():
        parts = ln.split(" ", 1)
        if len(parts) == 2:
            out.add(parts[1].split(": ", 1)[0] if parts[0] != "start" else parts[1])
    return out


def pytest_collection_modifyitems(session: Any, config: Any, items: list[Any]) -> None:
    f = _file()
    if f is None:
        return
    done = recorded(f)
    gone = [i for i in items if i.nodeid in done]
    if gone:
        config.hook.pytest_deselected(items=gone)
        items[:] = [i for i in items if i.nodeid not in done]


def pytest_runtest_logstart(nodeid: str, location: Any) -> None:
    _write(f"start {nodeid}")


_sticky: list[str] = []


def pytest_runtest_logreport(report: Any) -> None:
    if report.when == "call" or (report.when == "setup" and not report.passed) or (
            report.when == "teardown" and report.failed):
        reason = ""
        if report.failed:
            text = str(report.longrepr or "")
            lines = [ln for ln in text.splitlines() if ln.startswith("E ")] or text.splitlines()
            reason = ": " + (lines[0][2:].strip() if lines else "")[:300]
            if STICKY.search(text):
                _sticky.append(report.nodeid)
        elif report.skipped and isinstance(report.longrepr, tuple):
            reason = ": " + str(report.longrepr[2])[:200]
        _write(f"{report.outcome} {report.nodeid}{reason}")


def pytest_runtest_teardown(item: Any, nextitem: Any) -> None:
    if _sticky:
        pytest.exit(f"sticky CUDA error in {_sticky[0]}: the rest goes on in a fresh process",
                    returncode=RESUME)
