"""The gate never passes in silence and reads a large run in O(n log n) (issue 57): the
count of judged cases and why the rest were not, `--fail-on uncertain`, an unreadable B that
fails any gate, the ABBA blocks that cancel an order bias, and median_rank's work on 10^6
samples (it walked n/2 steps in n-bit integers: 317 s for one comparison)."""

from __future__ import annotations

import json
import math
import random

import pytest
from real_samples import REAL
from roofbench.bench.results import load_run

from roofbench import gate
from roofbench.gate import (
    EXACT_UP_TO,
    CaseVerdict,
    Comparison,
    FailOn,
    RunRef,
    classify,
    median_rank,
    paired_interval,
)
from roofbench.gate_load import block_ratios

REF = RunRef("a", "cpu", "cpu", "", None)


def _cmp(*verdicts: CaseVerdict) -> Comparison:
    return Comparison(REF, REF, 0.05, list(verdicts))


def test_judged_line_counts_and_says_why_when_most_are_not_judged():
    same = CaseVerdict("s", "same", ratio=1.0)
    unsure = CaseVerdict("u", "uncertain", ratio=1.3)  # no interval: too few samples
    assert _cmp(same, same, unsure).judged_line() == "judged 2 of 3 cases"
    line = _cmp(same, unsure, unsure, CaseVerdict("x", "unreadable", side="B")).judged_line()
    assert line.startswith("judged 1 of 4 cases (2 uncertain, 2 of them without an interval: "
                           "too few samples, 1 unreadable): the runs are too noisy or too "
                           "short; rerun with `roofbench ab`")
    paired = CaseVerdict("p", "uncertain", ratio=1.3, ratio_lo=0.9, ratio_hi=1.6, paired=True)
    assert "the pairs are too noisy or too few" in _cmp(paired).judged_line()
    assert _cmp(CaseVerdict("o", "only in A")).judged_line() == "judged 0 of 0 cases"


def test_judged_line_counts_a_median_within_the_threshold_with_a_wider_interval():
    """A case whose median is within the threshold but whose interval reaches past it (a
    planted 1.5x read 0.989 [0.611, 2.606] in a loaded smoke check) is `uncertain`, and the
    last line says how many such cases there were and why they were not judged."""
    wide = CaseVerdict("w", "uncertain", ratio=0.989, ratio_lo=0.611, ratio_hi=2.606)
    narrow = CaseVerdict("n", "same", ratio=1.0, ratio_lo=0.97, ratio_hi=1.03)
    assert _cmp(narrow).judged_line() == "judged 1 of 1 cases"
    assert _cmp(narrow, narrow, wide).judged_line() == "judged 2 of 3 cases"
    unsure = CaseVerdict("u", "uncertain", ratio=1.3)
    assert _cmp(wide, unsure, narrow).judged_line() == (
        "judged 1 of 3 cases (2 uncertain, 1 of them without an interval: too few samples, "
        "1 of them with the median within 5% but an "
        "interval wider than that: a larger change is not excluded): the runs are too noisy "
        "or too short; rerun with `roofbench ab` (base and new alternately, in one job)")


def test_fail_on_uncertain_and_an_unreadable_b_under_any_gate():
    unsure = CaseVerdict("u", "uncertain")
    bad_b, bad_a = CaseVerdict("b", "unreadable", side="B"), CaseVerdict("a", "unreadable",
                                                                         side="A")
    assert FailOn(uncertain=True).fails(unsure) and not FailOn(slower=True).fails(unsure)
    assert FailOn(slower=True).fails(bad_b) and FailOn(invalid=True).fails(bad_b)
    assert not FailOn().fails(bad_b)  # no gate asked: named, not failed
    assert not FailOn(slower=True).fails(bad_a) and FailOn(uncertain=True).fails(bad_a)
    assert FailOn(slower=True, uncertain=True).describe(0.05) == ["slower:5%", "uncertain"]


def test_block_ratios_cancel_a_gain_of_the_second_run():
    """Pairs A B, B A, ... where the second of each pair runs 10% faster, identical code: each
    pair's ratio is 0.9 or 1.11, so their median is either, by the parity of the count (an
    odd count judged `faster` at 0.9); the ABBA blocks' ratio is 1 exactly."""
    rng = random.Random(5)
    a, b = [], []
    for i in range(25):
        x, y = 1.0 + rng.gauss(0, 0.002), 1.0 + rng.gauss(0, 0.002)
        first_a = i % 2 == 0
        a.append(x * (1.0 if first_a else 0.9))
        b.append(y * (0.9 if first_a else 1.0))
    pairs = sorted(y / x for x, y in zip(a, b, strict=True))
    assert pairs[12] < 0.92  # the old statistic: the median pair of 25, biased
    assert len(block_ratios(a, b)) == 12  # the 25th pair has no partner
    iv = paired_interval(a, b, 0.95)
    assert abs(iv.ratio - 1.0) < 0.005 and iv.lo is not None and iv.lo < 1.0 < iv.hi
    assert gate.judge(iv, 0.05) == "same"


@pytest.mark.parametrize("n", [EXACT_UP_TO + 1, 2500, 4099])
def test_median_rank_beyond_the_exact_walk_agrees_with_it(n):
    def exact(c: float) -> int:
        alpha, total, term, cdf, k = (1 - c) / 2, 1 << n, 1, 0, 0
        for j in range(n // 2 + 1):
            cdf += term
            if cdf / total > alpha:
                break
            k, term = j + 1, term * (n - j) // (j + 1)
        return k

    for c in (math.sqrt(0.95), 1 - 0.05 / 35, 0.95, 1 - 1e-6):
        assert median_rank(n, c) == exact(c), c


def test_a_million_samples_a_case_cost_a_bisection_not_a_walk(tmp_path):
    """A results.json of 10^6 samples in a case (23 MB) classified: median_rank sums a few
    tens of thousands of float terms, where the exact walk took n/2 = 500,000 steps on
    integers of up to 10^6 bits (317 s for the comparison)."""
    d = json.loads(next(p for p in REAL if "amd-epyc" in str(p)).read_text())
    case = next(c for c in d["cases"] if c.get("timing") and c.get("valid"))
    d["cases"] = [case]
    rng = random.Random(1)
    xs = [1e-3 * (1 + 0.05 * rng.random()) for _ in range(10 ** 6)]
    xs.sort()
    med = (xs[499_999] + xs[500_000]) / 2
    rng.shuffle(xs)
    t = case["timing"]
    t.update(samples_s=xs, n=len(xs), median_s=med, mean_s=sum(xs) / len(xs), min_s=min(xs),
             max_s=max(xs))
    for k in ("waits_s", "roof_rates", "roof_probe"):
        t.pop(k, None)
    case["median_s"] = med
    for k in ("flop_per_s", "bytes_per_s", "efficiency", "attainable"):
        case.pop(k, None)
    (tmp_path / "a").mkdir()
    (tmp_path / "a" / "results.json").write_text(json.dumps(d))
    run = load_run(tmp_path / "a")
    assert run.cases[0].measurement.timing.n == 10 ** 6
    median_rank.cache_clear()
    before = gate.TAIL_TERMS[0]
    cmp = classify(run, run)
    work = gate.TAIL_TERMS[0] - before
    assert [c.verdict for c in cmp.cases] == ["same"]
    assert cmp.cases[0].ratio_lo is not None and cmp.cases[0].ratio_lo < 1 < cmp.cases[0].ratio_hi
    # bisection: ~20 tail sums of a few thousand terms each (about sqrt(n) log n in all)
    assert 0 < work <= 200 * math.isqrt(10 ** 6), work
