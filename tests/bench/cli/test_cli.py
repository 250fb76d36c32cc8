"""The CLI end to end on small sizes, and every bad input: one line, exit 2, no traceback."""

from __future__ import annotations

import json
import statistics
import subprocess
import sys
from pathlib import Path

import pytest
from flat_cases import flat_cases
from patience import patience
from roof_sets import write_roofs
from roofbench.bench.cli import main
from roofbench.bench.results import load_run

SMALL = ["--backend", "cpu", "--quick"]


def run_cli(args, capsys):
    rc = main(args)
    out, err = capsys.readouterr()
    return rc, out, err


@pytest.fixture(scope="module")
def one_run(tmp_path_factory) -> Path:
    """One small end-to-end run shared by the tests that read its files."""
    out = tmp_path_factory.mktemp("results")
    roofs = write_roofs(out / "roofs.json")
    rc = main(["run", *SMALL, "--workload", "l2norm", "--dtype", "fp32", "--size", "100003",
               "--roofs", str(roofs), "--out", str(out)])
    assert rc == 0
    (run_json,) = out.glob("*/*/results.json")
    return run_json.parent


def test_run_writes_every_file(one_run: Path):
    names = {p.name for p in one_run.iterdir()}
    assert {"results.json", "results.csv", "roofline.png", "roofline.svg",
            "report.md"} <= names
    assert not [n for n in names if n.endswith(".tmp")]


def test_results_json_holds_what_reports_need(one_run: Path):
    d = json.loads((one_run / "results.json").read_text())
    assert d["schema"] == "roofbench.results" and d["schema_version"] == 6
    assert d["interrupted"] is False and d["roofs"]["schema_version"] == 2
    assert d["command"][0] == "roofbench" and "environment" in d and d["roofs"]["roofs"]
    by_variant = {c["variant"]: c for c in flat_cases(d)}
    naive, fused = by_variant["naive"], by_variant["fused"]
    assert naive["flops"] == 3 * 100003 and naive["bytes"]["dram"] == 36 * 100003
    assert fused["ai"]["dram"] == pytest.approx(0.25)
    for c in (naive, fused):
        assert c["valid"] and c["status"] == "ok"
        assert len(c["timing"]["samples_s"]) == c["timing"]["n"]
        assert c["median_s"] > 0 and c["efficiency"] > 0 and c["bound"] == "memory"
    assert len(naive["launches"]) == 4 and all(la["timing"] for la in naive["launches"])
    for c in (naive, fused):  # where the case spent its time, phase by phase
        assert {"inputs", "prepare", "validate", "time"} <= set(c["phases"])
        assert all(v >= 0 for v in c["phases"].values())
    assert "time_launches" in naive["phases"] and "time_launches" not in fused["phases"]


def test_report_states_fusion_result_and_convention(one_run: Path):
    text = (one_run / "report.md").read_text()
    assert "## Fusion" in text and "naive -> fused" in text and "3.00x" in text
    assert "sqrt not counted" in text
    assert "## Roofs" in text and "## Environment" in text


def test_csv_has_one_row_per_case(one_run: Path):
    import pandas as pd

    df = pd.read_csv(one_run / "results.csv")
    assert len(df) == 2 and set(df["variant"]) == {"naive", "fused"}


def test_plot_and_report_rebuild_from_results_alone(one_run: Path, tmp_path, capsys):
    rc, out, _ = run_cli(["plot", str(one_run), "--out", str(tmp_path / "again")], capsys)
    assert rc == 0 and (tmp_path / "again.png").stat().st_size > 10_000
    rc, out, _ = run_cli(["report", str(one_run / "results.json"), "--out",
                          str(tmp_path / "r.md")], capsys)
    assert rc == 0
    assert (tmp_path / "r.md").read_text() == (one_run / "report.md").read_text()


def _tighten(node) -> None:
    """Every timing's samples within 0.1% of their median: a run quiet enough to judge."""
    if isinstance(node, dict):
        if node.get("samples_s"):
            n, m = len(node["samples_s"]), statistics.median(node["samples_s"])
            q = n // 4  # a quarter 0.1% low, a quarter 0.1% high, the middle at the median
            node["samples_s"] = [m * 0.999] * q + [m] * (n - 2 * q) + [m * 1.001] * q
        for v in node.values():
            _tighten(v)
    elif isinstance(node, list):
        for v in node:
            _tighten(v)


def test_compare_two_runs(one_run: Path, tmp_path, capsys):
    # The run against itself: ratio 1, but its own noise decides same or uncertain (a quick
    # run on a loaded CI machine is too noisy to exclude a 5% change, and says so).
    rc, out, _ = run_cli(["compare", str(one_run), str(one_run), "--out",
                          str(tmp_path / "cmp")], capsys)
    assert rc == 0 and "1.000x" in out
    assert "same" in out or "too noisy" in out
    assert (tmp_path / "cmp.png").exists()
    # The same run with its samples quiet: the interval excludes 5%, so `same`.
    quiet = tmp_path / "quiet"
    quiet.mkdir()
    d = json.loads((one_run / "results.json").read_text())
    _tighten(d)
    (quiet / "results.json").write_text(json.dumps(d))
    rc, out, err = run_cli(["compare", str(quiet), str(quiet), "--out", str(tmp_path / "q")],
                           capsys)
    assert rc == 0, err
    assert "1.000x" in out and "same" in out and "uncertain" not in out


def test_list_names_kernels_variants_and_backends(capsys):
    rc, out, _ = run_cli(["list"], capsys)
    assert rc == 0
    for word in ("vector_add", "l2norm", "rownorm", "gemm", "naive", "fused", "onepass", "cpu"):
        assert word in out
    if "cuda: available" not in out:  # the reason names the pip extra, brackets intact
        assert "roofbench[cuda13]" in out


@pytest.mark.parametrize("args,needle", [
    (["run", "--workload", "nope"], "unknown workload 'nope'; choose from: vector_add"),
    (["run", "--workload", "l2norm", "--variant", "nope"], "unknown variant 'nope'"),
    (["run", "--dtype", "fp7"], "unknown dtype 'fp7'; choose from"),
    (["run", "--backend", "nope"], "unknown backend 'nope'; choose from: auto, cpu"),
    (["run", "--size", "0"], "size must be positive"),
    (["run", "--size", "-5"], "size must be positive"),
    (["run", "--size", "12q"], "malformed size"),
    (["run", "--workload", "vector_add", "--size", "1099511627776"], "more than"),
    (["run", "--workload", "gemm", "--size", "100"], "3 dimension(s)"),
])
def test_bad_input_is_one_line_and_exit_2(args, needle, capsys, roofs_file):
    if "--backend" not in args:
        args = args + ["--backend", "cpu"]
    rc, out, err = run_cli(args + ["--roofs", str(roofs_file)], capsys)
    assert rc == 2
    assert needle in err
    assert len(err.strip().splitlines()) == 1 and "Traceback" not in err


def test_corrupt_roofs_file_is_named(tmp_path, capsys):
    bad = tmp_path / "roofs.json"
    bad.write_text("{not json")
    rc, _, err = run_cli(["run", *SMALL, "--roofs", str(bad), "--out", str(tmp_path)], capsys)
    assert rc == 2 and str(bad) in err and len(err.strip().splitlines()) == 1
    bad.write_text(json.dumps({"device": "x", "roofs": [{"kind": "memory"}]}))
    rc, _, err = run_cli(["run", *SMALL, "--roofs", str(bad), "--out", str(tmp_path)], capsys)
    assert rc == 2 and str(bad) in err


@pytest.mark.parametrize("content", ["{broken", json.dumps({"schema": "other"}),
                                     json.dumps({"schema": "roofbench.results",
                                                 "schema_version": 99})])
def test_corrupt_or_wrong_schema_results_are_named(tmp_path, capsys, content):
    p = tmp_path / "results.json"
    p.write_text(content)
    for cmd in (["plot", str(p)], ["report", str(p)], ["compare", str(p), str(p)]):
        rc, _, err = run_cli(cmd, capsys)
        assert rc == 2 and str(p) in err and len(err.strip().splitlines()) == 1


def test_missing_results_are_named(tmp_path, capsys):
    rc, _, err = run_cli(["report", str(tmp_path / "nothing")], capsys)
    assert rc == 2 and "no results at" in err


def test_unwritable_output_is_one_line(tmp_path, capsys, roofs_file):
    afile = tmp_path / "file"
    afile.write_text("x")
    rc, _, err = run_cli(["run", *SMALL, "--workload", "vector_add", "--roofs", str(roofs_file),
                          "--out", str(afile / "sub")], capsys)
    assert rc == 2 and "not a folder" in err
    rc, _, err = run_cli(["run", *SMALL, "--workload", "vector_add", "--roofs", str(roofs_file),
                          "--out", "/proc/roofbench-cannot-write"], capsys)
    assert rc == 3 and "not writable" in err and len(err.strip().splitlines()) == 1


def test_results_survive_an_interrupted_rewrite(one_run: Path, monkeypatch):
    """A crash while writing leaves the previous file whole, and no temp file behind."""
    from roofbench.bench import results as results_mod

    before = (one_run / "results.json").read_text()
    run = load_run(one_run)

    def boom(*a, **k):
        raise KeyboardInterrupt

    monkeypatch.setattr(results_mod.os, "fsync", boom)
    with pytest.raises(KeyboardInterrupt):
        results_mod.save_run(run, one_run)
    assert (one_run / "results.json").read_text() == before
    assert not list(one_run.glob(".*.tmp"))


def test_no_traceback_from_the_console_script(tmp_path):
    p = subprocess.run([sys.executable, "-m", "roofbench.bench.cli", "run", "--workload", "nope"],
                       capture_output=True, text=True, timeout=patience(120))
    assert p.returncode == 2
    assert "Traceback" not in p.stderr and "unknown workload" in p.stderr


@pytest.mark.parametrize("command, folder", [("model", "<stamp>-model-<script>"),
                                             ("trace", "<stamp>-trace-<name>")])
def test_out_says_the_folder_a_run_gets_without_it(command, folder):
    """argtypes.out_folder: each command that writes a run folder says its default."""
    from roofbench.bench.cli import build_parser

    sub = next(a for a in build_parser()._actions if a.choices and command in a.choices)
    (out,) = [a for a in sub.choices[command]._actions if "--out" in a.option_strings]
    assert out.metavar == "DIR" and out.help == f"output folder (default results/<device>/{folder})"
