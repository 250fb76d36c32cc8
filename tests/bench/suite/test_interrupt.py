"""A run killed at any moment keeps every finished case, and `roofbench report` works on it.

results.json is rewritten atomically after every case. SIGTERM is handled (the finished cases
are saved with a note, reports written, exit 130); SIGKILL cannot be handled, and the last
complete results.json is what is left.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from flat_cases import flat_cases
from patience import patience
from roofbench.bench.cli import main
from roofbench.bench.results import load_run
from testpaths import ROOT


def _start(tmp_path: Path, roofs_file: Path) -> tuple[subprocess.Popen, Path]:
    out = tmp_path / "results"
    cmd = [sys.executable, "-m", "roofbench.bench.cli", "run", "--backend", "cpu", "--quick",
           "--workload", "l2norm", "--workload", "rownorm", "--workload", "vector_add",
           "--workload", "gemm", "--roofs", str(roofs_file), "--out", str(out)]
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    return proc, out


def _finished(out: Path) -> tuple[Path | None, int]:
    for p in out.glob("*/*/results.json"):
        try:
            d = json.loads(p.read_text())
        except (OSError, json.JSONDecodeError):
            pytest.fail(f"{p} was read half-written")  # atomic writes must prevent this
        return p, sum(c["status"] != "unsupported" for c in flat_cases(d))
    return None, 0


def _wait_for_cases(proc: subprocess.Popen, out: Path, n: int, limit_s: float = 240) -> Path:
    t0 = time.monotonic()
    while time.monotonic() - t0 < patience(limit_s):
        path, done = _finished(out)
        if path is not None and done >= n:
            return path
        if proc.poll() is not None:
            pytest.fail(f"run ended (rc {proc.returncode}) before {n} cases: "
                        f"{proc.stderr.read()[-2000:]}")
        time.sleep(0.05)
    proc.kill()
    pytest.fail("no case finished in time")


@pytest.mark.slow
@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGKILL], ids=["SIGTERM", "SIGKILL"])
def test_a_killed_run_keeps_its_finished_cases(tmp_path: Path, roofs_file: Path, sig, capsys):
    proc, out = _start(tmp_path, roofs_file)
    path = _wait_for_cases(proc, out, 2)
    proc.send_signal(sig)
    _, err = proc.communicate(timeout=patience(120))
    run = load_run(path)
    done = [c for c in run.cases if c.outcome.status != "unsupported"]
    assert len(done) >= 2 and all(c.outcome.status == "ok" for c in done)
    planned = re.search(r"\[1/(\d+)\]", err)  # one progress line per finished case
    assert planned, err[-2000:]
    if sig == signal.SIGTERM:
        # (SIGKILL may leave a temporary file beside them; never a half-written target)
        assert not [p for p in path.parent.iterdir() if p.name.endswith(".tmp")]
        assert proc.returncode == 130, err[-2000:]
        assert run.interrupted and any(n.startswith("interrupted:") for n in run.notes)
        assert (path.parent / "report.md").exists()
        assert "Traceback" not in err
    else:
        assert proc.returncode == -signal.SIGKILL
        assert not run.interrupted
    assert len(done) < int(planned.group(1))  # it really was stopped mid-way
    capsys.readouterr()
    assert main(["report", str(path.parent), "--out", str(tmp_path / "r.md")]) == 0
    text = (tmp_path / "r.md").read_text()
    assert "## Cases" in text and "could not be rendered" not in text
