"""The one schema (roofbench/records.py, read by roofbench/readers.py): every stored file
reads, migrates and round-trips; the one roofs loader takes every roofs file roofbench writes;
the one roof-sourcing policy."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from roofbench.bench.errors import UserError
from roofbench.bench.measure.roof_source import obtain_roofs
from roofbench.bench.present import report as report_mod
from roofbench.bench.results import load_run
from roofbench.roofs.files import RoofsFileError, load_roofs, save_calibrated
from testpaths import H200_RUNS, ROOT

from roofbench import legacy
from roofbench.readers import read_case, read_roofset, read_run
from roofbench.records import (
    RESULTS_SCHEMA,
    RESULTS_SCHEMA_VERSION,
    CaseResult,
    Declaration,
    Identity,
    Measurement,
    Outcome,
    RunResult,
)
from roofbench.roof_records import (
    ROOFSET_SCHEMA_VERSION,
    DatasheetMatch,
    ProbeFailure,
    Roof,
    RoofSet,
)


def _schema(p: Path) -> object:
    """A stored JSON file's schema; None for one that is not an object (a run folder also
    holds tables of rows, as tune_ab's ab.json)."""
    d = json.loads(p.read_text())
    return d.get("schema") if isinstance(d, dict) else None


STORED = sorted(p for d in ("results", "tests/fixtures") for p in (ROOT / d).rglob("*.json")
                if _schema(p) == RESULTS_SCHEMA)


def _text(d: dict) -> str:
    return json.dumps(d, sort_keys=True, allow_nan=True)


def assert_same_json(got: dict, want: dict) -> None:
    """Equal as sorted JSON; on a difference, where it starts (pytest's own diff of a
    megabyte on one line runs for many minutes)."""
    a, b = _text(got), _text(want)
    if a != b:
        pairs = enumerate(zip(a, b, strict=False))  # one may be the other's prefix
        i = next((k for k, (x, y) in pairs if x != y), min(len(a), len(b)))
        pytest.fail(f"differ at character {i} of {len(a)} / {len(b)}:\n"
                    f"  got  ...{a[max(0, i - 120):i + 120]}...\n"
                    f"  want ...{b[max(0, i - 120):i + 120]}...")


def test_there_are_stored_files_of_every_version():
    versions = {json.loads(p.read_text())["schema_version"] for p in STORED}
    assert versions == set(range(1, RESULTS_SCHEMA_VERSION + 1)), STORED  # flat and nested


@pytest.mark.parametrize("path", STORED, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_stored_results_file_loads_and_round_trips(path):
    raw = json.loads(path.read_text())
    run = load_run(path)
    once = run.to_dict()
    assert once["schema_version"] == RESULTS_SCHEMA_VERSION
    assert_same_json(read_run(json.loads(_text(once))).to_dict(), once)
    # Measured numbers are carried as read: times, samples and the roofs' values.
    for c, stored in zip(run.cases, raw["cases"], strict=True):
        rc = stored if raw["schema_version"] < 4 else flat_case(stored)
        assert c.measurement.median_s == rc["median_s"] and c.declaration.flops == rc["flops"]
        if rc.get("timing"):
            assert c.measurement.timing.samples == rc["timing"]["samples_s"]
            assert c.measurement.timing.to_dict()["median_s"] == rc["timing"]["median_s"]
    if raw.get("roofs"):
        assert [r.value for r in run.roofs.roofs] == [r["value"] for r in raw["roofs"]["roofs"]]
        # The one roofs loader takes a results.json too: the roofs it was placed under.
        rs = load_roofs(path)
        assert rs.to_dict() == run.roofs.to_dict()
        assert_same_json(read_roofset(rs.to_dict()).to_dict(), rs.to_dict())


def flat_case(d: dict) -> dict:
    """A nested case (version 4 on) as versions 1 to 3 stored it: every group's fields side by
    side, and ``valid`` beside the status."""
    out = {k: v for g in legacy.FLAT_CASE_GROUPS for k, v in d[g].items()}
    return {**out, "valid": out["status"] == "ok"}


REPORT_FACTS = ("marker", "flop_convention", "arrow_from", "buffers", "ncu")
# Fields added since, read at their defaults: a stored run was validated, declares no limit.
LATER_DEFAULTS = {"checked": True, "limit_note": ""}


@pytest.mark.parametrize("path", [p for p in STORED if json.loads(p.read_text())[
    "schema_version"] == 2], ids=lambda p: str(p.relative_to(ROOT)))
def test_a_version_2_file_gains_only_the_report_facts(path):
    """Reading a version 2 file and writing it again adds what version 3 stores (the report
    facts, each launch's buffers and typed facts; "unit" is "cores") and changes nothing
    else."""
    raw = json.loads(path.read_text())
    again = load_run(path).to_dict()
    assert again["schema_version"] == RESULTS_SCHEMA_VERSION
    again["cases"] = [flat_case(c) for c in again["cases"]]
    for rc, c in zip(raw["cases"], again["cases"], strict=True):
        assert c["marker"] != "o" or c["workload"] == "vector_add"  # the frozen table's
        assert c["buffers"], c["workload"]  # declared_buffers: every buffer's bytes
        if (c["workload"], c["variant"]) == ("rownorm", "fused"):
            # counted x twice then, once now: today's launches are not this record's
            assert not any(la["reads"] for la in c["launches"])
        else:
            assert sum(b["nbytes"] for la in c["launches"] for b in (
                c["buffers"][n] for n in la["reads"] + la["writes"])) == c["bytes"]["dram"]
        old_facts = rc["extra"].get("launches")
        for la, ra in zip(c["launches"], rc["launches"], strict=True):
            facts = la.pop("facts", None)
            assert (facts is None) == (old_facts is None and "occupancy" not in ra)
            del la["reads"], la["writes"]
            ra.pop("occupancy", None)
        for k in REPORT_FACTS:
            c.pop(k)
        for k, default in LATER_DEFAULTS.items():
            assert c.pop(k) == default, k
        for t, rt in [(c.get("timing"), rc.get("timing"))] + [
                (la.get("timing"), ra.get("timing"))
                for la, ra in zip(c["launches"], rc["launches"], strict=True)]:
            if t and "outside_load" in t:  # derived from the noisy flag's stated cause
                load = t.pop("outside_load")
                assert any(f.endswith(load) for f in rt["flags"])
        rc["extra"] = {k: v for k, v in rc["extra"].items() if k not in ("launches", "ncu")}
        rc["cores"] = rc.pop("unit")  # its name before version 3
    strip = ("roofbench_version", "schema_version")
    assert_same_json({k: v for k, v in again.items() if k not in strip},
                     {k: v for k, v in raw.items() if k not in strip})


def _roof_set() -> RoofSet:
    return RoofSet("NVIDIA H200", [
        Roof("HBM triad", "memory", 4.3e12, "measured", level="dram"),
        Roof("FP32 FMA", "compute", 6.3e13, "measured", precision="fp32"),
        Roof("HBM datasheet", "memory", 4.8e12, "datasheet", level="dram")],
        info={"probes": []}, datasheet=DatasheetMatch("h200-sxm", "name match"),
        failed_probes=[ProbeFailure("fp8 mma", "no sm_89 kernel")], notes=["clocks locked"],
        elapsed_s=12.5)


def test_one_loader_takes_every_roofs_file(tmp_path):
    rs = _roof_set()
    bare2 = tmp_path / "bare2.json"
    bare2.write_text(json.dumps(rs.to_dict()))
    bare1 = tmp_path / "bare1.json"  # version 1: the typed facts lived in info
    bare1.write_text(json.dumps({"device": rs.device, "roofs": [r.to_dict() for r in rs.roofs],
                                 "info": {"datasheet_match": {"entry": "h200-sxm",
                                                              "reason": "name match"},
                                          "failed_probes": {"fp8 mma": "no sm_89 kernel"},
                                          "elapsed_s": 12.5}}))
    cal = save_calibrated(rs, tmp_path / "nvidia-h200.json")
    run = tmp_path / "results.json"
    run.write_text(json.dumps(RunResult("cuda", rs.device, rs, []).to_dict()))
    for p in (bare2, bare1, cal, run):
        got = load_roofs(p)
        assert [r.value for r in got.roofs] == [4.3e12, 6.3e13, 4.8e12], p
        assert got.datasheet == rs.datasheet and got.failed_probes == rs.failed_probes, p
        assert got.elapsed_s == 12.5, p
    # The calibration cache keeps the typed facts now (it dropped them before version 2).
    assert json.loads(cal.read_text())["schema_version"] == ROOFSET_SCHEMA_VERSION
    assert load_roofs(cal, require_schema=True).notes == ["clocks locked"]
    assert load_roofs(cal).info["calibrated_file"] == str(cal)
    assert "calibrated_file" not in load_roofs(bare2).info  # only a calibration says where


def test_an_older_calibrated_file_still_loads(tmp_path):
    """Calibrated files written before the roof set had a version: device, info, roofs."""
    rs = _roof_set()
    p = tmp_path / "nvidia-h200.json"
    p.write_text(json.dumps({"schema": "roofbench.calibrated-roofs/1",
                             "created_utc": "2026-11-30T12:00:00Z", "device": rs.device,
                             "slug": "nvidia-h200", "table": [], "info": {"probes": []},
                             "roofs": [r.to_dict() for r in rs.roofs]}))
    got = load_roofs(p, require_schema=True)
    assert got.memory("dram").value == 4.3e12 and got.datasheet is None
    assert got.info["calibrated_utc"] == "2026-11-30T12:00:00Z"


def test_a_fleet_file_gives_its_first_measured_rank_and_every_link(tmp_path):
    link = Roof(name="nccl all-reduce busbw", kind="interconnect", level="link", value=3e11,
                source="measured")
    rank = RoofSet(device="NVIDIA H200", roofs=[Roof(name="hbm", kind="memory", level="dram",
                                                     source="measured",
                                                     value=4.3e12)])
    p = tmp_path / "fleet.json"
    p.write_text(json.dumps({"schema": "roofbench.fleet/1", "interconnect": {
        "roofs": [link.to_dict()]}, "ranks": [{"status": "failed"}, {
            "status": "ok", "roofs": rank.to_dict()}]}))
    got = load_roofs(p)
    assert got.device == "NVIDIA H200"
    assert sorted(r.name for r in got.roofs) == ["hbm", "nccl all-reduce busbw"]
    with pytest.raises(RoofsFileError):
        load_roofs(p, require_schema=True)  # the calibration cache is never a fleet file


@pytest.mark.parametrize("content,what", [
    ("{not json", "corrupt roofs file"),
    ("[1, 2]", "not a roofs file"),
    (json.dumps({"schema": "roofbench.fleet/2", "ranks": []}), "wrong schema"),
    (json.dumps({"schema": "roofbench.fleet/1", "ranks": []}), "invalid roofs"),
    (json.dumps({"schema": RESULTS_SCHEMA, "schema_version": 2, "roofs": None}),
     "placed under no roofs"),
    (json.dumps({"device": "x", "roofs": [{"kind": "memory"}]}), "invalid roofs"),
    (json.dumps({"device": "x", "roofs": [], "schema_version": 7}), "invalid roofs"),
])
def test_anything_else_is_one_line_naming_the_file(tmp_path, content, what):
    p = tmp_path / "roofs.json"
    p.write_text(content)
    with pytest.raises(RoofsFileError) as ei:
        load_roofs(p)
    msg = str(ei.value)
    assert str(p) in msg and what in msg and len(msg.splitlines()) == 1
    with pytest.raises(RoofsFileError, match="no such roofs file"):
        load_roofs(tmp_path / "absent.json")


class _Gpu:
    kind = "gpu"

    def __init__(self) -> None:
        self.measured = 0

    def device_name(self) -> str:
        return "NVIDIA H200"

    def measure_roofs(self, quick: bool = False, progress=None, checkpoint=None) -> RoofSet:
        self.measured += 1
        return _roof_set()


def test_policy_an_explicit_file_of_another_device_is_used_as_given(tmp_path):
    """--roofs is the user's statement: used on any device, never measured nor written (the
    run notes the mismatch); a cache holding another device is refused, never used."""
    a100 = RoofSet("NVIDIA A100-SXM4-80GB", _roof_set().roofs)
    f = save_calibrated(a100, tmp_path / "a100.json")
    before = f.read_text()
    gpu = _Gpu()
    assert obtain_roofs(gpu, roofs_file=f, recalibrate=True).device == a100.device
    assert gpu.measured == 0 and f.read_text() == before
    with pytest.raises(UserError, match="A100.*--recalibrate"):
        obtain_roofs(gpu, cache=f)
    with pytest.raises(UserError, match="no such roofs file"):
        obtain_roofs(gpu, roofs_file=tmp_path / "absent.json")
    cache = tmp_path / "nvidia-h200.json"
    rs = obtain_roofs(gpu, cache=cache)  # absent cache: measured and saved
    assert gpu.measured == 1 and load_roofs(cache, require_schema=True).device == rs.device


def test_case_round_trip_keeps_typed_timing_and_launches():
    from roofbench.records import LaunchResult
    from roofbench.timing import Timing

    t = Timing([1e-3, 2e-3, 3e-3], warmup_runs=2, stopped_by="budget", flags=["noisy"])
    c = CaseResult(
        Identity(workload="l2norm", variant="naive", backend="cpu", dtype="fp32", size=[10],
                 precision="fp32", cores="simt"),
        Declaration(flops=30, bytes={"dram": 120}, ai={"dram": 0.25}),
        Outcome(status="ok"),
        measurement=Measurement(timing=t, median_s=t.median,
                                launches=[LaunchResult("sq", "", 10, {"dram": 80}, timing=t)]))
    d = json.loads(json.dumps(c.to_dict()))
    m = d["measurement"]
    assert m["timing"]["p25_s"] == 1.5e-3 and m["timing"]["samples_s"] == [1e-3, 2e-3, 3e-3]
    assert "occupancy" not in m["launches"][0]  # unknown on a CPU: absent, the file unchanged
    back = read_case(d)
    assert (
        back.measurement.timing == t
        and back.measurement.launches[0].timing == t
        and back.to_dict() == d
    )


def test_fixtures_are_there():
    assert sorted(H200_RUNS) == ["gemm-4096", "numba-quick", "rownorm-default"]


def _v1(info: dict) -> dict:
    return {"device": "d", "info": info, "roofs": [
        {"name": "hbm", "kind": "memory", "level": "dram", "value": 1e12, "source": "measured"}]}


def test_v1_failed_probes_as_list_or_dict_become_typed():
    as_list = read_roofset(_v1({"failed_probes": [{"probe": "mma_fp8_tc", "reason": "x"}]}))
    as_dict = read_roofset(_v1({"failed_probes": {"mma_fp8_tc": "x"}}))
    assert as_list.failed_probes == as_dict.failed_probes == [ProbeFailure("mma_fp8_tc", "x")]
    assert "failed_probes" not in as_list.info  # one place for each fact


def test_v1_datasheet_of_the_cpu_and_the_gpu_path_become_one_field():
    cpu = read_roofset(_v1({"datasheet": "unknown for CPUs"}))
    gpu = read_roofset(_v1({"datasheet_match": {"entry": "h200-sxm", "reason": "r"}}))
    assert cpu.datasheet == DatasheetMatch(None, "unknown for CPUs")
    assert gpu.datasheet == DatasheetMatch("h200-sxm", "r")


def test_roof_set_round_trip_is_version_2_and_unknown_versions_are_refused():
    rs = RoofSet("d", [Roof("hbm", "memory", 1e12, "measured", level="dram")],
                 info={"sweep": [1, 2]}, datasheet=DatasheetMatch("e", "r"),
                 failed_probes=[ProbeFailure("p", "why")], notes=["n"], elapsed_s=1.5)
    d = json.loads(json.dumps(rs.to_dict()))
    assert d["schema_version"] == 2
    assert read_roofset(d) == rs
    d["schema_version"] = 99
    with pytest.raises(ValueError, match="schema version 99"):
        read_roofset(d)


@pytest.mark.parametrize("path", H200_RUNS.values(), ids=lambda p: p.parent.name)
def test_every_real_results_file_loads_with_typed_roofs(path: Path):
    run = load_run(path)
    assert run.roofs is not None and run.roofs.datasheet.entry == "h200-sxm"
    assert all(isinstance(f, ProbeFailure) for f in run.roofs.failed_probes)
    assert run.cases and all(isinstance(c, CaseResult) for c in run.cases)


def test_the_real_hgemm_is_no_longer_held_against_the_fp32_roof(tmp_path: Path):
    run = load_run(H200_RUNS["gemm-4096"])
    lib16 = next(
        c for c in run.cases if c.identity.variant == "library" and c.identity.dtype == "fp16"
    )
    assert lib16.identity.precision == "fp16_tc" and lib16.identity.cores == "tensor"
    assert (
        lib16.roofline.limiting_roof.startswith("FP16 tensor")
        and 0.5 < lib16.roofline.efficiency < 1
    )
    assert lib16.measurement.timing.samples[:3] == json.loads(
        H200_RUNS["gemm-4096"].read_text())["cases"][-1]["timing"]["samples_s"][:3]
    assert any("schema version 1" in n for n in run.notes)
    text = report_mod.render(run)
    assert "781%" not in text
