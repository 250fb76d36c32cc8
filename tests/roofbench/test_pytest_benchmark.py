"""pytest-benchmark JSON files read as runs: the real files of tests/fixtures/pytest-benchmark
(written by pytest-benchmark with the roofline fixture active), their counts and samples as
stored, `report`/`plot`/`compare` on them, and the reader's own schema checks."""

from __future__ import annotations

import copy
import json
import statistics
from pathlib import Path

import pytest
from roofbench.bench.cli import main
from roofbench.bench.results import load_run
from roofbench.kernels.arrays import DTYPES
from testpaths import FIXTURES

from roofbench.pytest_benchmark import DTYPES as READER_DTYPES
from roofbench.pytest_benchmark import EXTRA_SCHEMA, is_pytest_benchmark, read_pytest_benchmark
from roofbench.readers import SchemaError

FIX = FIXTURES / "pytest-benchmark"
WITH_DATA = FIX / "numpy-benchmark-json.json"
NO_DATA = FIX / "numpy-saved-no-data.json"
KEYS = ["test_add/fp32/fp32/4194304", "test_add/fp64/fp64/4194304",
        "test_matmul/default/fp32/512x512"]


def raw(path: Path) -> dict:
    return json.loads(path.read_text())


def test_reader_knows_every_dtype():
    assert tuple(DTYPES) == READER_DTYPES


@pytest.mark.parametrize("path", [WITH_DATA, NO_DATA], ids=["json", "saved"])
def test_real_files_read_as_runs(path):
    d = raw(path)
    assert is_pytest_benchmark(d) and d["roofbench"]["schema"] == EXTRA_SCHEMA
    run = load_run(path)
    assert run.device == "AMD EPYC" and run.backend == "cpu"
    assert [c.key for c in run.cases] == KEYS
    assert run.roofs is not None and run.roofs.memory("dram") is not None
    assert "test_sum_without_counts" in run.notes[0]
    by_name = {e["name"]: e for e in d["benchmarks"]}
    for c, name in zip(run.cases, ["test_add[fp32]", "test_add[fp64]", "test_matmul"],
                       strict=True):
        e = by_name[name]
        assert (
            c.declaration.flops == e["extra_info"]["flops"]
            and c.declaration.bytes == e["extra_info"]["bytes"]
        )
        # compared with a reference only where the fixture stored its error
        assert c.outcome.checked == (e["extra_info"].get("rel_error") is not None)
        if "data" in e["stats"]:  # raw samples, exactly as stored
            assert c.measurement.timing.samples == e["stats"]["data"]
            assert c.measurement.median_s == statistics.median(e["stats"]["data"])
        else:
            assert c.measurement.timing is None and c.measurement.median_s == e["stats"]["median"]
        assert c.roofline.flop_per_s == c.declaration.flops / c.measurement.median_s
        bw = max(r.value for r in run.roofs.roofs if r.level == "dram")
        peak = run.roofs.compute(c.identity.precision).value
        assert c.roofline.attainable == pytest.approx(min(peak, bw * c.declaration.ai["dram"]))
        assert c.roofline.efficiency == pytest.approx(c.roofline.flop_per_s / c.roofline.attainable)
    assert (path is WITH_DATA) == all(c.measurement.timing for c in run.cases)


@pytest.mark.parametrize("path", [WITH_DATA, NO_DATA], ids=["json", "saved"])
def test_report_plot_and_compare_accept_the_file(path, tmp_path, capsys):
    assert main(["report", str(path), "--out", str(tmp_path / "r.md")]) == 0
    text = (tmp_path / "r.md").read_text()
    assert "test_matmul" in text and "AMD EPYC" in text
    assert (tmp_path / "r.html").exists()
    assert main(["plot", str(path), "--out", str(tmp_path / "p")]) == 0
    assert (tmp_path / "p.png").stat().st_size > 10_000
    assert main(["compare", str(path), str(path), "--fail-on", "slower:5%", "--out",
                 str(tmp_path / "c")]) == 0
    capsys.readouterr()
    # a saved file without stats.data holds medians alone: no interval, so `uncertain`
    # (never `same` on a median); with the raw samples the file against itself is `same`
    # where its interval lies within 5%, `uncertain` (the interval named) where wider
    cases = json.loads((tmp_path / "c.json").read_text())["cases"]
    assert len(cases) == 3 and all(c["ratio"] == 1.0 for c in cases)
    for c in cases:
        if path != WITH_DATA:
            assert c["verdict"] == "uncertain" and "no interval" in c["reason"], c
        elif c["ratio_lo"] >= 1 / 1.05 and c["ratio_hi"] <= 1.05:
            assert c["verdict"] == "same", c
        else:
            assert c["verdict"] == "uncertain" and "wider than the threshold" in c["reason"], c


def test_compare_gates_a_planted_slowdown_in_a_pytest_benchmark_file(tmp_path, capsys):
    d = raw(WITH_DATA)
    slow = copy.deepcopy(d)
    e = next(e for e in slow["benchmarks"] if e["name"] == "test_add[fp64]")
    e["stats"]["data"] = [x * 1.25 for x in e["stats"]["data"]]
    (tmp_path / "slow.json").write_text(json.dumps(slow))
    rc = main(["compare", str(WITH_DATA), str(tmp_path / "slow.json"), "--fail-on",
               "slower:5%", "--out", str(tmp_path / "c")])
    assert rc == 1 and "cpu/test_add/fp64/fp64/4194304" in capsys.readouterr().out
    # without raw samples nothing is bounded: the slowdown is uncertain, and so are the
    # unchanged entries (a median alone is never `same`); --fail-on slower:5% passes
    nod = raw(NO_DATA)
    slow = copy.deepcopy(nod)
    next(e for e in slow["benchmarks"] if e["name"] == "test_add[fp64]")["stats"]["median"] *= 2
    (tmp_path / "slow2.json").write_text(json.dumps(slow))
    assert main(["compare", str(NO_DATA), str(tmp_path / "slow2.json"), "--fail-on",
                 "slower:5%", "--out", str(tmp_path / "c2")]) == 0
    cmp = json.loads((tmp_path / "c2.json").read_text())
    assert cmp["counts"] == {"uncertain": 3}
    assert all("no raw samples" in c["reason"] for c in cmp["cases"]), cmp["cases"]


def test_hand_written_extra_info_and_the_calibration_cache():
    """An entry whose extra_info a user wrote (flat byte count, no roofbench key): the device
    comes from pytest-benchmark's machine_info, the roofs from the lookup it is given."""
    d = raw(NO_DATA)
    del d["roofbench"]
    for e in d["benchmarks"]:
        if "flops" in e["extra_info"]:
            e["extra_info"] = {"flops": e["extra_info"]["flops"],
                               "bytes": e["extra_info"]["bytes"]["dram"],
                               "dtype": e["extra_info"]["dtype"]}
    asked = []
    run = read_pytest_benchmark(d, lambda dev: asked.append(dev) or None)
    assert asked == [d["machine_info"]["cpu"]["brand_raw"]] == [run.device]
    assert run.roofs is None and all(c.roofline.attainable is None for c in run.cases)
    assert not any(c.outcome.checked for c in run.cases)  # timed only: the report says so
    assert [c.key for c in run.cases] == [k.rsplit("/", 1)[0] + "/" for k in KEYS]  # no size


@pytest.mark.parametrize("edit,needle", [
    (lambda e, d: e["extra_info"].update(flops="many"), "flops must be a non-negative whole"),
    (lambda e, d: e["extra_info"].update(flops=-4), "flops must be a non-negative whole"),
    (lambda e, d: e["extra_info"].update(bytes={"dram": -1}), "non-negative whole"),
    (lambda e, d: e["extra_info"].update(bytes=0), "bytes must be a positive whole"),
    (lambda e, d: e["extra_info"].update(dtype="fp99"), "unknown dtype 'fp99'"),
    (lambda e, d: e["extra_info"].update(size="big"), "size must be a list"),
    (lambda e, d: e["stats"].update(median=float("nan")), "stats.median must be a positive"),
    (lambda e, d: e["stats"].update(median=-1.0), "stats.median must be a positive"),
    (lambda e, d: e["stats"]["data"].__setitem__(0, float("nan")), "stats.data must be"),
    (lambda e, d: e["stats"].update(data=[]), "stats.data must be"),
    (lambda e, d: d.update(roofbench={"schema": "other"}), "is not 'roofbench.pytest"),
])
def test_malformed_entries_are_one_line_errors(edit, needle, tmp_path, capsys):
    d = raw(WITH_DATA)
    edit(next(e for e in d["benchmarks"] if e["name"] == "test_matmul"), d)
    with pytest.raises(SchemaError, match=needle.replace("(", r"\(")):
        read_pytest_benchmark(d)
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps(d))
    assert main(["report", str(bad), "--out", str(tmp_path / "r.md")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and str(bad) in err and needle.split("(")[0][:12] in err
    assert "Traceback" not in err


def test_not_a_pytest_benchmark_file():
    assert not is_pytest_benchmark({"benchmarks": []})  # no machine_info
    assert not is_pytest_benchmark({"schema": "roofbench.results", "benchmarks": [],
                                    "machine_info": {}})
    with pytest.raises(SchemaError, match="not a pytest-benchmark file"):
        read_pytest_benchmark({"benchmarks": "x"})
