"""measure() follows profile's rule: a point above 105% of roofs measured on this machine is
not valid, its error naming the likely cause, and it is not drawn; under roofs the caller
gave (maybe another machine's) it is said and recorded, its status kept (issue 57: a valid
point at 174% of its roof from the most common call). The roofs are stand-ins far below or
far above what any machine does: no wall clock is raced."""

from __future__ import annotations

import numpy as np
import pytest
from load_reading import Quiet
from roofbench.bench.backends.cpu import CpuBackend
from roofbench.bench.measure import roof_source
from roofbench.bench.present.figure_data import valid_points

import roofbench
from roofbench.roof_records import Roof, RoofSet


def roofs(device: str, bandwidth: float) -> RoofSet:
    return RoofSet(device=device, roofs=[
        Roof("dram", "memory", bandwidth, "measured", level="dram"),
        Roof("fp64", "compute", 1e15, "measured", precision="fp64")])


def calibrated(monkeypatch, bandwidth: float) -> None:
    """This machine's calibration (the quick one, into the cache) measures ``bandwidth``."""
    monkeypatch.setattr(CpuBackend, "measure_roofs",
                        lambda self, quick=False, progress=None, checkpoint=None:
                        roofs(self.device_name(), bandwidth))
    monkeypatch.setattr(roof_source, "_load_probe", Quiet)  # a quiet machine: cached
    monkeypatch.setattr(roof_source, "_ROOFS", {})


@pytest.fixture
def add():
    a = np.ones(1 << 16)
    b, c = a.copy(), np.empty_like(a)
    return (np.add, a, b, c), dict(flops=a.size, reads=[a, b], writes=c)


def test_above_roofs_measured_here_is_not_valid_with_its_cause(monkeypatch, tmp_path, add,
                                                               capsys):
    calibrated(monkeypatch, 1e3)  # 1 kB/s: every real add is far above it
    args, kw = add
    with roofbench.Session(roofs_cache=tmp_path / "roofs.json", quick=True) as s:
        rec = s.measure(*args, **kw)
    assert rec.roofline.efficiency > 1.05
    assert rec.outcome.status == "invalid" and not rec.valid
    assert "of dram, above its roof" in rec.outcome.error
    assert "likely cause: the bandwidth roof underestimates the device" in rec.outcome.error
    assert valid_points([rec]) == []  # not drawn as valid
    assert f"{rec.key}: not valid: " in capsys.readouterr().err


def test_within_roofs_measured_here_stays_valid(monkeypatch, tmp_path, add):
    calibrated(monkeypatch, 1e15)  # beyond any machine
    args, kw = add
    rec = roofbench.Session(roofs_cache=tmp_path / "roofs.json", quick=True).measure(*args, **kw)
    assert rec.outcome.status == "ok" and rec.valid and rec.roofline.efficiency < 1.05
    assert "above_roof" not in rec.evidence.extra


def test_above_roofs_the_caller_gave_is_said_and_recorded_its_status_kept(add, capsys):
    args, kw = add
    rec = roofbench.measure(*args, roofs=roofs("another machine", 1e3), **kw)
    assert rec.outcome.status == "ok" and rec.valid
    why = rec.evidence.extra["above_roof"]
    assert "of dram, above the roofs given" in why and "or they are not this machine's" in why
    assert f"{rec.key}: {why}" in capsys.readouterr().err
