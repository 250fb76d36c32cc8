"""The ``roofline_ab`` fixture end to end, through pytest's own `pytester` in a fresh pytest
process that finds the plugin by its entry point: a test measures a function against a
planted slowdown (four times the work) alternately, gets the paired verdict, and
`roofbench compare DIR/ab` fails the gate on that case alone."""

from __future__ import annotations

import json

import pytest
from roofbench.bench.backends.cpu import cpu_model
from roofbench.bench.cli import main
from roofbench.bench.results import load_run

from roofbench.gate import Comparison, paired_runs

pytest_plugins = ["pytester"]

TESTS = '''
import numpy as np

N = 1 << 16


def add(a, b, c):
    np.add(a, b, out=c)


def add4(a, b, c):  # the planted slowdown: the same result, four times the work
    for _ in range(4):
        np.add(a, b, out=c)


def arrays():
    a, b = np.full(N, 0.5, np.float32), np.full(N, 0.25, np.float32)
    return a, b, np.empty_like(a)


def test_slowed(roofline_ab):
    a, b, c = arrays()
    res = roofline_ab(add, add4, a, b, c, flops=N, reads=[a, b], writes=c,
                      reference=np.full(N, 0.75), output=c, threshold=0.5)
    assert res.verdict.paired and res.verdict.verdict == "slower", res.verdict


def test_unchanged(roofline_ab):
    a, b, c = arrays()
    res = roofline_ab(add, add, a, b, c, flops=N, reads=[a, b], writes=c, threshold=0.5)
    assert res.verdict.verdict == "same", res.verdict


def test_broken(roofline_ab):
    a, b, c = arrays()
    roofline_ab(add, np.multiply, a, b, c, flops=N, reads=[a, b], writes=c,
                reference=np.full(N, 0.75), output=c)
'''

ROOFS = {"device": cpu_model(), "roofs": [
    {"name": "dram", "kind": "memory", "level": "dram", "value": 2e10, "source": "measured"},
    {"name": "fp32", "kind": "compute", "precision": "fp32", "value": 2e11,
     "source": "measured"}]}


def test_roofline_ab_end_to_end(pytester: pytest.Pytester, monkeypatch, capsys):
    for k in ("PYTEST_XDIST_WORKER", "PYTEST_XDIST_WORKER_COUNT", "PYTEST_XDIST_TESTRUNUID"):
        monkeypatch.delenv(k, raising=False)
    pytester.makepyfile(test_ab_kernels=TESTS)
    (pytester.path / "roofs.json").write_text(json.dumps(ROOFS))
    r = pytester.runpytest_subprocess("-p", "no:cacheprovider", "-p", "no:benchmark",
                                      "--roofline-quick", "--roofline-roofs",
                                      str(pytester.path / "roofs.json"),
                                      "--roofline-out", "out", timeout=600)
    r.assert_outcomes(passed=2, failed=1)
    r.stdout.fnmatch_lines(["*test_broken/default/fp32/65536 (new): validation failed*"])
    ab = pytester.path / "out" / "ab"
    ra, rb = load_run(ab / "a"), load_run(ab / "b")
    assert paired_runs(ra, rb)
    assert [c.key for c in rb.cases] == ["test_slowed/default/fp32/65536",
                                        "test_unchanged/default/fp32/65536",
                                        "test_broken/default/fp32/65536"]
    assert (ab / "a" / "report.md").exists()
    out = pytester.path / "cmp"
    rc = main(["compare", str(ab), "--fail-on", "slower:50%,invalid", "--out", str(out)])
    text = capsys.readouterr().out
    assert rc == 1 and "A/B pairs" in text
    cmp = Comparison.from_dict(json.loads(out.with_suffix(".json").read_text()))
    assert cmp.failed == ["cpu/test_slowed/default/fp32/65536",
                          "cpu/test_broken/default/fp32/65536"]
    by = {v.key: v for v in cmp.cases}
    assert by["cpu/test_slowed/default/fp32/65536"].paired
    assert by["cpu/test_unchanged/default/fp32/65536"].verdict == "same"
    assert by["cpu/test_broken/default/fp32/65536"].verdict == "invalid in B"
