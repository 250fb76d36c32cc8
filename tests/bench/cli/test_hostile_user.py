"""A hostile user's environment and the CLI's later phases: Numba's settings and cache, an
address-space limit, a plug-in that calls os._exit, paths that are not UTF-8, compare's
outputs and empty samples, flops=1e300 on the plot, `roofbench occupancy` stopped in its roofs
and report phases, a stop that leaves an import half done, and SIGTERM after the last line.
Each ends with the documented exit code and one line. ``-k count -s`` prints the count."""

from __future__ import annotations

import errno
import json
import os
import resource
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest
from roofbench.bench.cli import main
from roofbench.bench.results import load_run
from testpaths import ROOT

from roofbench import boundary


def _one_line(err: str) -> str:
    lines = [ln for ln in err.splitlines() if ln.startswith("roofbench")]
    assert len(lines) == 1 and "Traceback" not in err, err
    return lines[0]


# -- Numba's settings, read at its import: checked before ---------------------------------

@pytest.mark.parametrize("value,says", [("0", "from 1 to"), ("abc", "not a whole number"),
                                        ("99999", "from 1 to"), ("-1", "from 1 to"),
                                        ("2.5", "not a whole number")])
def test_bad_numba_threads_are_one_line_and_exit_2(value, says, monkeypatch, capsys):
    monkeypatch.setenv("NUMBA_NUM_THREADS", value)
    assert main(["list"]) == 2
    line = _one_line(capsys.readouterr().err)
    assert "NUMBA_NUM_THREADS" in line and says in line


def test_a_read_only_install_and_home_move_numbas_cache(monkeypatch, capsys, tmp_path):
    """Root writes anywhere, so the read-only folders are injected: neither the install's
    __pycache__ nor the home's cache can be written, the temporary folder can."""
    # set first, so that the undo removes what main() sets (a delenv of an unset name
    # records nothing: the folder leaked into every later test of the worker)
    monkeypatch.setenv("NUMBA_CACHE_DIR", "")
    monkeypatch.delenv("NUMBA_CACHE_DIR")
    monkeypatch.setattr("tempfile.tempdir", str(tmp_path))
    monkeypatch.setattr(boundary, "_writable", lambda p: p.startswith(str(tmp_path)))
    monkeypatch.setattr(boundary, "_NOTED", [])
    assert main(["list"]) == 0
    moved = os.environ["NUMBA_CACHE_DIR"]
    assert moved.startswith(str(tmp_path)) and Path(moved).is_dir()
    err = capsys.readouterr().err
    assert err.count("Numba's cache goes to") == 1


def test_a_writable_home_leaves_numba_alone(monkeypatch):
    monkeypatch.delenv("NUMBA_CACHE_DIR", raising=False)
    monkeypatch.setattr(boundary, "_writable", lambda p: True)
    assert boundary.numba_cache_dir() is None and "NUMBA_CACHE_DIR" not in os.environ


def test_read_only_home_and_install_in_a_process(tmp_path):
    """`roofbench list` with the checkout (the install: kernels/__pycache__) and the home
    mounted read-only, in a mount namespace of its own (a read-only mount stops root too):
    without the move, importing a kernel fails ("cannot cache function ...: no locator")."""
    if os.geteuid() != 0 or not shutil.which("unshare"):
        pytest.skip("needs root and unshare(1) for read-only bind mounts")
    home, tmp = tmp_path / "home", tmp_path / "tmp"
    home.mkdir()
    tmp.mkdir()
    script = textwrap.dedent(f"""
        set -e
        mount --bind {ROOT} {ROOT} && mount -o remount,bind,ro {ROOT}
        mount --bind {home} {home} && mount -o remount,bind,ro {home}
        exec {sys.executable} -m roofbench.bench.cli list
    """)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("NUMBA_", "XDG_"))}
    out = subprocess.run(["unshare", "-m", "sh", "-c", script], cwd=tmp, capture_output=True,
                         text=True, timeout=300, env=dict(env, HOME=str(home), TMPDIR=str(tmp)))
    if "mount:" in out.stderr or "unshare:" in out.stderr:
        pytest.skip(f"no read-only bind mounts here: {out.stderr.strip()[:200]}")
    assert out.returncode == 0, out.stderr
    assert "vector_add" in out.stdout
    (note,) = [ln for ln in out.stderr.splitlines() if "Numba's cache goes to" in ln]
    assert str(tmp) in note
    assert not list(home.iterdir())


# -- memory, plug-ins, encodings --------------------------------------------------------------

@pytest.mark.parametrize("exc,limited,code", [
    (OSError(errno.ENOMEM, "Cannot allocate memory"), False, 4),
    (OSError("Could not find/load shared object file 'libllvmlite.so'"), True, 4),
    (OSError("Could not find/load shared object file 'libllvmlite.so'"), False, 3),
    (OSError(errno.ENOSPC, "No space left on device", "x"), True, 3),
], ids=["enomem", "library-under-ulimit-v", "library-without-a-limit", "enospc"])
def test_memory_refused_by_the_system_is_exit_4(exc, limited, code, monkeypatch):
    monkeypatch.setattr(boundary, "address_space_limited", lambda: limited)
    assert boundary.outcome(exc).code == code


def test_an_address_space_limit_is_exit_4_in_a_process():
    def limit() -> None:
        resource.setrlimit(resource.RLIMIT_AS, (250 << 20, 250 << 20))
    out = subprocess.run([sys.executable, "-m", "roofbench.bench.cli", "list"], cwd=ROOT,
                         preexec_fn=limit, capture_output=True, text=True, timeout=300)
    if out.returncode == 0:
        pytest.skip("roofbench list fits in 250 MiB of address space here")
    assert out.returncode == 4, out.stderr
    assert "out of memory" in _one_line(out.stderr)


def test_a_plugin_calling_os_exit_on_import_is_one_line(tmp_path, monkeypatch, capsys):
    (tmp_path / "exits_hard.py").write_text("import os\nos._exit(9)\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setenv("ROOFBENCH_PLUGINS", "exits_hard")
    from roofbench import plugins

    plugins._load.cache_clear()
    real = os._exit
    try:
        assert main(["list"]) == 2
    finally:
        plugins._load.cache_clear()
    assert os._exit is real
    assert "os._exit(9)" in _one_line(capsys.readouterr().err)


def test_a_path_that_is_not_utf8_is_stored_and_reported(run_dir, tmp_path, capsys):
    d = json.loads((run_dir / "results.json").read_text())
    bad = os.fsdecode(b"caf\xe9")  # the surrogate escape a non-UTF-8 name is read as
    d["command"] = ["roofbench", "run", "--out", bad]
    (run_dir / "results.json").write_text(json.dumps(d))
    out = tmp_path / bad
    out.mkdir()
    for env in ({}, {"LC_ALL": "C", "PYTHONUTF8": "0"}):
        assert main(["report", str(run_dir), "--out", str(out / "r.md")]) == 0, env
        text = (out / "r.md").read_bytes().decode("utf-8")  # valid UTF-8: the escape written
        assert "caf\\udce9" in text
    assert load_run(run_dir).command[-1] == bad  # stored as it was given


# -- compare ------------------------------------------------------------------------------

def test_compare_onto_an_input_writes_nothing(run_dir, tmp_path, capsys):
    rc = main(["compare", str(run_dir), str(run_dir), "--out", str(run_dir / "results")])
    assert rc == 2 and "input of this command" in _one_line(capsys.readouterr().err)
    assert sorted(p.name for p in run_dir.iterdir()) == ["results.csv", "results.json"]


def test_a_gate_that_judged_nothing_exits_2_before_writing(run_dir, tmp_path, capsys):
    d = json.loads((run_dir / "results.json").read_text())
    d["device"] = "another device"
    (tmp_path / "b").mkdir()
    (tmp_path / "b" / "results.json").write_text(json.dumps(d))
    rc = main(["compare", str(run_dir), str(tmp_path / "b"), "--fail-on", "slower:5%",
               "--out", str(tmp_path / "cmp")])
    assert rc == 2
    _one_line(capsys.readouterr().err)
    assert not list(tmp_path.glob("cmp*"))  # exit 2: nothing written


def test_empty_sample_lists_compare_by_their_medians(run_dir, tmp_path, capsys):
    d = json.loads((run_dir / "results.json").read_text())
    for c in d["cases"]:
        if c.get("timing"):
            c["timing"]["samples_s"] = []
    (tmp_path / "b").mkdir()
    (tmp_path / "b" / "results.json").write_text(json.dumps(d))
    rc = main(["compare", str(run_dir), str(tmp_path / "b"), "--out", str(tmp_path / "c")])
    assert rc == 0 and "Traceback" not in capsys.readouterr().err
    cmp = json.loads((tmp_path / "c.json").read_text())
    assert all("no raw samples" in v["reason"] for v in cmp["cases"])


@pytest.mark.parametrize("flops", [10**300, 10**40, 1])
def test_absurd_flops_never_break_the_plot(flops, run_dir, tmp_path, capsys):
    d = json.loads((run_dir / "results.json").read_text())
    c = d["cases"][0]
    c["flops"], c["flop_per_s"] = flops, flops / c["median_s"]
    c["ai"] = {k: flops / v for k, v in c["bytes"].items()}
    c["efficiency"] = c["attainable"] = c["limiting_roof"] = None
    (run_dir / "results.json").write_text(json.dumps(d))
    assert main(["plot", str(run_dir), "--out", str(tmp_path / "p")]) == 0
    assert main(["report", str(run_dir), "--out", str(tmp_path / "r.md")]) == 0
    assert (tmp_path / "p.png").stat().st_size > 0
    assert "Traceback" not in capsys.readouterr().err


# -- every phase of occupancy interruptible --------------------------------------------------

# Two samples a case: these check where a stop lands and what it leaves, never a time.
OCC = ["occupancy", "--workload", "vector_add", "--dtype", "fp32", "--size", "4k",
       "--backend", "cpu", "--quick", "--samples", "2"]


def _stop(*a: Any, **k: Any) -> Any:
    raise KeyboardInterrupt


def test_occupancy_stopped_in_its_roofs_phase_leaves_its_record(tmp_path, monkeypatch,
                                                                capsys):
    import roofbench.bench.cli.run as occ  # occupancy runs through run.run_session

    monkeypatch.setattr(occ, "roofs_with_progress", _stop)
    assert main([*OCC, "--out", str(tmp_path / "o")]) == 130
    (res,) = (tmp_path / "o").glob("*/*/results.json")
    run = load_run(res)
    assert run.interrupted and run.stop is not None and run.stop.phase == "roofs"
    assert (res.parent / "report.md").is_file()


def test_occupancy_stopped_in_its_report_phase_says_so(tmp_path, roofs_file, monkeypatch):
    import roofbench.bench.present.outputs as outputs

    monkeypatch.setattr(outputs, "write_outputs", _stop)
    assert main([*OCC, "--roofs", str(roofs_file), "--out", str(tmp_path / "o")]) == 130
    (res,) = (tmp_path / "o").glob("*/*/results.json")
    run = load_run(res)
    assert run.interrupted and run.stop is not None and run.stop.phase == "report"
    assert run.cases and (res.parent / "report.md").is_file()


def test_a_stop_that_leaves_an_import_half_done_still_writes_report_md(tmp_path, roofs_file,
                                                                       monkeypatch, capsys):
    """The first stop cut an import of the page's plotting library in half: the second write
    cannot draw the page (Bokeh refuses to define its models twice), report.md is written."""
    import roofbench.bench.present.outputs as outputs

    def half_imported(*a: Any, **k: Any) -> Any:
        raise ImportError("cannot import name 'components' from partially initialized module")
    monkeypatch.setattr(outputs, "write_outputs", _stop)
    monkeypatch.setattr(outputs, "write_report", half_imported)
    rc = main(["run", "--backend", "cpu", "--quick", "--samples", "2", "--kernel",
               "vector_add", "--dtype", "fp32", "--size", "4k", "--roofs", str(roofs_file),
               "--out", str(tmp_path)])
    assert rc == 130
    (res,) = tmp_path.glob("*/*/results.json")
    assert (res.parent / "report.md").stat().st_size > 0
    assert "report.html not rewritten" in capsys.readouterr().err


def test_sigterm_after_the_last_line_exits_130():
    code = textwrap.dedent("""
        import os, signal, sys, time
        from roofbench.boundary import guarded
        rc = guarded(lambda: print("last line") or 0, late_stop=True)
        os.kill(os.getpid(), signal.SIGTERM)
        time.sleep(30)
        sys.exit(rc)
    """)
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True,
                         text=True, timeout=60)
    assert out.returncode == 130 and out.stdout == "last line\n"


def test_ctrl_c_through_exec_of_a_string_still_exits_130(tmp_path):
    """A Ctrl-C that lands while dataclasses exec()s a generated __init__ (a module being
    imported): CPython 3.11 marks it unhandled for good, and a `python -m` process died by
    SIGINT (-2) after printing the stop and choosing 130 (seen in CI: the signal matrix's
    start-up)."""
    (tmp_path / "stopped_in_exec.py").write_text(textwrap.dedent("""
        import sys
        from roofbench.boundary import guarded
        def command():
            exec("raise KeyboardInterrupt")
        sys.exit(guarded(command))
    """))
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), str(tmp_path)])}
    out = subprocess.run([sys.executable, "-m", "stopped_in_exec"], cwd=tmp_path, env=env,
                         capture_output=True, text=True, timeout=60)
    assert (out.returncode, out.stderr) == (130, "roofbench: stopped by SIGINT\n")


def test_a_stop_while_the_roofs_are_saved_is_recorded(tmp_path, roofs_file, monkeypatch):
    """A Ctrl-C after the roofs and before the cases (the run's roofs being saved): exit 130
    and a results.json that says it stopped, never a run that looks finished with no case."""
    from roofbench.bench.suite.session import RunSession

    monkeypatch.setattr(RunSession, "set_roofs", _stop)
    assert main([*OCC, "--roofs", str(roofs_file), "--out", str(tmp_path / "o")]) == 130
    (res,) = (tmp_path / "o").glob("*/*/results.json")
    run = load_run(res)
    assert run.interrupted and run.stop is not None and run.stop.cause == "signal"


# Numba threads (5), cache (3), memory (4 + 1), os._exit, encodings, compare (3), FLOPs (3),
# phases and signals (7)
ATTEMPTS = 5 + 3 + 5 + 1 + 1 + 3 + 3 + 7


def test_a_stop_inside_a_c_callback_is_sent_again():
    """A SIGTERM that lands in llvmlite's ctypes callback (Numba compiling) would be raised
    there, printed and lost: the handler sends it again, and it stops the command after."""
    import signal
    import time
    import types

    frame = types.SimpleNamespace(f_code=types.SimpleNamespace(
        co_filename="/venv/llvmlite/binding/executionengine.py"))
    with pytest.raises(boundary.Stopped), boundary.stop_signals():
        handler = signal.getsignal(signal.SIGTERM)
        assert callable(handler)
        handler(signal.SIGTERM, frame)  # in the callback: returns
        time.sleep(30)  # the signal again, a moment later: Stopped


def test_count(capsys):
    """The attempts of this file (printed with -s)."""
    with capsys.disabled():
        print(f"\nhostile environment and CLI-phase attempts: {ATTEMPTS}")
    assert ATTEMPTS > 20
