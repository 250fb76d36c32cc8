"""The tuner on the real host clock (no simulation): each configuration measured through
``roofbench.measure``'s core (clock_for, the roofs given, the quick timer), its case a
``roofbench.measure`` case. Roofs without a probe's evidence: no paired sampler is built
(nothing big allocated); only the structure is asserted, never a time."""

from __future__ import annotations

import numpy as np
import pytest
from roofbench.bench.backends.cpu import cpu_model
from roofbench.bench.tune.search import tune

from roofbench.roof_records import Roof, RoofSet

N = 1 << 14


def test_a_real_tune_measures_every_configuration_through_the_core():
    roofs = RoofSet(device=cpu_model(), roofs=[
        Roof("dram", "memory", 2e10, "measured", level="dram"),
        Roof("fp32", "compute", 2e11, "measured", precision="fp32")])
    a, b, c = (np.full(N, v, np.float32) for v in (0.5, 0.25, 0.0))

    def build(CHUNK):
        def add(a, b, c):
            for i in range(0, N, CHUNK):
                np.add(a[i:i + CHUNK], b[i:i + CHUNK], out=c[i:i + CHUNK])
        return add

    rec = tune(build, {"CHUNK": [N, N // 64]}, a, b, c, flops=N, reads=[a, b], writes=c,
               output=c, reference=np.full(N, 0.75), roofs=roofs, quick=True,
               exhaustive=True)
    assert rec.device == cpu_model() and rec.stop == "space_tried"
    assert [t.status for t in rec.trials] == ["ok", "ok"]
    for t in rec.trials:
        assert t.case is not None and t.case.evidence.extra["measured_by"] == "roofbench.measure"
        assert t.case.outcome.checked and len(t.samples_s) >= 12
        assert t.roof_time_s == pytest.approx(3 * 4 * N / 2e10)  # its bytes at the roof
    assert rec.basis == "raw"  # no sampler for these roofs: raw times compared
    assert len(rec.ranking) == 2 and rec.best is not None


def test_a_real_meeting_times_two_configurations_in_abba_pairs():
    """The finals' meeting on the host clock (finals.Referee with ab_session.alternate): both
    sides validated through the core, then timed in one job; the gate's words and counts
    recorded (structure only: which side is faster is the machine's)."""
    import time
    from dataclasses import replace

    from roofbench.bench.gate.ab_session import alternate
    from roofbench.bench.measure.callables import clock_for
    from roofbench.bench.measure.declared import declare
    from roofbench.bench.tune import finals

    from roofbench.timing import TimerConfig

    a, b, c = (np.full(N, v, np.float32) for v in (0.5, 0.25, 0.0))

    def add(a, b, c):
        np.add(a, b, out=c)

    def wrong(a, b, c):
        np.subtract(a, b, out=c)

    fns = [add, add, wrong]
    calls = [declare(f, (a, b, c), flops=N, reads=[a, b], writes=c, output=c,
                     reference=np.full(N, 0.75), name=f"add/{i}") for i, f in enumerate(fns)]
    timer = replace(finals.final_timer(TimerConfig.quick()), budget_s=0.02,
                    min_samples_cap_s=0.05)
    ref = finals.Referee(lambda i: calls[i], alternate, clock_for((a,)), time.perf_counter,
                         None, None, timer)
    m = ref.meet(0, 1, ("A", "B"))
    assert m.outcome in ("rival wins", "champion stays") and m.pairs >= 2
    assert m.statistic == "raw ABBA pairs" and m.ratio is not None and m.ratio > 0
    assert m.verdict in ("faster", "slower", "same", "uncertain")
    m = ref.meet(0, 2, ("A", "W"))
    assert (m.outcome, m.verdict, m.pairs) == ("rival invalid", "invalid in B", 0)
