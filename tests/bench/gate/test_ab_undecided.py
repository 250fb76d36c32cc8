"""An A/B case the pairs have not decided samples on past the budget, within the cap (issue
57: on a runner whose cores were all taken, 24 pairs of a planted 1.5x slowdown gave 1.956
[1.180, 2.596] under a load bound of x1.29, `uncertain`, and the README's `ab` passed). On a
model clock: no wall clock is raced."""

from __future__ import annotations

import random

from roofbench.bench.gate.ab_session import alternate

from roofbench.gate import judge, paired_interval
from roofbench.timing import TimerConfig, Timing

# budget: 2 x 10 s of alternation (past 24 pairs of 2 s); the cap: 2 x 200 s
CFG = TimerConfig(warmup_s=0.0, warmup_min_runs=1, min_samples=12, max_samples=10_000,
                  budget_s=10.0, target_rel_ci=0.0, min_samples_cap_s=200.0)


def _clock() -> tuple[list[float], object, object]:
    """Runs of 1 s, a little noise (target_rel_ci 0: the interval never stops it)."""
    now, rng = [0.0], random.Random(1)

    def run_a() -> None:
        now[0] += 1.0 + rng.gauss(0, 0.01)

    def run_b() -> None:
        now[0] += 1.0 + rng.gauss(0, 0.01)

    return now, run_a, run_b


def test_an_undecided_case_samples_on_until_it_is_decided():
    now, ra, rb = _clock()
    calls: list[int] = []

    def decided(ta: Timing, tb: Timing) -> bool:
        calls.append(ta.n)
        return ta.n >= 60  # the pairs decide it at 60

    ta, tb = alternate(ra, rb, CFG, clock=lambda: now[0], decided=decided)
    assert ta.n == tb.n == 60 and ta.stopped_by == "budget"
    assert calls[0] == 24  # asked first once the budget and the minimum are both met
    assert calls == list(range(24, 61))  # after every pair, A B and B A alike
    assert not any("undecided" in f for f in ta.flags)


def test_without_the_question_the_budget_stops_it_as_before():
    now, ra, rb = _clock()
    ta, _ = alternate(ra, rb, CFG, clock=lambda: now[0])
    assert ta.n == 24 and ta.stopped_by == "budget"


def test_a_case_never_decided_stops_at_the_cap_and_says_so():
    now, ra, rb = _clock()
    ta, tb = alternate(ra, rb, CFG, clock=lambda: now[0], decided=lambda ta, tb: False)
    assert ta.stopped_by == tb.stopped_by == "cap"
    assert 190 <= ta.n <= 202 and ta.n % 2 == 0  # 400 s of 2 s pairs, whole blocks
    assert any(f.startswith(f"undecided: {ta.n} pairs within the 400 s cap") for f in ta.flags)
    assert not any("too few samples" in f for f in ta.flags)


def test_a_noisy_slowdown_undecided_at_the_budget_is_caught_with_more_pairs():
    """B 1.5x slower, each sample stretched by a random preemption up to 4x: at the budget's
    24 pairs the interval is wide; asking the gate after every pair, it ends `slower`."""
    def machine() -> tuple[list[float], object, object]:  # the same draws each time
        rng, now = random.Random(5), [0.0]

        def run(work: float) -> None:
            now[0] += work * (1 + 3 * rng.random() ** 3)
        return now, lambda: run(1.0), lambda: run(1.5)

    def verdict(ta: Timing, tb: Timing) -> str:
        return judge(paired_interval(ta.samples, tb.samples, 0.95), 0.05)

    now, ra, rb = machine()
    early = alternate(ra, rb, CFG, clock=lambda: now[0])
    now, ra, rb = machine()
    ta, tb = alternate(ra, rb, CFG, clock=lambda: now[0],
                       decided=lambda ta, tb: verdict(ta, tb) != "uncertain")
    assert early[0].n == 24 and verdict(*early) == "uncertain"
    assert ta.n > 24 and verdict(ta, tb) == "slower"
