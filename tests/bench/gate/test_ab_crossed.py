"""A/B sides that hold their own buffers of the same data run, every other ABBA block, on
each other's (issue 57: unchanged code read `slower` 1.066 [1.030, 1.268] over 80 pairs under
a busy loop per core, B 3.7% slower in both halves: a fixed difference of the two sides'
buffers, which pairing in time cannot cancel). On a model clock: no wall clock is raced."""

from __future__ import annotations

import random

import numpy as np
import pytest
import torch
from roofbench.bench.gate.ab_session import alternate, crossable, same_data

from roofbench.gate import judge, paired_interval
from roofbench.timing import TimerConfig

CFG = TimerConfig(warmup_s=0.0, warmup_min_runs=1, min_samples=12, max_samples=200,
                  budget_s=1e9, target_rel_ci=0.0, min_samples_cap_s=1e9)


def _sides(slow_data: float, code_b: float = 1.0, fresh_gain: float = 0.0):
    """A model machine: a call's time is its code's factor x its data's (buffer set 2 is
    ``slow_data`` slower, as a worse physical placement would be), less ``fresh_gain`` when
    its data was the last touched (caches). Returns the clock and the four functions."""
    now, rng, last = [0.0], random.Random(5), [None]

    def call(code: float, data: int) -> None:
        t = code * (slow_data if data == 2 else 1.0) * (1 + rng.gauss(0, 0.005))
        now[0] += t * (1 - fresh_gain if last[0] == data else 1.0)
        last[0] = data

    fa, fb = (lambda: call(1.0, 1)), (lambda: call(code_b, 2))  # each on its own buffers
    xa, xb = (lambda: call(1.0, 2)), (lambda: call(code_b, 1))  # crossed
    return now, fa, fb, (xa, xb)


def _verdict(ta, tb) -> tuple[str, float]:
    iv = paired_interval(ta.samples, tb.samples, 0.95)
    return judge(iv, 0.05), iv.ratio


def test_a_fixed_difference_of_the_buffers_is_cancelled_by_crossing():
    now, fa, fb, cross = _sides(slow_data=1.066)
    ta, tb = alternate(fa, fb, CFG, clock=lambda: now[0])
    verdict, ratio = _verdict(ta, tb)
    assert verdict == "slower" and ratio == pytest.approx(1.066, rel=0.01)  # the false verdict
    now, fa, fb, cross = _sides(slow_data=1.066)
    ta, tb = alternate(fa, fb, CFG, clock=lambda: now[0], crossed=cross)
    verdict, ratio = _verdict(ta, tb)
    assert verdict != "slower" and verdict != "faster"
    assert ratio == pytest.approx(1.0, abs=0.01)
    assert ta.config["ab"]["crossed"] and tb.config["ab"]["crossed"]


def test_a_real_slowdown_is_still_caught_when_crossed():
    now, fa, fb, cross = _sides(slow_data=1.066, code_b=1.5)
    ta, tb = alternate(fa, fb, CFG, clock=lambda: now[0], crossed=cross)
    verdict, ratio = _verdict(ta, tb)
    assert verdict == "slower" and ratio == pytest.approx(1.5, rel=0.02)


def test_no_side_finds_its_data_staler_at_a_switch():
    """Where a call on the data touched last runs 10% faster, the switch between buffer sets
    must not favour a side: each switch reruns the coming pair untimed (second, then first)."""
    now, fa, fb, cross = _sides(slow_data=1.0, fresh_gain=0.10)
    ta, tb = alternate(fa, fb, CFG, clock=lambda: now[0], crossed=cross)
    verdict, ratio = _verdict(ta, tb)
    assert verdict == "same" and ratio == pytest.approx(1.0, abs=0.01), ratio


def test_only_distinct_buffers_of_equal_data_are_crossed():
    a, b = np.full(64, 0.5), np.full(64, 0.5)
    assert same_data(a, b) and crossable((a, 3), (b, 3))
    assert not crossable((a, 3), (a, 3))  # the same objects: nothing to cross
    assert not crossable((a,), (np.full(64, 0.25),))  # new's own data: never swapped
    assert not crossable((a,), (np.full(32, 0.5),)) and not crossable((a,), (a, a))
    assert not crossable((a,), (b.astype(np.float32),))
    assert not crossable((a, 3), (b, 4)) and not crossable((a, "x"), (b, 3))
    nan = np.array([np.nan, 1.0])
    assert same_data(nan, nan.copy())
    t = torch.arange(8.0)
    assert crossable((t,), (t.clone(),)) and not crossable((t,), (t + 1,))
    assert not crossable((t,), (t.to(torch.float64),))
