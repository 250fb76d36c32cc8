"""A calibration never cached in secret under load (bench/measure/roof_source.py): the
roofs file records the load the probes ran under and their spread; one taken while other
processes held the cores says so, is kept for the run only (the cache left as it was), and
a cached one marked under load is replaced by the next quiet calibration. The load reading
and the probes are faked (behaviour, not speed)."""

from __future__ import annotations

import json

import pytest
from load_reading import reading
from roofbench.bench.backends.cpu import CpuBackend
from roofbench.bench.cli import main
from roofbench.bench.measure import roof_source

from roofbench.roof_records import Roof, RoofSet

KEY = {"cpu": "Test CPU", "cores": "0-1", "memory_bytes": "1024", "numpy": "2.0.0",
       "numba": "0.60.0", "llvmlite": "0.43.0", "probes": "a1b2c3d4e5f6"}


@pytest.fixture
def machine(monkeypatch, tmp_path):
    """Fake CPU probes (roofs halved under load, as a busy neighbour halves them) and a
    fake load reading: set ``state["busy"]`` to the others' share of the cores."""
    state = {"busy": 0.0, "calls": 0}

    def measure(self, quick=False, progress=None, checkpoint=None):
        state["calls"] += 1
        scale = 1.0 - state["busy"]
        rs = RoofSet(device=self.device_name(), roofs=[
            Roof("dram stream-add", "memory", 2e10 * scale, "measured", level="dram",
                 median=1.5e10 * scale),
            Roof("fp64 FMA peak", "compute", 1e11 * scale, "measured", precision="fp64",
                 median=9e10 * scale)])
        if checkpoint is not None:
            checkpoint(rs)  # a calibration checkpoints into the cache as it goes
        return rs

    class Probe:
        def report(self):
            return reading(state["busy"])

    monkeypatch.setattr(CpuBackend, "measure_roofs", measure)
    monkeypatch.setattr(roof_source, "_load_probe", Probe)
    monkeypatch.setattr(roof_source, "cache_key",
                        lambda be: dict(KEY) if be.kind == "cpu" else None)
    monkeypatch.setattr(roof_source, "_ROOFS", {})
    monkeypatch.setenv("ROOFBENCH_HOME", str(tmp_path / "home"))
    return state


def _cache(be) -> dict | None:
    path = roof_source.cache_path(be)
    return json.loads(path.read_text()) if path.exists() else None


def test_a_quiet_calibration_records_its_load_and_spread(machine):
    be = CpuBackend()
    rs = roof_source.cached_roofs(be, quick=True)
    load = _cache(be)["info"]["calibration_load"]
    assert load["under_load"] is False and load["cores"] == 2
    assert load["probe_spread"] == {"dram stream-add": 0.25, "fp64 FMA peak": 0.1}
    assert rs.info["calibration_load"] == load


def test_a_calibration_under_load_is_kept_for_the_run_not_cached(machine, capsys):
    be = CpuBackend()
    machine["busy"] = 0.5
    rs = roof_source.cached_roofs(be, quick=True)
    assert rs.info["calibration_load"]["under_load"] is True
    assert rs.roofs[0].value == 1e10  # the run has its roofs
    assert _cache(be) is None  # its checkpoints taken back: nothing cached
    assert "calibrated under load" in capsys.readouterr().err
    assert any("calibrated under load" in n for n in rs.notes)
    # the next call in a quiet machine measures again and caches the quiet roofs
    machine["busy"] = 0.0
    rs2 = roof_source.cached_roofs(be, quick=True)
    assert machine["calls"] == 2 and rs2.roofs[0].value == 2e10
    assert _cache(be)["info"]["calibration_load"]["under_load"] is False


def test_an_earlier_quiet_cache_survives_a_calibration_under_load(machine):
    be = CpuBackend()
    roof_source.cached_roofs(be, quick=True)
    quiet = _cache(be)
    machine["busy"] = 0.6
    roof_source.cached_roofs(be, quick=True, recalibrate=True)
    assert _cache(be) == quiet


def test_a_cached_file_marked_under_load_is_replaced_once_quiet(machine, tmp_path):
    be = CpuBackend()
    out = tmp_path / "named.json"
    machine["busy"] = 0.5  # a file the user named is written, marked
    rs, path, measured = roof_source.calibrate(backend="cpu", out=out, quick=True)
    assert measured and json.loads(out.read_text())["info"]["calibration_load"]["under_load"]
    roof_source.cached_roofs(be, out)  # still loaded: used as it is
    assert machine["calls"] == 1
    machine["busy"] = 0.0
    again = roof_source.cached_roofs(be, out)  # quiet now: measured again, replaced
    assert machine["calls"] == 2 and again.roofs[0].value == 2e10
    assert not json.loads(out.read_text())["info"]["calibration_load"]["under_load"]


def test_calibrate_says_it_was_under_load(machine, capsys):
    machine["busy"] = 0.5
    assert main(["calibrate", "--backend", "cpu", "--quick", "--no-plot"]) == 0
    out = capsys.readouterr().out
    assert "not saved" in out and "UNDER LOAD: others kept 1 of 2 cores busy" in out
