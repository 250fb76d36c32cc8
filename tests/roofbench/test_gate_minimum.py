"""One minimum of samples for the timer and the gate (issue 57): the timer stopped a long
case on its budget after 3 samples while the gate needs 7 (one case) to 12 (35 cases) for an
interval; now a long case samples on to GATE_MIN_SAMPLES within a stated cap, on a model
clock (no wall clock raced)."""

from __future__ import annotations

import math

import pytest

from roofbench import gate, timing
from roofbench.gate import JUDGED_AT_MINIMUM, MIN_PAIRS, median_rank, min_samples
from roofbench.timing import GATE_MIN_SAMPLES, TimerConfig, sample_loop


def _loop(sample_s: float, cfg: TimerConfig):
    now = [0.0]

    def one() -> float:
        now[0] += sample_s
        return sample_s * (1 + 0.05 * (len(seen) % 2))  # a 5% spread: no noise stop

    seen: list[int] = []

    def counted() -> float:
        seen.append(1)
        return one()

    t = sample_loop(counted, cfg, clock=lambda: now[0])
    return t, now[0]


def test_one_figure_imported_by_both():
    assert gate.GATE_MIN_SAMPLES is timing.GATE_MIN_SAMPLES
    assert TimerConfig().min_samples == TimerConfig.quick().min_samples == GATE_MIN_SAMPLES
    assert min_samples(math.sqrt(0.95)) == 7  # one case judged alone
    # the minimum is what the gate needs with up to JUDGED_AT_MINIMUM cases judged together
    per_case = 1 - 0.05 / JUDGED_AT_MINIMUM
    assert min_samples(math.sqrt(per_case)) == GATE_MIN_SAMPLES
    assert median_rank(GATE_MIN_SAMPLES, math.sqrt(per_case)) > 0
    assert median_rank(MIN_PAIRS // 2, per_case) > 0  # an A/B case: its ABBA blocks


@pytest.mark.parametrize("quick", [False, True])
def test_a_long_case_samples_on_to_the_minimum_within_the_cap(quick):
    cfg = TimerConfig.quick() if quick else TimerConfig()
    # 1.5 s a run (the budget is 2 s, 0.3 s quick): it used to stop after 2 or 3 samples
    t, _ = _loop(1.5, cfg)
    assert t.n == GATE_MIN_SAMPLES and t.stopped_by == "budget" and not t.flags
    # past the cap: it stops short, flagged as a run the gate cannot judge
    per_run = cfg.min_samples_cap_s / 4
    t, spent = _loop(per_run, cfg)
    assert t.stopped_by == "cap" and t.n == 4
    assert spent - cfg.warmup_s <= cfg.min_samples_cap_s + 2 * per_run
    assert any(f.startswith("too few samples for the gate: 4 < 12 within the") for f in t.flags)


def test_a_short_case_still_stops_on_its_budget():
    cfg = TimerConfig()
    t, _ = _loop(0.01, cfg)
    assert t.stopped_by == "budget" and t.n >= 200  # 2 s of 10 ms runs
