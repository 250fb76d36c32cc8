"""Op times taken where they run (bench/profile/inprogram.py): each call timed
inside repeated runs of the real program, the alone replay kept beside it."""

from __future__ import annotations

import time

import pytest

torch = pytest.importorskip("torch")

from roofbench.bench.profile.inprogram import time_in_program  # noqa: E402
from roofbench.bench.profile.recording import record_program  # noqa: E402

import roofbench  # noqa: E402

from .test_caller_state import FAST, ROOFS  # noqa: E402


def test_each_run_times_every_call_and_the_ops_fit_inside_the_run():
    w, x = torch.randn(128, 128), torch.randn(4, 128)

    def prog(a):
        h = torch.relu(a @ w)
        time.sleep(0.002)  # Python between ops: the program's, no op's
        return (h @ w).sum()

    with torch.no_grad():
        rec, _ = record_program(prog, (x,), {}, clone=False)
        got = time_in_program(lambda: prog(x), rec, FAST)
    counts = {d.index: d.calls for d in rec.distinct}
    assert len(got.run_s) == 2 and all(len(v) == 2 for v in got.per_call.values())
    assert set(got.per_call) == set(counts)
    for k, wall in enumerate(got.run_s):
        ops = sum(got.per_call[d][k] * n for d, n in counts.items())
        # the calls are timed inside the run: never more than it, and the sleep in none
        assert 0 < ops < wall - 0.002
    # each run paired with an eager run of the program (the sleep is in it)
    assert len(got.eager_s) == 2 and all(e > 0.002 for e in got.eager_s)
    assert got.paired_ratio() == pytest.approx(
        sorted(o / e for o, e in zip(got.ops_s, got.eager_s, strict=True))[0] / 2
        + sorted(o / e for o, e in zip(got.ops_s, got.eager_s, strict=True))[1] / 2)


def test_the_case_holds_the_in_program_time_and_keeps_the_alone_one():
    w, x = torch.randn(64, 64), torch.randn(8, 64)
    with torch.no_grad():
        prof = roofbench.profile(lambda a: torch.tanh(a @ w), x, roofs=ROOFS, timer=FAST)
    for p in prof.ops:
        ex = p.case.evidence.extra
        assert ex["timed"].startswith("in the program")
        assert ex["alone"]["median_s"] and ex["alone"]["timed"].startswith("alone")
        assert p.case.measurement.timing.config["timed"].startswith("in the program")
    assert prof.extra["in_program_runs"] == 2 and prof.extra["ops_alone_s"] > 0
    # the program's samples on a CPU: the eager runs paired with the timed ones
    assert prof.program.measurement.timing.samples == prof.extra["paired_eager_s"]


def test_a_program_longer_than_the_budget_is_timed_in_three_runs():
    from roofbench.timing import TimerConfig

    x = torch.randn(64)
    with torch.no_grad():
        rec, _ = record_program(lambda a: a * 2, (x,), {}, clone=False)
        got = time_in_program(lambda: x * 2, rec, TimerConfig(
            warmup_s=0.0, min_samples=5, max_samples=10, budget_s=0.0))
        more = time_in_program(lambda: x * 2, rec, TimerConfig(
            warmup_s=0.0, min_samples=5, max_samples=5, budget_s=60.0))
    assert len(got.run_s) == 3 and len(more.run_s) == 5
