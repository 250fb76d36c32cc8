"""Issue 57's stops and exits (#4-9): one stop handler (roofbench/boundary.stop_handler) for
SIGINT, SIGTERM and SIGHUP in every phase of every entry point, ``interrupted`` recorded with
the phase and what was measured kept; a program that calls os._exit or leaves a thread
running is said in one line and the process ends.

`model` is tried in-process on one profile computed once (its ``run_profile`` handed back),
and where the process itself is what is tested (os._exit, a thread left, the pytest plug-in)
in a real one that stops or exits before any profiling."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

torch = pytest.importorskip("torch")

from cli_run import run_cli  # noqa: E402
from roofbench.bench.results import load_run  # noqa: E402
from testpaths import ROOT  # noqa: E402

from ..profile.test_torch_program import FAST, ROOFS  # noqa: E402

ENV = {**os.environ, "PYTHONPATH": str(ROOT), "PYTHONUNBUFFERED": "1"}
CLI = [sys.executable, "-m", "roofbench.bench.cli"]

PROGRAM = '''
import torch

def program():
    return (lambda a, b: torch.sqrt(a * a + b * b)), (torch.randn(64), torch.randn(64))
'''


@pytest.fixture(scope="module")
def profiled():
    """One profile of PROGRAM (the fast timer), handed back by every `model` below."""
    from roofbench.bench.profile.torch_program import run_profile

    a, b = torch.randn(64), torch.randn(64)
    with torch.no_grad():
        return run_profile(lambda a, b: torch.sqrt(a * a + b * b), (a, b), {}, roofs=ROOFS,
                           timer=FAST, name="prog.program")


@pytest.fixture
def model(tmp_path, profiled, monkeypatch):
    """`roofbench model prog.py --out DIR` in-process: (exit code, stderr)."""
    import roofbench.bench.profile.torch_program as tp

    monkeypatch.setattr(tp, "run_profile", lambda *a, **kw: profiled)
    script = tmp_path / "prog.py"
    script.write_text(PROGRAM)
    roofs = tmp_path / "roofs.json"
    roofs.write_text(json.dumps(ROOFS.to_dict()))

    def go(out: Path, capsys: Any) -> tuple[int, str]:
        rc, _, err = run_cli(["model", str(script), "--roofs", str(roofs), "--out", str(out)],
                             capsys)
        return rc, err
    return go


def _signal_self(sig: int) -> Any:
    """A stand-in that delivers ``sig`` to this process, as `kill` would, then goes on."""
    def send(*a: Any, **kw: Any) -> None:
        os.kill(os.getpid(), sig)
    return send


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGHUP, signal.SIGINT],
                         ids=lambda s: s.name)
def test_a_stop_while_model_writes_its_report_is_recorded_with_the_phase(
        sig, model, tmp_path, monkeypatch, capsys):
    """#4-5: the stop lands after results.json is written, before the report is: exit 130,
    results.json says interrupted, by which signal, in the report phase."""
    import roofbench.bench.profile.report as report

    real = report.sections
    monkeypatch.setattr(report, "sections", lambda prof: (_signal_self(sig)(), real(prof))[1])
    rc, err = model(tmp_path / "o", capsys)
    assert rc == 130 and f"stopped by {sig.name}" in err and "Traceback" not in err
    run = load_run(tmp_path / "o")
    assert run.interrupted and run.stop is not None
    assert (run.stop.cause, run.stop.detail, run.stop.phase) == ("signal", sig.name, "report")
    assert run.cases  # what was measured is kept


def test_a_stop_as_model_claims_its_out_leaves_the_record(model, tmp_path, monkeypatch,
                                                          capsys):
    """#6: SIGTERM while --out is claimed (after the profiling): the claim finishes, and the
    folder holds results.json with every case, interrupted, not a bare marker."""
    import roofbench.bench.results as results

    real = results._take

    def take(*a: Any, **kw: Any) -> Any:
        os.kill(os.getpid(), signal.SIGTERM)
        return real(*a, **kw)

    monkeypatch.setattr(results, "_take", take)
    rc, err = model(tmp_path / "o", capsys)
    assert rc == 130 and "stopped by SIGTERM" in err
    names = sorted(p.name for p in (tmp_path / "o").iterdir())
    assert "results.json" in names and ".roofbench-run" not in names, names
    run = load_run(tmp_path / "o")
    assert run.interrupted and run.stop is not None and run.stop.phase == "report"
    assert len(run.cases) >= 2  # the ops and the program


def _script(tmp_path: Path, body: str) -> Path:
    p = tmp_path / "prog.py"
    p.write_text(body)
    return p


@pytest.mark.parametrize("where,body,code", [
    ("import", "import os\nos._exit(9)\n", 2),
    ("entry", "import os\ndef program():\n    os._exit(9)\n", 2),
    ("program", "import os\ndef program():\n    return (lambda: os._exit(9)), ()\n", 1),
])
def test_a_program_that_calls_os_exit_is_said_in_one_line(where, body, code, tmp_path):
    """#8: os._exit(9) in the script, its entry, or the program: roofbench's exit code and
    one line saying so, never exit 9 and silence."""
    p = _script(tmp_path, body)
    out = subprocess.run([*CLI, "model", str(p), "--out", str(tmp_path / "o")], cwd=tmp_path,
                         env=ENV, capture_output=True, text=True, timeout=300)
    assert out.returncode == code, out.stderr
    lines = [ln for ln in out.stderr.splitlines() if ln.startswith("roofbench")]
    assert len(lines) == 1 and "os._exit(9)" in lines[0] and "Traceback" not in out.stderr


def test_a_thread_left_running_never_keeps_the_process(tmp_path):
    """#9: a non-daemon thread the script starts and never ends: the command ends, a line
    says so, and the process exits (its own code), where it used to wait forever."""
    p = _script(tmp_path, "import threading\nthreading.Thread(target=threading.Event().wait,"
                          " name='spin').start()\n")
    out = subprocess.run([*CLI, "model", str(p), "--entry", "nothing"], cwd=tmp_path, env=ENV,
                         capture_output=True, text=True, timeout=300)
    assert out.returncode == 2, out.stderr
    assert "defines no function 'nothing'" in out.stderr
    (note,) = [ln for ln in out.stderr.splitlines() if "still running" in ln]
    assert "1 thread(s)" in note and "spin" in note


def test_the_early_handler_of_python_m_is_the_one_handler_and_exits_130_late():
    """`python -m roofbench.bench.cli` installs the stop handler before it imports anything;
    on the way out the boundary treats it as the default: a SIGTERM while the interpreter
    exits is exit 130 (it was a second handler, put back, whose Stopped raised in an atexit
    callback: a traceback and exit 0)."""
    from roofbench import boundary

    main = (ROOT / "bench" / "cli" / "__main__.py").read_text()
    assert "install_stop_handler()" in main and "signal.signal" not in main
    old = {s: signal.getsignal(s) for s in (signal.SIGTERM, signal.SIGHUP)}
    try:
        boundary.install_stop_handler()
        with boundary.stop_signals(late=True):
            assert signal.getsignal(signal.SIGTERM) is boundary.stop_handler
        assert signal.getsignal(signal.SIGTERM) is boundary._exit_stopped
        assert signal.getsignal(signal.SIGHUP) is boundary._exit_stopped
    finally:
        for s, h in old.items():
            signal.signal(s, h)


STOPPED_TESTS = '''
import os, signal
import numpy as np


def test_a(roofline):
    a = np.ones(1024)
    roofline(np.add, a, a, np.empty_like(a), flops=a.size, reads=2 * a.nbytes,
             writes=a.nbytes)


def test_b():
    os.kill(os.getpid(), signal.{sig})


def test_c(roofline):
    raise AssertionError("never reached: the session stopped")
'''


@pytest.mark.parametrize("sig", ["SIGTERM", "SIGHUP"])
def test_pytest_with_roofline_out_records_a_stop(sig, tmp_path, pytester):
    """#7: pytest --roofline-out and SIGTERM (or SIGHUP) among the tests: pytest ends as on
    Ctrl-C (exit 2), the case measured is kept, and the run says interrupted, by which
    signal, among the cases; it was killed (-15) with only the claim marker left."""
    pytester.makepyfile(test_stop=STOPPED_TESTS.replace("{sig}", sig))
    roofs = tmp_path / "roofs.json"
    roofs.write_text(json.dumps(ROOFS.to_dict()))
    out = pytester.path / "run"
    r = pytester.runpytest_subprocess("-p", "no:cacheprovider", "-p", "no:benchmark",
                                      "-p", "no:xdist", "--roofline-quick",
                                      "--roofline-roofs", str(roofs),
                                      "--roofline-out", str(out), timeout=600)
    assert r.ret == 2, r.stdout.str()[-2000:]
    run = load_run(out)
    assert [c.key.split("/")[0] for c in run.cases] == ["test_a"]
    assert run.interrupted and run.stop is not None
    assert (run.stop.cause, run.stop.detail, run.stop.phase) == ("signal", sig, "cases")


pytest_plugins = ["pytester"]

# the report stopped by three signals, the claim, os._exit in three places, a thread left,
# a late stop under python -m, pytest stopped by two signals
STOP_ATTEMPTS = 3 + 1 + 3 + 1 + 1 + 2
