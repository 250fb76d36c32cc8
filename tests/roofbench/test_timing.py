"""The timer (roofbench/timing.py): raw samples kept, the noise and median-CI stopping rules,
replayed on the real samples the H200 recorded (results/nvidia-h200/first-contact-ea800a6)."""

from __future__ import annotations

import json
import statistics

import pytest
from testpaths import H200_RUNS

from roofbench.timing import Moments, TimerConfig, converged, median_ci, sample_loop


def _series(min_n: int = 100) -> list[tuple[str, list[float]]]:
    out = []
    for path in H200_RUNS.values():
        for c in json.loads(path.read_text())["cases"]:
            t = c.get("timing")
            if t and len(t["samples_s"]) >= min_n:
                out.append((f"{c['variant']}/{c['dtype']}", t["samples_s"]))
            for la in c.get("launches") or []:
                lt = la.get("timing")
                if lt and len(lt["samples_s"]) >= min_n:
                    out.append((f"{c['variant']}/{la['kernel']}", lt["samples_s"]))
    return out


def _replay(samples: list[float], cfg: TimerConfig):
    it = iter(samples)
    now = [0.0]

    def one() -> float:
        x = next(it)
        now[0] += x
        return x

    return sample_loop(one, cfg, clock=lambda: now[0])


def test_recorded_series_ran_to_their_budget_under_the_cv_rule():
    series = _series()
    assert len(series) >= 6
    for name, s in series:  # what made every GPU loop run its full 2 s: CV never under 1%
        assert statistics.stdev(s) / statistics.fmean(s) > 0.01, name


def test_median_ci_rule_stops_early_on_real_samples_and_keeps_the_median():
    stopped_early = 0
    for name, s in _series():
        cfg = TimerConfig(warmup_s=0.0, warmup_min_runs=0, budget_s=10.0, max_samples=len(s))
        t = _replay(s, cfg)
        if t.stopped_by == "median_ci":
            stopped_early += 1
            assert t.n <= 400, name
            # The device drifts a little over two seconds; the early median stays within
            # 2.5% of the median of the whole recorded series.
            assert abs(t.median / statistics.median(s) - 1) < 0.025, name
    assert stopped_early >= 5


def test_median_ci_is_distribution_free_and_narrows():
    bimodal = sorted([275e-6, 300e-6] * 50)
    lo, hi = median_ci(bimodal)
    assert lo == 275e-6 and hi == 300e-6  # a 50/50 two-mode series: the CI spans both modes
    tight = sorted([1.0] * 40 + [1.001] * 40 + [5.0] * 3)  # rare outliers do not matter
    assert converged(Moments.of(tight), tight, TimerConfig(target_cv=0.0)) == "median_ci"
    assert converged(Moments.of(bimodal), bimodal, TimerConfig(target_cv=0.0)) is None


def test_running_moments_agree_with_the_exact_statistics():
    """The stopping rule's running CV is the exact one (statistics' Fractions) on every
    prefix of the real series, so no sample series stops elsewhere than it did."""
    for name, s in _series():
        m = Moments()
        for i, x in enumerate(s[:400]):
            m.add(x)
            if i:
                exact = statistics.stdev(s[: i + 1]) / statistics.fmean(s[: i + 1])
                assert m.cv == pytest.approx(exact, rel=1e-9, abs=1e-15), (name, i)
    assert Moments.of([1.0]).cv is None and Moments.of([0.0, 0.0]).cv is None
    assert Moments.of([2.0] * 5).cv == 0.0


def test_timer_keeps_raw_samples_and_stops_on_noise():
    vals = iter([1.0] * 100)
    t = sample_loop(lambda: next(vals), TimerConfig(warmup_s=0, warmup_min_runs=2,
                                                    min_samples=10, target_cv=0.01))
    assert t.stopped_by == "noise" and t.n == 10 and t.warmup_runs == 2
    assert t.samples == [1.0] * 10 and t.cv == 0.0


def test_timer_flags_noisy_results():
    seq = iter([1.0, 3.0] * 100)
    t = sample_loop(lambda: next(seq), TimerConfig(warmup_s=0, warmup_min_runs=0,
                                                   min_samples=4, max_samples=8,
                                                   budget_s=100))
    assert t.stopped_by == "max_samples" and t.n == 8
    assert any(f.startswith("noisy") for f in t.flags)
    assert t.samples[:2] == [1.0, 3.0]  # never rounded, never reordered
