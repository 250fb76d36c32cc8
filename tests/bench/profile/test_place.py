"""Placing a profile's ops (bench/profile/place.py): compute roofs for the threads
torch used, a point above 105% of its roof invalid with its cause, the dispatch cost in the
fusion prediction."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

from roofbench.bench.measure import core  # noqa: E402
from roofbench.bench.measure.above_roof import flag_above_roof  # noqa: E402
from roofbench.bench.profile.fusion import Group  # noqa: E402
from roofbench.bench.profile.place import roofs_for_threads  # noqa: E402

from roofbench.records import CaseResult, Declaration, Identity, Outcome  # noqa: E402
from roofbench.roof_records import Roof, RoofSet  # noqa: E402
from roofbench.timing import Timing  # noqa: E402

ROOFS = RoofSet(device="t", roofs=[
    Roof("dram", "memory", 10e9, "measured", level="dram", evidence={"threads": 2}),
    Roof("fp32 fma", "compute", 100e9, "measured", precision="fp32",
         evidence={"threads": 2})])


def test_compute_roofs_measured_on_two_threads_are_halved_for_one():
    one = roofs_for_threads(ROOFS, 1)
    assert one.compute("fp32").value == pytest.approx(50e9)
    assert one.compute("fp32").evidence["scaled_from"] == {"threads": 2, "value": 100e9}
    assert one.memory("dram").value == 10e9 and "scaled to the 1 thread" in one.notes[0]
    assert ROOFS.compute("fp32").value == 100e9  # the given set is not changed
    assert roofs_for_threads(ROOFS, 2).compute("fp32").value == 100e9


def _case(flops: int, nbytes: int, seconds: float) -> CaseResult:
    rec = CaseResult(Identity(workload="op", variant="x", backend="cpu", dtype="fp32",
                              size=[1], precision="fp32", cores="simt"),
                     Declaration(flops=flops, bytes={"dram": nbytes},
                                 ai={"dram": flops / nbytes}),
                     Outcome(status="ok", checked=False))
    core.fill_metrics(rec, Timing(samples=[seconds], warmup_runs=0, stopped_by="x"), ROOFS)
    return rec


def test_a_point_above_105_percent_is_invalid_with_its_cause():
    fast = _case(0, 1_000_000, 1e-5)  # 100 GB/s on a 10 GB/s roof: 1000%
    flag_above_roof(fast, ROOFS)
    assert fast.outcome.status == "invalid" and "1000% of dram, above its roof" in \
        fast.outcome.error and "likely cause" in fast.outcome.error
    near = _case(0, 1_000_000, 1e-4 / 1.04)  # 104%: within the measurement's margin
    flag_above_roof(near, ROOFS)
    assert near.outcome.status == "ok"


def test_the_fusion_prediction_pays_one_launch():
    g = Group((0, 1), [0, 1], ["mul", "add"], 0, 3000, 1000, 2e-6, "fp32")
    at_roof = 1000 / 10e9
    assert g.predicted_speedup(ROOFS) == pytest.approx(2e-6 / at_roof)
    assert g.predicted_speedup(ROOFS, 1e-6) == pytest.approx(2e-6 / (at_roof + 1e-6))


def test_the_cores_used_are_no_more_than_the_affinity_allows(monkeypatch):
    from roofbench.bench.profile import place

    monkeypatch.setattr(place.os, "sched_getaffinity", lambda pid: {0})
    assert place.used_cores(2) == 1
    monkeypatch.setattr(place.os, "sched_getaffinity", lambda pid: {0, 1, 2})
    assert place.used_cores(2) == 2
