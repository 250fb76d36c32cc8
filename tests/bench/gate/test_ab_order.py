"""A/B without an order bias (issue 57): on a model clock where a run is 10% faster when the
run before it was its own (its data still in the cache), identical code judged on the pairs
is `same` at 1 within the noise, with a roof sample between pairs that evicts both (the
rewarm used to run A then B before every pair, so B was the fresh one before each B A pair:
0.95, `faster`) and without one. No wall clock is raced: the model clock is the timer's."""

from __future__ import annotations

import random

import pytest
from roofbench.bench.gate.ab_session import alternate

from roofbench.gate import judge, paired_interval
from roofbench.timing import RoofPair, TimerConfig


class Machine:
    """A model clock and cache: a run takes 1 s (times a little noise), 0.9 s when the last
    run was of the same side; a roof sample evicts everything."""

    def __init__(self, seed: int) -> None:
        self.now = 0.0
        self.last = ""
        self.rng = random.Random(seed)

    def run(self, side: str) -> None:
        self.now += (0.9 if self.last == side else 1.0) * (1 + self.rng.gauss(0, 0.002))
        self.last = side

    def evict(self) -> float:
        self.last = ""
        return 1e10


CFG = TimerConfig(warmup_s=0.0, warmup_min_runs=2, min_samples=40, max_samples=40,
                  budget_s=1e9, target_rel_ci=0.0)


@pytest.mark.parametrize("with_roof", [True, False])
@pytest.mark.parametrize("seed", [1, 2, 3])
def test_identical_code_on_a_clock_that_favours_a_warm_run_is_same(with_roof, seed):
    m = Machine(seed)
    pair = RoofPair("memory:dram:model", m.evict, rewarm=True) if with_roof else None
    ta, tb = alternate(lambda: m.run("A"), lambda: m.run("B"), CFG, pair=pair,
                       clock=lambda: m.now)
    assert ta.n == tb.n == 40
    iv = paired_interval(ta.samples, tb.samples, 0.95)
    assert abs(iv.ratio - 1.0) < 0.01, iv
    assert iv.lo is not None and iv.hi is not None and iv.lo <= 1.0 <= iv.hi
    assert judge(iv, 0.05) == "same"
    assert judge(iv, 0.0) in ("same", "uncertain")  # never faster/slower, even at 0%


def test_the_blocks_cancel_a_gain_of_the_second_of_each_pair():
    """A model where the second run of every pair gains 10% whatever ran before it."""
    now, k = [0.0], [0]

    def run() -> None:
        k[0] += 1
        now[0] += 0.9 if k[0] % 2 == 0 else 1.0

    ta, tb = alternate(run, run, CFG, clock=lambda: now[0])
    iv = paired_interval(ta.samples, tb.samples, 0.95)
    assert iv.ratio == pytest.approx(1.0) and judge(iv, 0.0) == "same"


def test_the_stopping_rule_runs_after_every_pair_whatever_its_order(monkeypatch):
    """The work between two pairs is the same after A B as after B A: a stopping rule run
    only where a block ends put a gap before every A B pair alone (A/A at 0.965-1.000)."""
    from roofbench.bench.gate import ab_session

    after: list[int] = []
    real = ab_session.median_interval
    seen = {"n": 0}

    def counted(xs, confidence):
        after.append(seen["n"])
        return real(xs, confidence)

    def run() -> None:
        seen["n"] += 1

    monkeypatch.setattr(ab_session, "median_interval", counted)
    cfg = TimerConfig(warmup_s=0.0, warmup_min_runs=1, min_samples=12, max_samples=40,
                      budget_s=1e9, target_rel_ci=0.0)
    alternate(run, run, cfg)
    pairs = [(n - 2) // 2 for n in after]  # runs so far, less the warm-up, in pairs
    first = ab_session.CI_MIN_SAMPLES
    assert pairs == list(range(first, 41)), pairs  # after pair 30, 31, ..., 40: both orders
