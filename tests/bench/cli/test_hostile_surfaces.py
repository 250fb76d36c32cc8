"""A hostile user of the newest surfaces (`roofbench model`, `profile()`, `roofbench ab`,
`compare`), issue 39: each test is one or more attempts that must end cleanly. No run or
input file is replaced (each run its own folder, two runs into one --out both kept), every
setting is checked before any work, the user's own failure is said as the user's (exit 1
for a program that raised, 4 for memory, 2 for bad input; never "a bug in roofbench", 70),
a stop while the report is written is recorded, and a file whose figures contradict
themselves is refused in one line. ``-k count -s`` prints the count.
"""

from __future__ import annotations

import hashlib
import json
import shutil
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any, NoReturn

import pytest

torch = pytest.importorskip("torch")

from cli_run import run_cli  # noqa: E402
from roofbench.bench.measure.door import MeasureError  # noqa: E402
from roofbench.bench.results import CLAIM_FILE, claim_folder, load_run  # noqa: E402
from testpaths import REAL_CPU_RUN  # noqa: E402

import roofbench  # noqa: E402
from roofbench.timing import TimerConfig  # noqa: E402

from ..profile.test_torch_program import FAST, ROOFS  # noqa: E402
from .test_ab import ROOFS as AB_ROOFS  # noqa: E402
from .test_ab import SIDE  # noqa: E402

PROGRAM = '''
import torch

def program():
    return (lambda a, b: torch.sqrt(a * a + b * b)), (torch.randn(64), torch.randn(64))
'''


def _digest(folder: Path) -> dict[str, str]:
    return {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in folder.iterdir()
            if p.is_file()}


def _raises(e: BaseException) -> Callable[..., NoReturn]:
    """A stand-in for a library function that fails with ``e`` however it is called."""
    def fail(*a: Any, **kw: Any) -> NoReturn:
        raise e
    return fail


def _one_line(err: str) -> str:
    lines = [ln for ln in err.strip().splitlines() if ln.startswith("roofbench")]
    assert len(lines) == 1 and "Traceback" not in err, err
    return lines[0]


@pytest.fixture
def roofs_file(tmp_path: Path) -> Path:
    p = tmp_path / "roofs.json"
    p.write_text(json.dumps(ROOFS.to_dict()))
    return p


def _script(tmp_path: Path, body: str, name: str = "prog.py") -> Path:
    p = tmp_path / name
    p.write_text(body)
    return p


# -- data lost: never replace a results file; each run its own folder -----------------------

def test_model_never_replaces_a_results_file_even_its_own_roofs_input(tmp_path, capsys):
    """A `make bench` record in --out, given as --roofs too: kept byte for byte; the profile
    goes to the first free sibling and says so."""
    out = tmp_path / "bench"
    out.mkdir()
    shutil.copy(REAL_CPU_RUN, out / "results.json")
    before = _digest(out)
    p = _script(tmp_path, PROGRAM)
    rc, said, err = run_cli(["model", str(p), "--roofs", str(out / "results.json"), "--out",
                              str(out)], capsys)
    assert rc == 0, err
    assert _digest(out) == before
    assert "holds a run already" in err and f"wrote {tmp_path / 'bench-2'}" in said
    assert load_run(tmp_path / "bench-2").cases


def test_profile_out_never_replaces_a_run(tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    shutil.copy(REAL_CPU_RUN, out / "results.json")
    before = _digest(out)
    with torch.no_grad():
        roofbench.profile(lambda a: a * 2, torch.ones(32), roofs=ROOFS, timer=FAST, out=out)
        roofbench.profile(lambda a: a * 3, torch.ones(32), roofs=ROOFS, timer=FAST, out=out)
    assert _digest(out) == before
    assert load_run(out / "results.json").cases  # the record, still whole
    assert (tmp_path / "out-2" / "profile.md").is_file()
    assert (tmp_path / "out-3" / "profile.md").is_file()  # the second profile: its own


def test_runs_into_one_folder_at_once_each_keep_their_own(tmp_path):
    """Sixteen runs claim one empty --out at once (as two `model` runs do when they write):
    sixteen folders, each claimed by one of them; the marker goes once results.json is in."""
    out = tmp_path / "out"
    out.mkdir()
    got: list[Path] = []
    lock = threading.Lock()
    start = threading.Barrier(16)

    def claim() -> None:
        start.wait()
        d = claim_folder(out)
        with lock:
            got.append(d)
    threads = [threading.Thread(target=claim) for _ in range(16)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(set(got)) == 16 and all((d / CLAIM_FILE).is_file() for d in got)


def test_two_model_runs_into_one_out_both_kept(tmp_path, roofs_file, capsys):
    p = _script(tmp_path, PROGRAM)
    out = tmp_path / "out"
    for _ in range(2):
        rc, _, err = run_cli(["model", str(p), "--roofs", str(roofs_file), "--out", str(out)],
                              capsys)
        assert rc == 0, err
    assert load_run(out).cases and load_run(tmp_path / "out-2").cases
    assert not (out / CLAIM_FILE).exists()  # released once results.json holds the folder


def test_ab_run_twice_keeps_both_jobs(tmp_path, capsys):
    """The second job writes out-2 (its a/, b/, compare) and never gates on or rewrites the
    first job's files."""
    (tmp_path / "base.py").write_text(SIDE.format(times=1, only="x"))
    (tmp_path / "new.py").write_text(SIDE.format(times=1, only="x"))
    (tmp_path / "roofs.json").write_text(json.dumps(AB_ROOFS))
    out = tmp_path / "ab"
    argv = ["ab", str(tmp_path / "base.py"), str(tmp_path / "new.py"), "--out", str(out),
            "--quick", "--roofs", str(tmp_path / "roofs.json")]
    rc, _, err = run_cli(argv, capsys)
    assert rc == 0, err
    first = {s: _digest(out / s) for s in ("a", "b")}
    compare_first = (out / "compare.json").read_bytes()
    rc, said, err = run_cli(argv, capsys)
    assert rc == 0, err
    assert {s: _digest(out / s) for s in ("a", "b")} == first
    assert (out / "compare.json").read_bytes() == compare_first
    assert not (out / "a-2").exists() and not (out / "b-2").exists()
    second = tmp_path / "ab-2"
    assert load_run(second / "a").cases and load_run(second / "b").cases
    assert f"A/B run: {second}" in said and (second / "compare.json").is_file()
    assert json.loads((second / "compare.json").read_text())["a"]["path"] == str(
        second / "a" / "results.json")


def test_a_stop_while_the_report_is_drawn_is_recorded(tmp_path, monkeypatch):
    """SIGINT/SIGTERM (a KeyboardInterrupt) while the roofline is plotted: results.json says
    interrupted, and profile.md is written once more with the note."""
    import roofbench.bench.present.plot as plot

    monkeypatch.setattr(plot, "plot_roofline", _raises(KeyboardInterrupt()))
    with torch.no_grad(), pytest.raises(KeyboardInterrupt):
        roofbench.profile(lambda a: a * 2, torch.ones(32), roofs=ROOFS, timer=FAST,
                          out=tmp_path / "p")
    run = load_run(tmp_path / "p")
    assert run.interrupted
    assert "interrupted while the profile's report" in (tmp_path / "p" / "profile.md").read_text()


def test_a_sigterm_while_model_draws_its_report_exits_130_recorded(tmp_path, roofs_file,
                                                                    monkeypatch, capsys):
    import roofbench.bench.present.plot as plot

    from roofbench.boundary import Stopped

    monkeypatch.setattr(plot, "plot_roofline", _raises(Stopped("SIGTERM")))
    p = _script(tmp_path, PROGRAM)
    rc, _, err = run_cli(["model", str(p), "--roofs", str(roofs_file), "--out",
                           str(tmp_path / "o")], capsys)
    assert rc == 130 and "stopped by SIGTERM" in err
    assert load_run(tmp_path / "o").interrupted
    assert "interrupted while" in (tmp_path / "o" / "profile.md").read_text()


def test_two_model_processes_into_one_out_at_once_both_kept(tmp_path, roofs_file):
    """Two `roofbench model` processes started together into one --out: both exit 0, each
    says the folder it wrote, and the two folders differ and hold a whole run each."""
    import os
    import subprocess
    import sys

    p = _script(tmp_path, PROGRAM)
    root = Path(roofbench.__file__).resolve().parent.parent
    env = {**os.environ, "PYTHONPATH": str(root)}
    cmd = [sys.executable, "-m", "roofbench.bench.cli", "model", str(p), "--roofs",
           str(roofs_file), "--out", str(tmp_path / "out"), "--threads", "1"]
    procs = [subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                              env=env, cwd=tmp_path) for _ in range(2)]
    outs = [pr.communicate(timeout=600) for pr in procs]
    assert [pr.returncode for pr in procs] == [0, 0], outs
    wrote = {ln.split()[1] for o, _ in outs for ln in o.splitlines()
             if ln.startswith("wrote ") and ln.endswith("results.json")}
    assert wrote == {str(tmp_path / "out" / "results.json"),
                     str(tmp_path / "out-2" / "results.json")}
    assert all(load_run(w).cases for w in wrote)


DATA_ATTEMPTS = 2 + 2 + 16 + 2 + 2 + 1 + 1 + 2


# -- the user's failure is the user's ------------------------------------------------------

RAISES = PROGRAM.replace("torch.sqrt(a * a + b * b)", "f(a, b)").replace(
    "def program", "def f(a, b):\n    c = a * b\n    raise ValueError('bad shape in my model')"
    "\n\ndef program")


@pytest.mark.parametrize("body, code, needle", [
    (RAISES, 1, "ValueError: bad shape in my model (at prog.py:"),
    (PROGRAM.replace("torch.sqrt(a * a + b * b)", "torch.empty(1 << 60)"), 4, "out of memory"),
    (PROGRAM.replace("torch.sqrt(a * a + b * b)", "a @ torch.ones(3, 3)"), 1, "RuntimeError"),
    (PROGRAM.replace("torch.sqrt(a * a + b * b)", "__import__('sys').exit(3)"), 1,
     "called sys.exit(3)"),
    ("import sys\nsys.exit(3)\n", 2, "called sys.exit(3) on import"),
], ids=["raises-midway", "allocation-impossible", "shape-error", "exit-in-program",
        "exit-on-import"])
def test_a_programs_failure_is_said_as_its_own(tmp_path, roofs_file, capsys, body, code,
                                               needle):
    p = _script(tmp_path, body)
    rc, _, err = run_cli(["model", str(p), "--roofs", str(roofs_file), "--out",
                       str(tmp_path / "o")], capsys)
    line = _one_line(err)
    assert rc == code and needle in line and "bug in roofbench" not in line, err


def test_a_jax_shape_error_is_the_users(tmp_path):
    jax = pytest.importorskip("jax")
    jnp = jax.numpy
    f = jax.jit(lambda a, b: a @ b)
    from roofbench.bench.measure.user_code import UserCodeError

    with pytest.raises(UserCodeError) as e:
        roofbench.profile(f, jnp.ones((3, 4)), jnp.ones((5, 6)), roofs=ROOFS, timer=FAST)
    assert e.value.code == 1 and "\n" not in str(e.value) and "TypeError" in str(e.value)


KWARGS = '''
import torch

def f(a, out=None, name=None, timer=None):
    assert out == "mine" and name == "n" and timer == "t", (out, name, timer)
    return a * 2

def program():
    return f, (torch.ones(16),), {"out": "mine", "name": "n", "timer": "t"}
'''


def test_an_op_that_fails_only_when_replayed_is_roofbenchs(monkeypatch):
    """The program ran; roofbench's replay of one op alone failed: not the user's error."""
    from roofbench.bench.measure.user_code import raised_by_user
    from roofbench.bench.profile import torch_program as prof_mod

    real = prof_mod._replay

    def broken(func, args, kwargs):
        return real(lambda *a, **k: torch.ones(2) @ torch.ones(3), args, kwargs)
    monkeypatch.setattr(prof_mod, "_replay", broken)
    with torch.no_grad(), pytest.raises(prof_mod.ReplayError) as e:
        roofbench.profile(lambda a: a * 2, torch.ones(8), roofs=ROOFS, timer=FAST)
    assert not raised_by_user(e.value)


def test_a_script_kwarg_named_like_an_option_reaches_the_program(tmp_path, roofs_file,
                                                                 capsys):
    p = _script(tmp_path, KWARGS)
    rc, _, err = run_cli(["model", str(p), "--roofs", str(roofs_file), "--out",
                       str(tmp_path / "o")], capsys)
    assert rc == 0, err
    assert load_run(tmp_path / "o").cases


def test_an_ab_side_that_raises_is_the_users(tmp_path, capsys):
    (tmp_path / "base.py").write_text(SIDE.format(times=1, only="x"))
    (tmp_path / "new.py").write_text(SIDE.format(times=1, only="x").replace(
        "def same(a, b, c):\n", "def same(a, b, c):\n    raise KeyError('new side broke')\n"))
    (tmp_path / "roofs.json").write_text(json.dumps(AB_ROOFS))
    rc, _, err = run_cli(["ab", str(tmp_path / "base.py"), str(tmp_path / "new.py"), "--out",
                       str(tmp_path / "ab"), "--quick", "--roofs",
                       str(tmp_path / "roofs.json")], capsys)
    line = _one_line(err)
    assert rc == 1 and "new side broke" in line and "AB_CASES['same']" in line, err


def test_a_cases_factory_that_raises_is_one_line(tmp_path, capsys):
    (tmp_path / "base.py").write_text("def AB_CASES():\n    raise OSError('no data here')\n")
    (tmp_path / "new.py").write_text(SIDE.format(times=1, only="x"))
    rc, _, err = run_cli(["ab", str(tmp_path / "base.py"), str(tmp_path / "new.py"), "--out",
                       str(tmp_path / "ab"), "--quick"], capsys)
    line = _one_line(err)
    assert rc == 2 and "AB_CASES() raised OSError: no data here" in line, err


USER_ATTEMPTS = 5 + 1 + 1 + 1 + 1 + 1


# -- every setting before any work ---------------------------------------------------------

TOUCHED = '''
import pathlib, torch

def program():
    pathlib.Path(__file__).with_name("ran").write_text("the program was loaded")
    return (lambda a: a * 2), (torch.ones(8),)
'''


@pytest.mark.parametrize("extra, needle", [
    (["--threads", "-3"], "--threads: must be >= 1, got -3"),
    (["--threads", "0"], "--threads: must be >= 1, got 0"),
    (["--out", "{file}"], "is a file, not a folder"),
    (["--out", "{file}/sub"], "under a file"),
    (["--roofs", "{missing}"], "--roofs"),
], ids=["threads-negative", "threads-zero", "out-a-file", "out-under-a-file", "roofs-missing"])
def test_model_settings_are_checked_before_the_script_runs(tmp_path, roofs_file, capsys,
                                                           extra, needle):
    p = _script(tmp_path, TOUCHED)
    (tmp_path / "file").write_text("mine\n")
    argv = ["model", str(p), *[a.format(file=tmp_path / "file", missing=tmp_path / "nope")
                                for a in extra]]
    if "--roofs" not in extra:
        argv += ["--roofs", str(roofs_file)]
    rc, _, err = run_cli(argv, capsys)
    assert rc == 2 and needle in err.strip().splitlines()[-1], err
    assert not (tmp_path / "ran").exists()  # refused before the script was imported
    assert (tmp_path / "file").read_text() == "mine\n"


@pytest.mark.parametrize("kw, needle", [
    ({"timer": "fast"}, "timer= must be a TimerConfig"),
    ({"roofs": 5}, "roofs= must be"),
    ({"out": 3}, "out= must be a folder path"),
    ({"compile": "yes"}, "compile= must be True or False"),
    ({"name": "a/b/c"}, "name= must be"),
    ({"out": "/dev/null/x"}, "under a file"),
    ({"roofs": "/nonexistent/roofs.json"}, "roofs="),
], ids=["timer-str", "roofs-int", "out-int", "compile-str", "name-3-parts", "out-under-file",
        "roofs-missing-file"])
def test_profile_checks_its_own_arguments_first(kw, needle):
    ran = []

    def prog(a):
        ran.append(1)
        return a * 2
    with pytest.raises(MeasureError) as e:
        roofbench.profile(prog, torch.ones(8), **{"roofs": ROOFS, "timer": FAST, **kw})
    assert needle in str(e.value) and "\n" not in str(e.value)
    assert not ran


@pytest.mark.parametrize("make, needle", [
    (lambda: torch.ones(8, device="meta"), "meta tensor"),
    (lambda: torch.ones(4, 4).to_sparse(), "sparse_coo"),
    (lambda: torch.ones(4, 4).to_sparse_csr(), "sparse_csr"),
], ids=["meta", "sparse-coo", "sparse-csr"])
def test_meta_and_sparse_arguments_are_refused_with_the_reason(make, needle):
    with pytest.raises(MeasureError) as e:
        roofbench.profile(lambda a: a * 2, make(), roofs=ROOFS, timer=TimerConfig.quick())
    assert needle in str(e.value) and "\n" not in str(e.value)


SETTING_ATTEMPTS = 5 + 7 + 3


# -- unusual work: counted right, refused, or said -----------------------------------------

def _threaded(x):
    import threading

    out = []
    t = threading.Thread(target=lambda: out.append(x @ x), name="worker")
    t.start()
    t.join()
    return out[0]


def _generator(x):
    yield x * 2


@pytest.mark.parametrize("fn, arg, needle", [
    (lambda x: x * x, lambda: torch.randn(64, dtype=torch.complex64), "complex tensors"),
    (lambda x: x * x + x, lambda: torch.randint(0, 9, (64,)), "no integer roof"),
    (_threaded, lambda: torch.ones(32, 32), "started 1 thread(s) (worker)"),
    (lambda x: __import__("numpy").add(x, x), lambda: __import__("numpy").ones(64),
     "no aten op was recorded: its work is not PyTorch's"),
    (_generator, lambda: torch.ones(8), "returned a generator"),
], ids=["complex", "integer", "thread", "numpy", "generator"])
def test_work_the_counts_cannot_hold_is_said(fn, arg, needle):
    with torch.no_grad():
        prof = roofbench.profile(fn, arg(), roofs=ROOFS, timer=FAST)
    assert any(needle in n for n in prof.notes), prof.notes
    if needle == "complex tensors":  # not one FLOP per element: not counted, by bandwidth
        assert all(p.op.flops == 0 for p in prof.ops)


def test_meta_tensors_made_inside_the_program_are_refused():
    with torch.no_grad(), pytest.raises(MeasureError, match="meta tensors"):
        roofbench.profile(lambda x: torch.ones(1 << 20, device="meta") * 2 + x.sum(),
                          torch.ones(4), roofs=ROOFS, timer=FAST)


def test_jax_static_argnums_are_kept_static():
    jax = pytest.importorskip("jax")
    f = jax.jit(lambda a, n: a * n, static_argnums=(1,))
    prof = roofbench.profile(f, jax.numpy.ones(8), 3, roofs=ROOFS, timer=FAST)
    assert prof.program.measurement.median_s


def test_a_failing_torch_compile_is_said_and_the_profile_written(tmp_path, roofs_file,
                                                                 monkeypatch, capsys):
    import torch._inductor.utils as iu

    monkeypatch.setattr(iu, "run_and_get_code", _raises(RuntimeError("inductor cannot build this")))
    p = _script(tmp_path, PROGRAM)
    rc, said, err = run_cli(["model", str(p), "--roofs", str(roofs_file), "--compile", "--out",
                          str(tmp_path / "o")], capsys)
    assert rc == 0, err
    assert "compiled: failed (RuntimeError: inductor cannot build this)" in said
    assert "`torch.compile` failed: RuntimeError" in (tmp_path / "o" / "profile.md").read_text()


def test_ab_fail_on_invalid_with_only_an_invalid_new_side_fails_the_gate(tmp_path, capsys):
    side = ("import numpy as np\nN = 1 << 12\na = np.full(N, 0.5, np.float32)\n"
            "c = np.empty_like(a)\ndef add(a, c): np.add(a, {x}, out=c)\n"
            "AB_CASES = {{'add': dict(fn=add, args=(a, c), flops=N, reads=a, writes=c, "
            "reference=np.full(N, 1.0), output=c)}}\n")
    (tmp_path / "base.py").write_text(side.format(x="a"))
    (tmp_path / "new.py").write_text(side.format(x="1.0"))
    (tmp_path / "roofs.json").write_text(json.dumps(AB_ROOFS))
    rc, said, err = run_cli(["ab", str(tmp_path / "base.py"), str(tmp_path / "new.py"), "--out",
                          str(tmp_path / "ab"), "--quick", "--roofs",
                          str(tmp_path / "roofs.json"), "--fail-on", "invalid"], capsys)
    assert rc == 1, err
    assert "gate failed (invalid): cpu/add/default/fp32/4096" in said


UNUSUAL_ATTEMPTS = 5 + 1 + 1 + 1 + 1


# -- compare: a file that contradicts itself -----------------------------------------------

def _two_runs(tmp_path: Path, edit) -> tuple[Path, Path]:
    """Two runs of one numpy case as measure() writes them, B's file then edited."""
    import numpy as np

    x = np.ones(1 << 12, np.float32)
    a, b = tmp_path / "a", tmp_path / "b"
    for d in (a, b):
        with roofbench.Session(out=d, roofs=ROOFS, timer=FAST):
            roofbench.measure(lambda: x * 2, flops=x.size, reads=x, writes=x, name="mul",
                              dtype="fp32", size=[x.size])
    d = json.loads((b / "results.json").read_text())
    edit(d)
    (b / "results.json").write_text(json.dumps(d))
    return a, b


def _first_timed(d: dict) -> dict:
    return next(c for c in d["cases"] if (c.get("measurement") or {}).get("timing"))


def _scale_samples(d: dict) -> None:
    t = _first_timed(d)["measurement"]["timing"]
    t["samples_s"] = [x * 100 for x in t["samples_s"]]


def _duplicate(d: dict) -> None:
    d["cases"].append(json.loads(json.dumps(_first_timed(d))))


@pytest.mark.parametrize("edit, needle", [
    (_scale_samples, "stores a median of"),
    (_duplicate, "occurs 2 times"),
], ids=["samples-x100", "duplicated-key"])
def test_compare_refuses_a_file_that_contradicts_itself(tmp_path, capsys, edit, needle):
    a, b = _two_runs(tmp_path, edit)
    rc, _, err = run_cli(["compare", str(a), str(b), "--fail-on", "slower:5%"], capsys)
    line = _one_line(err)
    assert rc == 2 and "contradicts itself" in line and needle in line, err
    assert not list(b.glob("compare*"))  # nothing judged, nothing written


def test_a_pytest_benchmark_file_without_counts_says_what_is_missing(tmp_path, capsys):
    doc = {"machine_info": {"cpu": {"brand_raw": "x"}}, "benchmarks": [
        {"name": "test_add", "stats": {"median": 1e-3, "min": 1e-3, "rounds": 3},
         "extra_info": {}}]}
    for n in ("a", "b"):
        (tmp_path / f"{n}.json").write_text(json.dumps(doc))
    rc, _, err = run_cli(["compare", str(tmp_path / "a.json"), str(tmp_path / "b.json"),
                       "--fail-on", "slower"], capsys)
    line = _one_line(err)
    assert rc == 2 and "without flops, bytes and dtype in extra_info" in line, err
    assert "test_add" in line


COMPARE_ATTEMPTS = 2 + 1

SURFACE_ATTEMPTS = (DATA_ATTEMPTS + USER_ATTEMPTS + SETTING_ATTEMPTS + UNUSUAL_ATTEMPTS
                    + COMPARE_ATTEMPTS)


def test_count(capsys):
    with capsys.disabled():
        print(f"\nhostile attempts on model, profile, ab and compare: {SURFACE_ATTEMPTS}")
    assert SURFACE_ATTEMPTS > 30
