"""A hostile user of the pytest plugin, in fresh pytest processes: bad options refused once,
at start, with one line (pytest.UsageError, exit 4), never a traceback in every test;
``--roofline-out`` given twice keeps both runs; a user's own results.json is never written
over; under pytest-xdist (-n 2) one results.json holds every test's case; a malformed call
fails its test with one line."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from pytester_suite import inner_suite
from roof_sets import TEST_CPU
from roofbench.bench.backends.cpu import cpu_model
from roofbench.bench.results import load_run

pytest_plugins = ["pytester"]

TESTS = '''
import numpy as np
import pytest

N = 1 << 12


@pytest.mark.parametrize("k", range(4))
def test_add(roofline, k):
    a, b = np.full(N, 0.5, np.float32), np.full(N, 0.25, np.float32)
    c = np.empty_like(a)
    rec = roofline(np.add, a, b, c, flops=N, reads=[a, b], writes=c,
                   reference=np.full(N, 0.75), output=c)
    assert rec.valid


def test_sum_keywords(roofline):
    x = np.ones((64, 32), np.float32)
    rec = roofline(np.sum, x, axis=0, flops=x.size, reads=x, writes=128,
                   reference=lambda x, axis: x.sum(axis=axis))
    assert rec.valid


def test_plain():
    assert True
'''

MALFORMED = '''
import numpy as np


def test_bad(roofline):
    a = np.ones(8, np.float32)
    roofline(np.negative, a, flops=-3, reads=a, writes=a)
'''

# dram and fp32 roofs (no fp64 one)
ROOFS = {"device": cpu_model(), "roofs": [r for r in TEST_CPU["roofs"] if r["name"] != "fp64"]}


@pytest.fixture
def suite(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> pytest.Pytester:
    return inner_suite(pytester, monkeypatch, ROOFS, test_kernels=TESTS)


def _run(p: pytest.Pytester, *args: str) -> pytest.RunResult:
    return p.runpytest_subprocess("-p", "no:cacheprovider", "-p", "no:benchmark",
                                  "--roofline-quick", *args, timeout=600)


def _roofs(p: pytest.Pytester) -> list[str]:
    return ["--roofline-roofs", str(p.path / "roofs.json")]


def _bad_roofs(p: pytest.Pytester, name: str, roofs: object) -> str:
    (p.path / name).write_text(json.dumps({"device": cpu_model(), "roofs": roofs}))
    return name


# id, the options (callables of the suite for files it needs), words of the one line
BAD_OPTIONS = [
    ("out-a-file", lambda p: ["--roofline-out", "test_kernels.py"], "is a file"),
    ("out-under-a-file", lambda p: ["--roofline-out", "test_kernels.py/x"], "is a file"),
    ("out-empty", lambda p: ["--roofline-out", " "], "empty"),
    ("roofs-missing", lambda p: ["--roofline-roofs", "nope.json"], "no such roofs file"),
    ("roofs-a-folder", lambda p: ["--roofline-roofs", "."], "a folder"),
    ("roofs-bool-value", lambda p: ["--roofline-roofs", _bad_roofs(p, "b.json", [
        {**ROOFS["roofs"][0], "value": True}])], "value must be a number"),
    ("roofs-misspelled", lambda p: ["--roofline-roofs", _bad_roofs(p, "m.json", [
        {**ROOFS["roofs"][0], "precison": "fp32"}])], "unknown field 'precison'"),
    ("roofs-dev-zero", lambda p: ["--roofline-roofs", "/dev/zero"], "not a regular file"),
]


@pytest.mark.parametrize("opts,says", [(o, s) for _, o, s in BAD_OPTIONS],
                         ids=[i for i, _, _ in BAD_OPTIONS])
def test_a_bad_option_is_refused_once_at_start(suite, opts, says):
    r = _run(suite, *opts(suite))
    assert r.ret == pytest.ExitCode.USAGE_ERROR
    err = r.stderr.str()
    assert "Traceback" not in err + r.stdout.str()
    (line,) = [ln for ln in err.splitlines() if ln.startswith("ERROR:")]
    assert says in line and "--roofline" in line
    assert not list(Path(suite.path).rglob("results.json"))


def test_a_malformed_call_fails_its_test_with_one_line(pytester, monkeypatch):
    pytester.makepyfile(test_bad=MALFORMED)
    (pytester.path / "roofs.json").write_text(json.dumps(ROOFS))
    r = _run(pytester, *_roofs(pytester))
    r.assert_outcomes(failed=1)
    r.stdout.fnmatch_lines(["*roofline: flops must be >= 0, got -3*"])
    assert "Traceback" not in r.stdout.str()


def test_roofline_out_twice_keeps_both_runs(suite):
    for _ in range(2):
        _run(suite, *_roofs(suite), "--roofline-out", "out").assert_outcomes(passed=6)
    first, second = load_run(suite.path / "out"), load_run(suite.path / "out-2")
    assert len(first.cases) == len(second.cases) == 5


def test_a_users_own_results_json_is_kept(suite):
    (suite.path / "out").mkdir()
    (suite.path / "out" / "results.json").write_text("{\"mine\": 1}\n")
    r = _run(suite, *_roofs(suite), "--roofline-out", "out")
    r.assert_outcomes(passed=6)
    r.stdout.fnmatch_lines(["*case(s) on the roofline*: out-2/results.json*"])
    assert (suite.path / "out" / "results.json").read_text() == "{\"mine\": 1}\n"
    assert len(load_run(suite.path / "out-2").cases) == 5


def test_under_xdist_one_results_file_holds_every_case(suite):
    pytest.importorskip("xdist")
    r = _run(suite, *_roofs(suite), "-n", "2", "--roofline-out", "out")
    r.assert_outcomes(passed=6)
    run = load_run(suite.path / "out")
    assert sorted(c.key for c in run.cases) == sorted(
        [f"test_add/{k}/fp32/4096" for k in range(4)] + ["test_sum_keywords/default/fp32/64x32"])
    assert any("merged from" in n for n in run.notes)
    assert (suite.path / "out" / "report.md").is_file()
    assert sorted(p.name for p in suite.path.iterdir() if p.name.startswith("out")) == ["out"]
    r.stdout.fnmatch_lines(["*= roofline =*", "*5 case(s) on the roofline*"])


PLUGIN_ATTEMPTS = len(BAD_OPTIONS) + 4
