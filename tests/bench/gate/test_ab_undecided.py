"""An A/B case the pairs have not decided samples on past the budget, within the cap (issue
57: on a runner whose cores were all taken, 24 pairs of a planted 1.5x slowdown gave 1.956
[1.180, 2.596] under a load bound of x1.29, `uncertain`, and the README's `ab` passed). On a
model clock: no wall clock is raced."""

from __future__ import annotations

import random

from roofbench.bench.gate.ab_session import alternate, settled

from roofbench.gate import CaseVerdict, judge, paired_interval
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


def test_same_stops_the_sampling_only_when_its_interval_is_inside_the_threshold():
    """`same` is judged on the median alone: a wide interval must not end the sampling, or a
    marginal slowdown whose median drifts into the band by chance ends as `same`."""
    def v(verdict: str, ratio: float, lo: float | None, hi: float | None) -> CaseVerdict:
        return CaseVerdict("k", verdict, ratio=ratio, ratio_lo=lo, ratio_hi=hi)  # type: ignore[arg-type]

    assert settled(v("same", 1.01, 0.98, 1.04), 0.05)
    assert not settled(v("same", 1.018, 0.72, 1.54), 0.05)  # the busy-loop A/A's width
    assert not settled(v("same", 1.0, None, None), 0.05)
    assert not settled(v("uncertain", 1.3, 0.9, 1.8), 0.05)
    assert settled(v("slower", 1.5, 1.2, 1.8), 0.05)
    assert settled(v("faster", 0.6, 0.5, 0.8), 0.05)


def test_a_marginal_slowdown_is_not_stopped_on_a_lucky_same():
    """B 1.08x slower under heavy noise; the gate asked after every pair as the A/B job asks
    it: the job never stops on a `same` whose interval is wider than the threshold."""
    rng, now = random.Random(11), [0.0]

    def run(work: float) -> None:
        now[0] += work * (1 + 3 * rng.random() ** 3)

    seen: list[CaseVerdict] = []

    def decided(ta: Timing, tb: Timing) -> bool:
        iv = paired_interval(ta.samples, tb.samples, 0.95)
        c = CaseVerdict("k", judge(iv, 0.05), ratio=iv.ratio, ratio_lo=iv.lo, ratio_hi=iv.hi)
        seen.append(c)
        return settled(c, 0.05)

    ta, _ = alternate(lambda: run(1.0), lambda: run(1.08), CFG, clock=lambda: now[0],
                      decided=decided)
    last = seen[-1]
    if ta.stopped_by == "budget":  # stopped early: only on a settled verdict
        assert last.verdict in ("slower", "faster") or (
            last.ratio_lo is not None and last.ratio_lo >= 1 / 1.05
            and last.ratio_hi is not None and last.ratio_hi <= 1.05)
    # some pair on the way read a median within 5% with a wide interval: `uncertain`, never
    # `same`, and it did not stop the job
    drift = [c for c in seen[:-1] if c.ratio is not None and 1 / 1.05 <= c.ratio <= 1.05
             and c.ratio_hi is not None and c.ratio_hi > 1.05]
    assert drift and all(c.verdict == "uncertain" and not settled(c, 0.05) for c in drift)
    # a `same` on the median alone (an older file's) is not settled either
    assert not settled(CaseVerdict("k", "same", ratio=1.0, ratio_lo=0.8, ratio_hi=1.3), 0.05)
