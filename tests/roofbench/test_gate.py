"""The regression gate of `roofbench compare`: the interval's coverage, real repeats that must
never fail, planted slowdowns that must, and the cases it names instead of comparing (other
device, one side only, NaN times). The command: tests/bench/cli/test_compare.py."""

from __future__ import annotations

import copy
import random
import statistics
from fractions import Fraction
from math import comb

import pytest
from real_samples import PER_SIDE, REAL, halves, narrow, with_samples
from roofbench.bench.results import load_run

from roofbench.gate import (
    FailOn,
    RatioInterval,
    classify,
    judge,
    median_interval,
    median_rank,
    min_samples,
    ratio_interval,
)
from roofbench.gate_load import load_share


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

def inside(v, t=0.05) -> bool:
    """Whether the case's interval lies within the threshold (what `same` requires)."""
    return (v.ratio_lo is not None and v.ratio_hi is not None
            and 1 / (1 + t) <= v.ratio_lo and v.ratio_hi <= 1 + t)


@pytest.mark.parametrize("path", REAL, ids=[p.parent.name for p in REAL])
def test_a_run_against_itself_is_same_or_says_why_not(path):
    run = load_run(path)
    cmp = classify(run, copy.deepcopy(run), 0.05, FailOn(slower=True, invalid=True))
    assert not cmp.failed
    judged = [v for v in cmp.cases if v.verdict != "not measured"]
    assert judged and all(v.ratio == 1.0 for v in judged)
    # `same` only where the interval excludes a change beyond 5%: a case with too few samples
    # for an interval, or samples spread wider than the threshold, is `uncertain` even at
    # ratio 1, its reason saying which (the median alone bounds no change)
    for v in judged:
        if v.ratio_lo is None:
            assert v.verdict == "uncertain" and "no interval" in v.reason, v
        elif inside(v):
            assert v.verdict == "same" and v.reason == "", v
        else:
            assert v.verdict == "uncertain" and "wider than the threshold" in v.reason, v


@pytest.mark.parametrize("path", REAL, ids=[p.parent.name for p in REAL])
def test_resampled_repeats_never_fail(path):
    """Two repeats of a run drawn from its own raw samples (the interleaved halves, then 30
    random halves, seeded): same device, same code, same conditions. The gate never fails
    and never calls a case slower or faster (with per-case 95% intervals instead of
    simultaneous ones, one of these comparisons did fail)."""
    run = load_run(path)
    rng = random.Random(20)
    for seed in [None] + [rng.random() for _ in range(30)]:
        a, b = halves(run, seed)
        cmp = classify(a, b, 0.05, FailOn(slower=True))
        assert cmp.failed == []
        assert {v.verdict for v in cmp.cases} <= {"same", "uncertain", "not measured"}


def test_resampling_leaves_the_real_run_as_it_was():
    """with_samples copies only what it changes (a deep copy of every run per call was most of
    this file's time): the run it read keeps its samples and medians, case for case."""
    run = load_run(REAL[0])
    before = [(c.measurement.median_s, list(c.measurement.timing.samples))
              for c in run.cases if c.measurement.timing is not None]
    slow = with_samples(run, lambda k, s: [x * 2 for x in s])
    after = [(c.measurement.median_s, list(c.measurement.timing.samples))
             for c in run.cases if c.measurement.timing is not None]
    assert after == before
    changed = [(a, b) for a, b in zip(run.cases, slow.cases, strict=True) if a.valid
               and a.measurement.timing is not None]
    assert changed and all(b.measurement.median_s == pytest.approx(
        2 * statistics.median(a.measurement.timing.samples)) for a, b in changed)
    assert slow.cases is not run.cases and all(
        a is not b for a, b in zip(run.cases, slow.cases, strict=True))


def test_planted_slowdown_of_one_case_fails_the_gate():
    """10% planted into one case of a real run (its samples x 1.10, every other case as it
    was): that case and only that one is `slower` and fails the gate at 5%, for every case
    whose median is known to +-4% at the comparison's per-case confidence (the gate's stated
    power); -10% is `faster`, and passes."""
    planted = 0
    for path in REAL:
        run = load_run(path)
        for c in run.cases:
            if not (c.valid and c.measurement.timing and narrow(c, run)):
                continue  # (the same load on both sides explains no slowdown: judged too)
            slow = with_samples(run, lambda k, s, key=c.key: [x * 1.10 for x in s]
                                 if k == key else s)
            cmp = classify(run, slow, 0.05, FailOn(slower=True))
            key = f"{c.identity.backend}/{c.key}"
            assert cmp.failed == [key], (path, key)
            by = {v.key: v for v in cmp.cases}
            assert by[key].verdict == "slower" and by[key].ratio == pytest.approx(1.10)
            assert by[key].ratio_lo > 1.0
            fast = with_samples(run, lambda k, s, key=c.key: [x / 1.10 for x in s]
                                 if k == key else s)
            cmp = classify(run, fast, 0.05, FailOn(slower=True))
            assert cmp.failed == [] and {v.key: v for v in cmp.cases}[key].verdict == "faster"
            planted += 1
    # CPU and H200 cases alike: 71 of the sampled cases in results/ are narrow enough
    assert planted >= 71


def test_a_slowdown_under_outside_load_is_bounded_by_it():
    """A real CPU case whose samples carry their load (other processes' share of the cores):
    20% slower in B with B's load raised to 90% is `uncertain`, named with the load and the
    bound it allows (x(1-f_A)/(1-f_B)), and does not fail the gate; with the same load on both
    sides the load explains nothing, and the slowdown fails the gate beside the load's name.
    Synthetic loads, both directions: tests/roofbench/test_gate_load.py."""
    path = next(
        p
        for p in REAL
        if any(
            c.measurement.timing and load_share(c.measurement.timing.outside_load)
            for c in load_run(p).cases
        )
    )
    run = load_run(path)
    c = next(c for c in run.cases if c.valid and c.measurement.timing and narrow(c, run)
             and load_share(c.measurement.timing.outside_load) < 0.8) if any(
        c.valid and c.measurement.timing and narrow(c, run) for c in run.cases) else None
    if c is None:
        pytest.skip("no narrow case in the loaded run")
    slow = with_samples(run, lambda k, s: [x * 1.20 for x in s] if k == c.key else s)
    key = f"{c.identity.backend}/{c.key}"
    heavy = "other processes used 90% of the 2 cores (load average 9.0)"
    next(x for x in slow.cases if x.key == c.key).measurement.timing.outside_load = heavy
    cmp = classify(run, slow, 0.05, FailOn(slower=True))
    v = {v.key: v for v in cmp.cases}[key]
    assert cmp.failed == [] and v.verdict == "uncertain"
    assert "slower by 20%" in v.reason and heavy in v.reason and "up to x" in v.reason
    for r in (run, slow):  # the same load on both sides explains nothing
        next(x for x in r.cases if x.key == c.key).measurement.timing.outside_load = heavy
    cmp = classify(run, slow, 0.05, FailOn(slower=True))
    v = {v.key: v for v in cmp.cases}[key]
    assert cmp.failed == [key] and heavy in v.reason and "beyond what" in v.reason


def test_planted_slowdown_in_resampled_halves_fails():
    """The H200's bimodal rownorm samples split in two halves, one slowed by 10%: the halves'
    own noise does not hide it."""
    path = next(p for p in REAL if p.parent.name == "rownorm-default")
    run = load_run(path)
    a = with_samples(run, lambda k, s: s[0::2])
    b = with_samples(run, lambda k, s: [x * 1.10 for x in s[1::2]]
                      if k.startswith("rownorm/fused") else s[1::2])
    cmp = classify(a, b, 0.05, FailOn(slower=True))
    assert cmp.failed == ["cuda/rownorm/fused/fp32/30720x4096"]


def test_slowdown_within_the_threshold_is_never_slower():
    run = load_run(REAL[0])
    b = with_samples(run, lambda k, s: [x * 1.03 for x in s])
    cmp = classify(run, b, 0.05, FailOn(slower=True))
    assert not cmp.failed
    assert {v.verdict for v in cmp.cases} <= {"same", "uncertain", "not measured"}
    # `same` exactly where the 3% slowdown's interval still excludes 5%; the rest `uncertain`
    timed = [v for v in cmp.cases if v.verdict != "not measured"]
    assert all((v.verdict == "same") == inside(v) for v in timed)
    assert any(v.verdict == "same" for v in timed)


def test_one_sample_a_side_of_identical_times_is_uncertain():
    """One sample a side bounds nothing: identical times must not read `same` on the median
    alone (judge() once returned `same` before asking for an interval)."""
    run = load_run(REAL[0])
    one = with_samples(run, lambda k, s: [1e-3])
    cmp = classify(one, copy.deepcopy(one), 0.05, FailOn(slower=True))
    timed = [v for v in cmp.cases if v.verdict != "not measured"]
    assert timed and all(v.verdict == "uncertain" and v.ratio == 1.0 and v.ratio_lo is None
                         and "no interval" in v.reason for v in timed), timed
    assert cmp.judged_line().startswith(f"judged 0 of {len(timed)} cases")
    assert classify(one, copy.deepcopy(one), 0.05, FailOn(uncertain=True)).failed
    assert judge(RatioInterval(1.0, None, None), 0.05) == "uncertain"
    assert judge(RatioInterval(1.0, 0.99, 1.01), 0.05) == "same"


def test_a_median_within_the_threshold_with_a_wider_interval_is_uncertain():
    """`same` needs the interval inside the threshold, not the median: one side's run
    stretched up to 1.6x at random moves the median under 5% but leaves a change beyond it
    not excluded, so the case is `uncertain`, its reason naming the interval; `--fail-on
    uncertain` fails it (a gate that passed on the median alone passed a planted 1.5x as
    `same` 0.989 [0.611, 2.606] between two sessions under load)."""
    run = load_run(REAL[0])
    rng = random.Random(3)
    wide = with_samples(run, lambda k, s: [x * (1.0 + 0.6 * rng.random() ** 4) for x in s])
    cmp = classify(run, wide, 0.05, FailOn(slower=True, uncertain=True))
    said = [v for v in cmp.cases if v.ratio is not None and 1 / 1.05 <= v.ratio <= 1.05
            and v.ratio_hi is not None and v.ratio_hi > 1.05]
    assert said, [(v.verdict, v.ratio, v.ratio_lo, v.ratio_hi) for v in cmp.cases]
    for v in said:
        assert v.verdict == "uncertain", v
        assert "is wider than the threshold" in v.reason and "not excluded" in v.reason
        assert v.key in cmp.failed
    assert judge(RatioInterval(0.989, 0.611, 2.606), 0.05) == "uncertain"
    assert judge(RatioInterval(1.0, 0.96, 1.04), 0.05) == "same"
    assert judge(RatioInterval(1.0, 0.94, 1.04), 0.05) == "uncertain"  # faster not excluded


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
    b.cases[0].identity.workload = "renamed"
    cmp = classify(run, b, 0.05)
    by = {v.key: v.verdict for v in cmp.cases}
    assert by[f"{gone.identity.backend}/{gone.key}"] == "only in A"
    assert by[f"{b.cases[0].identity.backend}/{b.cases[0].key}"] == "only in B"


def test_nan_time_is_never_same():
    run = load_run(REAL[0])
    ok = [c for c in run.cases if c.valid and c.measurement.timing]
    b = copy.deepcopy(run)
    bc = [c for c in b.cases if c.valid and c.measurement.timing]
    bc[0].measurement.median_s = float("nan")
    bc[1].measurement.timing.samples[3] = float("nan")
    bc[2].measurement.timing.samples[0] = -1.0
    cmp = classify(run, b, 0.05, FailOn(slower=True))
    by = {v.key: v for v in cmp.cases}
    for c in ok[:3]:
        v = by[f"{c.identity.backend}/{c.key}"]
        assert v.verdict == "unreadable" and v.reason.startswith("B: "), v
    assert "nan" in by[f"{ok[0].identity.backend}/{ok[0].key}"].reason


def test_threshold_must_be_finite_and_not_negative():
    run = load_run(REAL[0])
    for bad in (float("nan"), -0.01, float("inf")):
        with pytest.raises(ValueError, match="finite number >= 0"):
            classify(run, run, bad)
