"""`roofbench occupancy` on the CPU end to end: one case per Numba thread count, every level
validated and run at its count, the same FLOPs and bytes at each, the files and the stated
plateau; and its bad input (one line, exit 2)."""

from __future__ import annotations

import json
from pathlib import Path

import numba
import pytest
from flat_cases import flat_cases
from roof_sets import TEST_CPU
from roofbench.bench.cli import main
from roofbench.bench.present.occupancy_scan import WITHIN, scans
from roofbench.bench.results import load_run


@pytest.fixture(scope="module")
def scan_run(tmp_path_factory) -> tuple[int, Path, str]:
    out = tmp_path_factory.mktemp("occ")
    roofs = out / "roofs.json"
    roofs.write_text(json.dumps(TEST_CPU))
    import contextlib
    import io

    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):  # odd sizes: a row tail and a vector tail
        rc = main(["occupancy", "--workload", "gemv", "--dtype", "fp32", "--size", "257x131",
                   "--backend", "cpu", "--quick", "--roofs", str(roofs), "--out", str(out)])
    (res,) = out.glob("*/*/results.json")
    return rc, res.parent, buf.getvalue()


def test_every_level_is_a_valid_case_run_at_its_thread_count(scan_run):
    rc, folder, _ = scan_run
    assert rc == 0
    d = json.loads((folder / "results.json").read_text())
    rows = [c for c in flat_cases(d) if c["variant"] == "rows"]
    cores = numba.config.NUMBA_NUM_THREADS
    assert [c["occupancy_level"] for c in rows] == [
        {"axis": "threads", "value": t, "of": cores} for t in range(1, cores + 1)]
    for c in rows:
        assert c["status"] == "ok" and c["valid"], c["error"]
        assert c["extra"]["numba_threads"] == c["occupancy_level"]["value"]
        assert c["rel_error"] <= c["tolerance"]
    # The same counted work at every level: one intensity, one column on the roofline.
    assert len({(c["flops"], c["bytes"]["dram"], c["ai"]["dram"]) for c in rows}) == 1
    assert rows[0]["flops"] == 2 * 257 * 131
    assert rows[0]["bytes"]["dram"] == 4 * (257 * 131 + 131 + 257)


def test_a_library_variant_is_not_scanned_and_says_why(scan_run):
    _, folder, _ = scan_run
    d = json.loads((folder / "results.json").read_text())
    (lib,) = [c for c in flat_cases(d) if c["variant"] == "library"]
    assert lib["status"] == "unsupported" and "thread pool of its own" in lib["error"]
    assert "occupancy_level" not in lib


def test_the_files_and_the_stated_plateau(scan_run):
    _, folder, printed = scan_run
    names = {p.name for p in folder.iterdir()}
    assert {"results.json", "roofline.png", "occupancy.png", "occupancy.svg", "report.md",
            "report.html"} <= names
    run = load_run(folder)
    (s,) = scans(run)
    best = max(c.roofline.bytes_per_s["dram"] for c in s.valid)
    first = next(c for c in s.valid if c.roofline.bytes_per_s["dram"] >= (1 - WITHIN) * best)
    assert s.reached() is first
    lv = first.identity.occupancy_level
    md = (folder / "report.md").read_text()
    stated = f"The plateau is reached at {lv.value} of {lv.of} threads"
    assert "## Occupancy scan" in md and stated in md and stated in printed
    assert "FLOPs and bytes are identical at every level." in md
    assert "![achieved DRAM bandwidth against occupancy](occupancy.png)" in md
    page = (folder / "report.html").read_text()  # the figure inlined: one page
    assert '<figure aria-label="achieved DRAM bandwidth against occupancy"><svg' in page
    # Each level is its own point on the roofline (the key names its level).
    assert all(c.key.endswith(f"@{c.identity.occupancy_level.tag}") for c in s.levels)


def test_without_a_workload_it_is_one_line_and_exit_2(capsys):
    with pytest.raises(SystemExit) as e:
        main(["occupancy", "--backend", "cpu"])
    err = capsys.readouterr().err
    assert e.value.code == 2 and "--workload" in err and len(err.strip().splitlines()) == 1


@pytest.mark.parametrize("args, says", [
    (["--workload", "nope"], "unknown workload"),
    (["--workload", "gemv", "--size", "0x4"], "positive"),
    (["--workload", "gemv", "--dtype", "fp7"], "unknown dtype"),
])
def test_bad_input_is_one_line_and_exit_2(args, says, capsys, tmp_path):
    roofs = tmp_path / "roofs.json"
    roofs.write_text(json.dumps(TEST_CPU))
    rc = main(["occupancy", *args, "--backend", "cpu", "--roofs", str(roofs),
               "--out", str(tmp_path)])
    err = capsys.readouterr().err
    assert rc == 2 and says in err and "Traceback" not in err
    assert len(err.strip().splitlines()) == 1


def test_bad_names_are_refused_before_the_roofs_are_measured(monkeypatch, capsys, tmp_path):
    import roofbench.bench.cli.run as occ  # occupancy runs through run.run_session

    def no_roofs(*a, **k):
        raise AssertionError("roofs measured before the selection was checked")

    monkeypatch.setattr(occ, "roofs_with_progress", no_roofs)
    assert main(["occupancy", "--workload", "gemv", "--variant", "nope", "--backend", "cpu",
                 "--out", str(tmp_path)]) == 2
    assert "unknown variant" in capsys.readouterr().err
