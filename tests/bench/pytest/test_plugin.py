"""The pytest plugin through pytest's own `pytester`, in fresh pytest processes that find it
by its entry point alone: the `roofline` fixture, `--roofline-out`, and pytest-benchmark's
extra_info and JSON when that plugin is active (and when it is not)."""

from __future__ import annotations

import json
from importlib.metadata import entry_points
from pathlib import Path

import pytest
from patience import patience
from pytester_suite import inner_suite
from roof_sets import TEST_CPU
from roofbench.bench.backends.cpu import cpu_model
from roofbench.bench.results import load_run

from roofbench.pytest_benchmark import read_pytest_benchmark

pytest_plugins = ["pytester"]

TESTS = '''
import numpy as np
import pytest

N = 1 << 16


@pytest.mark.parametrize("dtype", [np.float32, np.float64], ids=["fp32", "fp64"])
def test_add(roofline, dtype):
    a, b = np.full(N, 0.5, dtype), np.full(N, 0.25, dtype)
    c = np.empty_like(a)
    rec = roofline(np.add, a, b, c, flops=N, reads=[a, b], writes=c,
                   reference=np.full(N, 0.75), output=c)
    assert rec.valid and rec.roofline.efficiency > 0 and rec.roofline.bound == "memory"


def test_wrong(roofline):
    a = np.ones(N, np.float32)
    c = np.empty_like(a)
    roofline(np.multiply, a, a, c, flops=N, reads=[a, a], writes=c,
             reference=np.full(N, 2.0), output=c)


def test_plain():
    assert True
'''

ROOFS = {**TEST_CPU, "device": cpu_model()}  # dram, fp32 and fp64 roofs


@pytest.fixture
def suite(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> pytest.Pytester:
    return inner_suite(pytester, monkeypatch, ROOFS, test_kernels=TESTS)


def _run(p: pytest.Pytester, *args: str) -> pytest.RunResult:
    return p.runpytest_subprocess("-p", "no:cacheprovider", "--roofline-quick",
                                  "--roofline-roofs", str(p.path / "roofs.json"), *args,
                                  timeout=patience(600))


def test_installing_roofbench_registers_the_plugin():
    eps = {e.name: e.value for e in entry_points(group="pytest11")}
    assert eps.get("roofbench") == "roofbench.bench.pytest.plugin"


def test_roofline_out_without_pytest_benchmark(suite):
    r = _run(suite, "-p", "no:benchmark", "--roofline-out", "out")
    r.assert_outcomes(passed=3, failed=1)
    r.stdout.fnmatch_lines(["*test_wrong*relative error*> tolerance*",
                            "*= roofline =*",
                            f"*2 case(s) on the roofline of {cpu_model()}: out/results.json*"])
    out = suite.path / "out"
    for f in ("results.json", "results.csv", "report.md", "report.html", "roofline.png"):
        assert (out / f).stat().st_size > 0, f
    run = load_run(out)
    assert [(c.key, c.outcome.status) for c in run.cases] == [
        ("test_add/fp32/fp32/65536", "ok"), ("test_add/fp64/fp64/65536", "ok"),
        ("test_wrong/default/fp32/65536", "invalid")]
    assert run.cases[0].roofline.attainable == pytest.approx(2e10 / 12)
    assert run.cases[0].measurement.timing.config["budget_s"] == 0.3  # --roofline-quick
    assert run.command[0] == "pytest" and "--roofline-out" in run.command
    assert "test_add" in (out / "report.md").read_text()


def test_with_pytest_benchmark_counts_go_into_extra_info(suite):
    r = _run(suite, "--benchmark-json", "bench.json", "--roofline-out", "out")
    r.assert_outcomes(passed=3, failed=1)
    r.stdout.fnmatch_lines(["*benchmark*", "*test_add*fp32*"])
    d = json.loads((suite.path / "bench.json").read_text())
    entries = {e["name"]: e for e in d["benchmarks"]}
    assert set(entries) == {"test_add[fp32]", "test_add[fp64]"}  # the invalid one is never
    e = entries["test_add[fp32]"]["extra_info"]
    assert e["flops"] == 1 << 16 and e["bytes"] == {"dram": 12 << 16}
    assert e["dtype"] == "fp32" and e["device"] == cpu_model() and e["valid"] is True
    assert isinstance(e["outside_load"], str)  # the load while pytest-benchmark timed it
    assert d["roofbench"]["device"] == cpu_model()
    assert d["roofbench"]["roofs"]["roofs"][0]["value"] == 2e10
    run = read_pytest_benchmark(d)
    assert [c.key for c in run.cases] == ["test_add/fp32/fp32/65536", "test_add/fp64/fp64/65536"]
    assert all(c.measurement.timing.n == entries[f"test_add[{c.identity.dtype}]"]["stats"]["rounds"]
               for c in run.cases)  # pytest-benchmark's own samples
    assert run.cases[0].roofline.attainable == pytest.approx(2e10 / 12)
    # roofbench timed it too, with its own timer, into --roofline-out
    ours = load_run(suite.path / "out")
    assert ours.cases[0].measurement.timing.config["target_cv"] == 0.02


def test_without_roofline_out_nothing_is_written(suite):
    r = _run(suite, "-p", "no:benchmark")
    r.assert_outcomes(passed=3, failed=1)
    r.stdout.fnmatch_lines(["*= roofline =*", "*test_add/fp64/fp64/65536: ok*"])
    assert not [p for p in Path(suite.path).rglob("results.json")]


def test_plugin_is_inert_when_unused(pytester):
    pytester.makepyfile(test_other="def test_x():\n    assert 1\n")
    r = pytester.runpytest_subprocess("-p", "no:cacheprovider", timeout=patience(300))
    r.assert_outcomes(passed=1)
    assert "roofline" not in r.stdout.str()


COPY = """
import numpy as np


def test_copy(roofline):
    src = np.arange(1 << 16, dtype=np.float32)
    dst = np.zeros_like(src)
    rec = roofline(np.copyto, dst, src, flops=0, reads=src, writes=dst, output=dst,
                   reference=lambda dst, src: src)
    assert rec.valid and rec.roofline.bound == "memory" and rec.roofline.attainable is None
    bps = rec.declaration.bytes["dram"] / rec.measurement.median_s
    assert abs(rec.roofline.efficiency - bps / 2e10) < 1e-9
"""


def test_a_copy_of_0_flops_is_placed_by_bandwidth_through_the_fixture(pytester, monkeypatch):
    inner_suite(pytester, monkeypatch, ROOFS, test_copy=COPY)
    r = _run(pytester, "-p", "no:benchmark", "--roofline-out", "out")
    r.assert_outcomes(passed=1)
    r.stdout.fnmatch_lines(["*test_copy/default/fp32/65536: ok, *% of dram (0 FLOPs: its "
                            "bytes/s over the memory roof)*"])
    out = pytester.path / "out"
    for f in ("results.json", "report.md", "report.html", "roofline.png"):
        assert (out / f).stat().st_size > 0, f
    (case,) = load_run(out).cases
    assert case.declaration.flops == 0 and case.valid and case.roofline.limiting_roof == "dram"
    assert case.roofline.efficiency == pytest.approx(
        case.declaration.bytes["dram"] / case.measurement.median_s / 2e10
    )


def test_a_pytest_benchmark_entry_of_0_flops_is_read_and_placed_by_bandwidth():
    """The fixture hands pytest-benchmark a copy's counts (flops 0): `roofbench report`
    reads that JSON and places the entry as measure() did, by bandwidth."""
    fixture = Path(__file__).parents[2] / "fixtures" / "pytest-benchmark"
    d = json.loads((fixture / "numpy-benchmark-json.json").read_text())
    d["benchmarks"][0]["extra_info"]["flops"] = 0
    run = read_pytest_benchmark(d)
    copy = run.cases[0]
    dram = run.roofs.memory("dram")
    assert (
        copy.declaration.flops == 0
        and copy.roofline.bound == "memory"
        and copy.roofline.attainable is None
    )
    assert copy.roofline.limiting_roof == dram.name
    assert copy.roofline.efficiency == pytest.approx(
        copy.declaration.bytes["dram"] / copy.measurement.median_s / dram.value
    )
    assert run.cases[1].roofline.efficiency == pytest.approx(run.cases[1].roofline.flop_per_s
                                                    / run.cases[1].roofline.attainable)
