"""The regression gate of `roofbench compare`: the interval's coverage, real repeats that must
never fail, planted slowdowns that must, and the cases it names instead of comparing (other
device, one side only, NaN times), with the command's exit codes."""

from __future__ import annotations

import copy
import json
import math
import random
import statistics
from fractions import Fraction
from math import comb
from pathlib import Path

import pytest
from roofbench.bench.cli import main
from roofbench.bench.results import load_run, save_run

from roofbench.gate import (
    Comparison,
    FailOn,
    classify,
    median_interval,
    median_rank,
    min_samples,
    ratio_interval,
)
from roofbench.schema import RunResult

ROOT = Path(__file__).resolve().parent.parent
# Every stored real run whose cases carry raw samples (CPU runs and the H200's first contact).
REAL = sorted(p for p in (ROOT / "results").rglob("results.json")
              if any(c.get("timing") for c in json.loads(p.read_text())["cases"]))
PER_SIDE = math.sqrt(0.95)


def _with_samples(run: RunResult, fn) -> RunResult:
    """A copy of ``run`` whose valid cases' samples are ``fn(key, samples)``."""
    out = copy.deepcopy(run)
    for c in out.cases:
        if c.timing is not None and c.valid:
            c.timing.samples = list(fn(c.key, list(c.timing.samples)))
            c.median_s = statistics.median(c.timing.samples)
    return out


def _halves(run: RunResult, seed: float | None) -> tuple[RunResult, RunResult]:
    """Two runs from one: each case's samples in two halves, interleaved (seed None) or
    shuffled by the seed first."""
    order: dict[str, list[float]] = {}

    def pick(key: str, s: list[float], first: bool) -> list[float]:
        if key not in order:
            order[key] = s[:]
            if seed is not None:
                random.Random(f"{seed}{key}").shuffle(order[key])
        return order[key][0::2] if first else order[key][1::2]

    return (_with_samples(run, lambda k, s: pick(k, s, True)),
            _with_samples(run, lambda k, s: pick(k, s, False)))


def test_real_runs_are_there():
    assert len(REAL) >= 6
    devices = {load_run(p).device for p in REAL}
    assert "NVIDIA H200" in devices and len(devices) >= 3


# -- the interval ---------------------------------------------------------------------------

@pytest.mark.parametrize("n", range(1, 80))
def test_median_rank_is_the_exact_binomial_rank(n):
    """[x_(k), x_(n+1-k)] misses the median with probability 2 P(Bin(n, 1/2) <= k-1): k is
    the largest rank whose interval still covers it with at least the confidence."""
    def miss(k: int) -> Fraction:
        return 2 * sum(Fraction(comb(n, j), 2 ** n) for j in range(k))

    k = median_rank(n, PER_SIDE)
    alpha = 1 - Fraction(PER_SIDE)
    if k == 0:
        assert miss(1) > alpha
    else:
        assert miss(k) <= alpha < miss(k + 1)
    assert (k == 0) == (n < min_samples())


def test_ratio_interval_covers_the_true_ratio():
    """Monte Carlo on bimodal, heavy-tailed samples (the H200's memory-bound shape): the ratio
    interval holds the true ratio of medians in at least 95% of trials, and a single run's
    interquartile range (the rule compare used before) would not."""
    rng = random.Random(7)

    def draw(n: int, scale: float) -> list[float]:
        out = []
        for _ in range(n):
            x = rng.gauss(1.0, 0.01) if rng.random() < 0.6 else rng.gauss(1.08, 0.01)
            if rng.random() < 0.03:
                x *= 1.5  # a rare slow outlier
            out.append(x * scale)
        return out

    big = sorted(draw(200_001, 1.0))
    true_median = big[len(big) // 2]
    true_ratio = (1.07 * true_median) / true_median
    trials, hits = 800, 0
    for _ in range(trials):
        iv = ratio_interval(draw(40, 1.0), draw(40, 1.07))
        assert iv.bounded
        hits += iv.lo <= true_ratio <= iv.hi
    assert hits / trials >= 0.95


def test_too_few_samples_have_no_interval():
    assert median_interval([1.0] * 6, PER_SIDE) is None
    assert median_interval([float(i) for i in range(7)], PER_SIDE) == (0.0, 6.0)
    assert not ratio_interval([1.0] * 6, [1.2] * 50).bounded


# -- real repeats never fail, planted slowdowns do ------------------------------------------

@pytest.mark.parametrize("path", REAL, ids=[p.parent.name for p in REAL])
def test_a_run_against_itself_is_same(path):
    run = load_run(path)
    cmp = classify(run, copy.deepcopy(run), 0.05, FailOn(slower=True, invalid=True))
    assert not cmp.failed
    judged = [v for v in cmp.cases if v.verdict != "not measured"]
    assert judged and all(v.verdict == "same" and v.ratio == 1.0 for v in judged)


@pytest.mark.parametrize("path", REAL, ids=[p.parent.name for p in REAL])
def test_resampled_repeats_never_fail(path):
    """Two repeats of a run drawn from its own raw samples (the interleaved halves, then 30
    random halves, seeded): same device, same code, same conditions. The gate never fails
    and never calls a case slower or faster (with per-case 95% intervals instead of
    simultaneous ones, one of these comparisons did fail)."""
    run = load_run(path)
    rng = random.Random(20)
    for seed in [None] + [rng.random() for _ in range(30)]:
        a, b = _halves(run, seed)
        cmp = classify(a, b, 0.05, FailOn(slower=True))
        assert cmp.failed == []
        assert {v.verdict for v in cmp.cases} <= {"same", "uncertain", "not measured"}


def _narrow(c, run: RunResult) -> bool:
    """Whether the median of ``c`` is known to +-4% at the per-case confidence of a
    comparison of ``run`` with itself (simultaneous over its sampled cases)."""
    m = sum(1 for x in run.cases if x.valid and x.timing)
    iv = median_interval(c.timing.samples, math.sqrt(1 - 0.05 / m))
    return iv is not None and (iv[1] - iv[0]) / 2 <= 0.04 * c.median_s


def test_planted_slowdown_of_one_case_fails_the_gate():
    """10% planted into one case of a real run (its samples x 1.10, every other case as it
    was): that case and only that one is `slower` and fails the gate at 5%, for every case
    whose median is known to +-4% at the comparison's per-case confidence (the gate's stated
    power); -10% is `faster`, and passes."""
    planted = 0
    for path in REAL:
        run = load_run(path)
        for c in run.cases:
            if not (c.valid and c.timing and _narrow(c, run)):
                continue
            slow = _with_samples(run, lambda k, s, key=c.key: [x * 1.10 for x in s]
                                 if k == key else s)
            cmp = classify(run, slow, 0.05, FailOn(slower=True))
            key = f"{c.backend}/{c.key}"
            assert cmp.failed == [key], (path, key)
            by = {v.key: v for v in cmp.cases}
            assert by[key].verdict == "slower" and by[key].ratio == pytest.approx(1.10)
            assert by[key].ratio_lo > 1.0
            fast = _with_samples(run, lambda k, s, key=c.key: [x / 1.10 for x in s]
                                 if k == key else s)
            cmp = classify(run, fast, 0.05, FailOn(slower=True))
            assert cmp.failed == [] and {v.key: v for v in cmp.cases}[key].verdict == "faster"
            planted += 1
    assert planted >= 70  # CPU and H200 cases alike (71 of 172 sampled cases in results/)


def test_planted_slowdown_in_resampled_halves_fails():
    """The H200's bimodal rownorm samples split in two halves, one slowed by 10%: the halves'
    own noise does not hide it."""
    path = next(p for p in REAL if p.parent.name == "rownorm-default")
    run = load_run(path)
    a = _with_samples(run, lambda k, s: s[0::2])
    b = _with_samples(run, lambda k, s: [x * 1.10 for x in s[1::2]]
                      if k.startswith("rownorm/fused") else s[1::2])
    cmp = classify(a, b, 0.05, FailOn(slower=True))
    assert cmp.failed == ["cuda/rownorm/fused/fp32/30720x4096"]


def test_slowdown_within_the_threshold_is_same():
    run = load_run(REAL[0])
    b = _with_samples(run, lambda k, s: [x * 1.03 for x in s])
    cmp = classify(run, b, 0.05, FailOn(slower=True))
    assert not cmp.failed
    assert {v.verdict for v in cmp.cases} <= {"same", "not measured"}


# -- what is named, not compared ------------------------------------------------------------

def test_other_device_and_one_sided_cases_are_named():
    run = load_run(REAL[0])
    other = copy.deepcopy(run)
    other.device = "Some Other CPU"
    cmp = classify(run, other, 0.05, FailOn(slower=True))
    assert {v.verdict for v in cmp.cases} == {"other device"}
    assert cmp.compared == 0 and "nothing compared" in cmp.notes[0]
    b = copy.deepcopy(run)
    gone = b.cases.pop(0)
    b.cases[0].workload = "renamed"
    cmp = classify(run, b, 0.05)
    by = {v.key: v.verdict for v in cmp.cases}
    assert by[f"{gone.backend}/{gone.key}"] == "only in A"
    assert by[f"{b.cases[0].backend}/{b.cases[0].key}"] == "only in B"


def test_nan_time_is_never_same():
    run = load_run(REAL[0])
    ok = [c for c in run.cases if c.valid and c.timing]
    b = copy.deepcopy(run)
    bc = [c for c in b.cases if c.valid and c.timing]
    bc[0].median_s = float("nan")
    bc[1].timing.samples[3] = float("nan")
    bc[2].timing.samples[0] = -1.0
    cmp = classify(run, b, 0.05, FailOn(slower=True))
    by = {v.key: v for v in cmp.cases}
    for c in ok[:3]:
        v = by[f"{c.backend}/{c.key}"]
        assert v.verdict == "unreadable" and v.reason.startswith("B: "), v
    assert "nan" in by[f"{ok[0].backend}/{ok[0].key}"].reason


def test_threshold_must_be_finite_and_not_negative():
    run = load_run(REAL[0])
    for bad in (float("nan"), -0.01, float("inf")):
        with pytest.raises(ValueError, match="finite number >= 0"):
            classify(run, run, bad)


# -- the command ----------------------------------------------------------------------------

def _save(run: RunResult, folder: Path) -> Path:
    save_run(run, folder)
    return folder


@pytest.fixture(scope="module")
def cpu_pair(tmp_path_factory):
    """A real CPU run, the same run with one case 10% slower, and the same on another device."""
    tmp = tmp_path_factory.mktemp("gate")
    path = next(p for p in REAL if load_run(p).backend == "cpu"
                and sum(c.valid and c.timing is not None and _narrow(c, load_run(p))
                                   for c in load_run(p).cases) >= 3)
    run = load_run(path)
    victim = next(c for c in run.cases if c.valid and c.timing and _narrow(c, run))
    slow = _with_samples(run, lambda k, s: [x * 1.1 for x in s] if k == victim.key else s)
    other = copy.deepcopy(run)
    other.device = "Another CPU"
    disjoint = copy.deepcopy(run)
    for c in disjoint.cases:
        c.workload = "elsewhere"
    return {"a": _save(run, tmp / "a"), "slow": _save(slow, tmp / "slow"),
            "other": _save(other, tmp / "other"), "disjoint": _save(disjoint, tmp / "disj"),
            "victim": f"{victim.backend}/{victim.key}", "tmp": tmp}


def _cli(args: list[str], capsys) -> tuple[int, str, str]:
    try:
        rc = main(args)
    except SystemExit as e:
        rc = int(e.code)
    out, err = capsys.readouterr()
    return rc, out, err


def test_cli_gate_passes_repeats_and_fails_planted(cpu_pair, capsys):
    out = cpu_pair["tmp"] / "cmp-same"
    rc, text, _ = _cli(["compare", str(cpu_pair["a"]), str(cpu_pair["a"]), "--fail-on",
                        "slower:5%", "--out", str(out)], capsys)
    assert rc == 0 and "gate failed" not in text
    cmp = Comparison.from_dict(json.loads(out.with_suffix(".json").read_text()))
    assert cmp.failed == [] and cmp.fail_on == ["slower:5%"] and cmp.threshold == 0.05
    assert out.with_suffix(".png").exists() and out.with_suffix(".html").exists()

    out = cpu_pair["tmp"] / "cmp-slow"
    rc, text, _ = _cli(["compare", str(cpu_pair["a"]), str(cpu_pair["slow"]), "--fail-on",
                        "slower:5%", "--out", str(out)], capsys)
    assert rc == 1 and f"gate failed (slower:5%): {cpu_pair['victim']}" in text
    d = json.loads(out.with_suffix(".json").read_text())
    assert d["failed"] == [cpu_pair["victim"]] and d["counts"]["slower"] == 1
    assert Comparison.from_dict(d).to_dict() == d
    # a 20% threshold lets the 10% through; so does a compare without a gate
    rc, _, _ = _cli(["compare", str(cpu_pair["a"]), str(cpu_pair["slow"]), "--fail-on",
                     "slower:20%", "--out", str(out)], capsys)
    assert rc == 0
    rc, text, _ = _cli(["compare", str(cpu_pair["a"]), str(cpu_pair["slow"]), "--out",
                        str(out)], capsys)
    assert rc == 0 and "slower" in text


def test_cli_other_device_and_no_common_case(cpu_pair, capsys):
    out = str(cpu_pair["tmp"] / "cmp-dev")
    for b, needle in (("other", "nothing compared: A ran on"),
                      ("disjoint", "nothing compared: the runs have no case in common")):
        rc, text, err = _cli(["compare", str(cpu_pair["a"]), str(cpu_pair[b]), "--out", out],
                             capsys)
        assert rc == 0 and f"note: {needle}" in text  # a plot of both is still a use
        rc, text, err = _cli(["compare", str(cpu_pair["a"]), str(cpu_pair[b]), "--fail-on",
                              "slower:5%", "--out", out], capsys)
        assert rc == 2 and err.count("\n") == 1 and needle in err and "Traceback" not in err
        assert Path(out).with_suffix(".json").exists()


def test_cli_invalid_in_b(cpu_pair, capsys):
    run = load_run(cpu_pair["a"])
    broken = copy.deepcopy(run)
    c = next(c for c in broken.cases if c.valid)
    c.valid, c.status, c.error = False, "invalid", "validation failed: planted"
    b = _save(broken, cpu_pair["tmp"] / "broken")
    out = str(cpu_pair["tmp"] / "cmp-inv")
    rc, text, _ = _cli(["compare", str(cpu_pair["a"]), str(b), "--fail-on", "slower:5%",
                        "--out", out], capsys)
    assert rc == 0 and "invalid in B" in text
    for gate in (["--fail-on", "slower:5%,invalid"], ["--fail-on-regression"]):
        rc, text, _ = _cli(["compare", str(cpu_pair["a"]), str(b), *gate, "--out", out], capsys)
        assert rc == 1 and f"{c.backend}/{c.key}" in text


def test_cli_nan_time_is_named(cpu_pair, capsys):
    """A results file whose case times are NaN (edited, as a hostile file would be)."""
    d = json.loads((cpu_pair["a"] / "results.json").read_text())
    c = next(c for c in load_run(cpu_pair["a"]).cases if c.valid and c.timing)
    raw = next(x for x in d["cases"] if x["workload"] == c.workload and
               x["variant"] == c.variant and x["dtype"] == c.dtype and x["size"] == c.size)
    raw["median_s"] = float("nan")
    raw["timing"]["samples_s"] = [float("nan")] * len(raw["timing"]["samples_s"])
    b = cpu_pair["tmp"] / "nan"
    b.mkdir()
    (b / "results.json").write_text(json.dumps(d))
    out = cpu_pair["tmp"] / "cmp-nan"
    rc, text, _ = _cli(["compare", str(cpu_pair["a"]), str(b), "--fail-on", "slower:5%",
                        "--out", str(out)], capsys)
    assert rc == 0 and "nanx" not in text and "unreadable" in text
    v = {v.key: v for v in Comparison.from_dict(json.loads(out.with_suffix(".json")
                                                           .read_text())).cases}
    assert v[f"{c.backend}/{c.key}"].verdict == "unreadable"


@pytest.mark.parametrize("flags,needle", [
    (["--threshold", "nan"], "must be a finite number >= 0"),
    (["--threshold", "-1"], "must be a finite number >= 0"),
    (["--threshold", "inf"], "must be a finite number >= 0"),
    (["--threshold", "abc"], "not a number or a percentage"),
    (["--fail-on", "slower:nan%"], "must be a finite number >= 0"),
    (["--fail-on", "slower:-1%"], "must be a finite number >= 0"),
    (["--fail-on", "slower:5"], "as a percentage"),
    (["--fail-on", "faster:5%"], "unknown gate"),
    (["--fail-on", "slower:5%", "--threshold", "0.1"], "two thresholds given"),
])
def test_cli_refuses_bad_thresholds(cpu_pair, capsys, flags, needle):
    rc, _, err = _cli(["compare", str(cpu_pair["a"]), str(cpu_pair["a"]), *flags, "--out",
                       str(cpu_pair["tmp"] / "never")], capsys)
    assert rc == 2 and needle in err and err.count("\n") == 1
    assert not (cpu_pair["tmp"] / "never.json").exists()


def test_cli_threshold_as_percentage_agrees(cpu_pair, capsys):
    out = cpu_pair["tmp"] / "cmp-pct"
    rc, _, _ = _cli(["compare", str(cpu_pair["a"]), str(cpu_pair["slow"]), "--threshold", "5%",
                     "--fail-on", "slower:5%", "--out", str(out)], capsys)
    assert rc == 1
    assert json.loads(out.with_suffix(".json").read_text())["threshold"] == 0.05
