"""Issue 57's hostile files (#11-13, #17): numbers a reader once took silently, and an output
folder the operating system refuses. Each is refused in one line naming the field (a case
left out and named; a file refused whole), or exits with the README's code."""

from __future__ import annotations

import copy
import json
import os
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from roof_sets import TEST_CPU
from roofbench.bench.cli import main
from testpaths import FIXTURES

import roofbench
from roofbench.pytest_benchmark import read_pytest_benchmark
from roofbench.readers import SchemaError, read_roofset, read_run
from roofbench.timing import TimerConfig


@pytest.fixture(scope="module")
def run_dict(tmp_path_factory) -> dict[str, Any]:
    """A results.json a session wrote (one case, its samples and their waits)."""
    out = tmp_path_factory.mktemp("run") / "o"
    a = np.ones(1 << 10)
    with roofbench.Session(out=out, roofs=read_roofset(TEST_CPU),
                           timer=TimerConfig.quick()):
        roofbench.measure(np.add, a, a, np.empty_like(a), flops=a.size, reads=2 * a.nbytes,
                          writes=a.nbytes, name="add")
    return json.loads((out / "results.json").read_text())


def _timing(d: dict[str, Any]) -> dict[str, Any]:
    return d["cases"][0]["measurement"]["timing"]


def test_waits_that_are_not_one_per_sample_leave_the_case_out(run_dict):
    d = copy.deepcopy(run_dict)
    t = _timing(d)
    n = len(t["samples_s"])
    t["waits_s"] = [0.0] * (100 * n)
    run = read_run(d)
    assert run.cases == []
    (note,) = [x for x in run.notes if x.startswith("unreadable case")]
    assert f"{100 * n} waits_s for {n} samples" in note


def test_a_negative_wait_leaves_the_case_out(run_dict):
    d = copy.deepcopy(run_dict)
    t = _timing(d)
    t["waits_s"] = [0.0] * (len(t["samples_s"]) - 1) + [-1.0]
    run = read_run(d)
    assert run.cases == [] and any("waits_s" in x for x in run.notes)


def test_waits_one_per_sample_are_read(run_dict):
    d = copy.deepcopy(run_dict)
    t = _timing(d)
    t["waits_s"] = [0.001] * len(t["samples_s"])
    assert len(read_run(d).cases) == 1


@pytest.mark.parametrize("value", ["yes", 1, "false", None])
def test_interrupted_must_be_true_or_false(run_dict, value, tmp_path, capsys):
    d = copy.deepcopy(run_dict)
    d["interrupted"] = value
    with pytest.raises(SchemaError, match="'interrupted' is .* not true or false"):
        read_run(d)
    (tmp_path / "r").mkdir()
    (tmp_path / "r" / "results.json").write_text(json.dumps(d))
    assert main(["report", str(tmp_path / "r"), "--out", str(tmp_path / "r.md")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "interrupted" in err and "Traceback" not in err


def test_interrupted_true_is_read(run_dict):
    d = copy.deepcopy(run_dict)
    d["interrupted"] = True
    assert read_run(d).interrupted is True


@pytest.mark.parametrize("key,value", [("device", 5), ("device", ""), ("backend", 3.5),
                                       ("workload", ["x"])])
def test_a_pytest_benchmark_entry_whose_names_are_not_text(key, value):
    d = json.loads((FIXTURES / "pytest-benchmark" / "numpy-benchmark-json.json").read_text())
    e = next(e for e in d["benchmarks"] if "flops" in (e.get("extra_info") or {}))
    e["extra_info"][key] = value
    with pytest.raises(SchemaError, match=f"extra_info.{key} must be a name"):
        read_pytest_benchmark(d)


@pytest.fixture
def read_only(tmp_path, monkeypatch) -> Path:
    """A folder the operating system refuses to write: os.access says so (as for a user on a
    folder of mode 0500) and a write there fails EROFS (as on a read-only mount, root too)."""
    import errno
    import tempfile

    ro = tmp_path / "ro"
    ro.mkdir()
    real_access, real_tmp = os.access, tempfile.NamedTemporaryFile

    def access(p: Any, mode: int, **kw: Any) -> bool:
        return False if Path(p) == ro and mode & os.W_OK else real_access(p, mode, **kw)

    def named(*a: Any, dir: Any = None, **kw: Any) -> Any:
        if dir is not None and ro in (Path(dir), *Path(dir).parents):
            raise OSError(errno.EROFS, "Read-only file system", str(dir))
        return real_tmp(*a, dir=dir, **kw)

    monkeypatch.setattr(os, "access", access)
    monkeypatch.setattr(tempfile, "NamedTemporaryFile", named)
    return ro


@pytest.mark.parametrize("cmd", ["model", "run"])
def test_a_read_only_output_folder_exits_3_as_the_readme_says(cmd, read_only, tmp_path,
                                                               roofs_file, capsys):
    """Permissions are the operating system's refusal: exit 3 (README "Exit codes")."""
    script = tmp_path / "prog.py"
    script.write_text("def program():\n    return (abs, (1,))\n")
    argv = {"model": ["model", str(script), "--out", str(read_only / "m")],
            "run": ["run", "--workload", "vector_add", "--size", "1024", "--backend", "cpu",
                    "--roofs", str(roofs_file), "--out", str(read_only / "r")]}[cmd]
    code = main(argv)
    err = capsys.readouterr().err
    assert code == 3, err
    assert err.strip().count("\n") == 0 and "not writable" in err
    assert not list(read_only.iterdir())


def test_a_write_refused_by_a_read_only_mount_exits_3(read_only):
    from roofbench.bench.results import check_writable

    from roofbench.boundary import Refusal

    with pytest.raises(Refusal) as e:
        check_writable(read_only / "sub")  # root passes os.access; the write itself fails
    assert e.value.code == 3


# waits (3), interrupted (5), pytest-benchmark names (4), a read-only folder (3)
RECORD_ATTEMPTS = 3 + 5 + 4 + 3
