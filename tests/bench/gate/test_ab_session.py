"""A/B in one job (bench/gate/ab_session.py): the alternation, the two runs that name each other,
and a real slowdown (four times the work) found on the paired samples; no test here races
the clock (the work ratio is 4x, the A/A check allows 50%)."""

from __future__ import annotations

import json

import numpy as np
import pytest
from roofbench.bench.backends.cpu import cpu_model
from roofbench.bench.gate.ab_session import AbSession, alternate
from roofbench.bench.results import load_run

from roofbench.gate import AB_KEY, FailOn, classify, paired_runs
from roofbench.timing import TimerConfig

ROOFS = {"device": cpu_model(), "roofs": [
    {"name": "dram", "kind": "memory", "level": "dram", "value": 2e10, "source": "measured"},
    {"name": "fp32", "kind": "compute", "precision": "fp32", "value": 2e11,
     "source": "measured"}]}
N = 1 << 16


def test_alternation_swaps_the_order_every_pair():
    calls: list[str] = []
    cfg = TimerConfig(warmup_s=0.0, warmup_min_runs=1, min_samples=12, max_samples=12,
                      budget_s=60.0)
    ta, tb = alternate(lambda: calls.append("A"), lambda: calls.append("B"), cfg)
    assert calls[:2] == ["B", "A"]  # the warm-up: both sides once, A last (it runs first)
    pairs = ["".join(calls[2 + 2 * i: 4 + 2 * i]) for i in range(12)]
    assert pairs == ["AB", "BA"] * 6
    assert ta.n == tb.n == 12 and ta.stopped_by == tb.stopped_by == "max_samples"
    assert ta.outside_load == tb.outside_load  # one window: both sides shared it
    assert ta.config["ab"]["side"] == "A" and tb.config["ab"]["side"] == "B"
    if ta.waits:  # where the kernel keeps schedstat: each sample's wait, beside it
        assert len(ta.waits) == ta.n and len(tb.waits) == tb.n
        assert all(w >= 0 for w in ta.waits + tb.waits)


def _add(a, b, c):
    np.add(a, b, out=c)


def _add4(a, b, c):
    for _ in range(4):
        np.add(a, b, out=c)


def test_ab_session_writes_two_paired_runs_and_finds_a_4x_slowdown(tmp_path):
    roofs = tmp_path / "roofs.json"
    roofs.write_text(json.dumps(ROOFS))
    a, b = np.full(N, 0.5, np.float32), np.full(N, 0.25, np.float32)
    c = np.empty_like(a)
    kw = dict(flops=N, reads=[a, b], writes=c, reference=np.full(N, 0.75), output=c)
    with AbSession(tmp_path / "ab", roofs=roofs, quick=True) as ab:
        slow = ab.measure(_add, _add4, a, b, c, name="add/x4", **kw)
        same = ab.measure(_add, _add, a, b, c, name="add/same", **kw)
    assert slow.verdict.paired and slow.verdict.verdict == "slower"
    assert (
        slow.verdict.ratio > 2.0
        and slow.a.measurement.timing.n == slow.b.measurement.timing.n >= 12
    )
    ra, rb = load_run(tmp_path / "ab" / "a"), load_run(tmp_path / "ab" / "b")
    assert paired_runs(ra, rb) and ra.environment[AB_KEY]["side"] == "A"
    assert [x.key for x in ra.cases] == [x.key for x in rb.cases]
    assert (
        ra.cases[0].measurement.timing.samples == slow.a.measurement.timing.samples
    )  # stored as measured
    assert (
        ra.cases[0].measurement.timing.waits == slow.a.measurement.timing.waits
    )  # the per-sample waits too
    assert ra.cases[0].roofline.attainable == pytest.approx(2e10 / 12)  # placed under the roofs
    cmp = classify(ra, rb, 0.5, FailOn(slower=True))
    by = {v.key: v for v in cmp.cases}
    assert by[f"cpu/{slow.a.key}"].verdict == "slower"  # 4x the work, beyond 50%
    assert by[f"cpu/{same.a.key}"].verdict == "same"  # A/A within 50%


def test_a_side_that_fails_validation_is_not_timed(tmp_path):
    a = np.ones(N, np.float32)
    c = np.empty_like(a)

    def wrong(a, b, c):
        np.multiply(a, b, out=c)

    with AbSession(None, roofs=tmp_path.joinpath("r.json"), quick=True) as ab:
        tmp_path.joinpath("r.json").write_text(json.dumps(ROOFS))
        res = ab.measure(_add, wrong, a, a, c, flops=N, reads=[a, a], writes=c,
                         reference=np.full(N, 2.0), output=c)
    assert res.a.valid and res.b.outcome.status == "invalid" and res.b.measurement.timing is None
    assert (
        res.a.measurement.timing.stopped_by != "deferred" and res.a.measurement.timing.n >= 5
    )  # timed alone
    assert res.verdict.verdict == "invalid in B"


def test_the_pair_is_declared_once_and_refuses_a_keyword_measure_does_not_take(tmp_path):
    """Both sides get the one Call's counts and check (B's output given apart); a keyword
    that no side could take is a MeasureError naming it, before anything runs."""
    from roofbench.bench.measure.door import MeasureError

    a, b, c = (np.ones(N, np.float32) for _ in range(3))
    tmp_path.joinpath("r.json").write_text(json.dumps(ROOFS))
    ab = AbSession(None, roofs=tmp_path.joinpath("r.json"), quick=True)
    with pytest.raises(MeasureError, match="unknown keyword flop="):
        ab.measure(_add, _add, a, b, c, flop=N, reads=[a, b], writes=c)
    c2 = np.ones(N, np.float32)
    res = ab.measure(_add, _add, a, b, c, args_b=(a, b, c2), flops=N, reads=[a, b],
                     writes=c, reference=lambda x, y, z: x + y, output=c, output_b=c2)
    assert res.a.valid and res.b.valid
    assert res.a.declaration == res.b.declaration and res.a.outcome.checked
