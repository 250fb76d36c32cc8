"""`roofbench run|bench|occupancy --no-figures`: the data (results.json, results.csv) and
report.md, no figure and no report.html; report.md and the command's last lines say how to draw
them, and `roofbench plot` / `roofbench report` draw exactly what was left out, from
results.json alone (docs/measuring.md, "What a run writes")."""

from __future__ import annotations

from pathlib import Path

import pytest
from roofbench.bench.cli import main

# The data a run without figures still writes; what it leaves to `plot` and `report`.
DATA = {"results.json", "results.csv", "report.md"}
FIGURES = {"roofline.png", "roofline.svg", "report.html"}
CASE = ["--backend", "cpu", "--quick", "--samples", "2", "--workload", "vector_add",
        "--dtype", "fp32", "--size", "4k"]


def _one_run(out: Path) -> Path:
    (res,) = out.glob("*/*/results.json")
    return res.parent


def _says_how_to_draw(text: str, run: Path) -> None:
    assert f"`roofbench plot {run}`" in text and f"`roofbench report {run}`" in text
    assert "--no-figures" in text


@pytest.mark.parametrize("command", ["run", "bench"])
def test_no_figures_writes_the_data_and_report_md_only(tmp_path, roofs_file, capsys, command):
    rc = main([command, *CASE, "--no-figures", "--roofs", str(roofs_file),
               "--out", str(tmp_path)])
    assert rc == 0
    run = _one_run(tmp_path)
    assert {p.name for p in run.iterdir()} == DATA  # no PNG, SVG or HTML, no temporary file
    (note,) = [ln for ln in (run / "report.md").read_text().splitlines()
               if "figures not drawn" in ln]
    assert note.startswith("> ")  # a quote under the report's header
    _says_how_to_draw(note, run)
    out = capsys.readouterr().out
    assert f"report:  {run / 'report.md'}" in out and "html:" not in out
    _says_how_to_draw(out.splitlines()[-2 if command == "bench" else -1], run)


def test_report_and_plot_draw_what_no_figures_left_out(tmp_path, roofs_file):
    assert main(["run", *CASE, "--no-figures", "--roofs", str(roofs_file),
                 "--out", str(tmp_path)]) == 0
    run = _one_run(tmp_path)
    md = (run / "report.md").read_text()
    assert main(["report", str(run)]) == 0
    again = (run / "report.md").read_text()
    (note,) = [ln for ln in md.splitlines(keepends=True) if "figures not drawn" in ln]
    assert "figures not drawn" not in again  # the page is there now: the line goes
    assert again.startswith(md.replace(note + "\n", ""))  # the same report, less that line
    assert main(["plot", str(run)]) == 0
    assert {p.name for p in run.iterdir()} == DATA | FIGURES
    assert all((run / f).stat().st_size > 0 for f in FIGURES)


def test_occupancy_without_figures_and_its_figure_drawn_after(tmp_path, roofs_file, capsys):
    rc = main(["occupancy", *CASE, "--no-figures", "--roofs", str(roofs_file),
               "--out", str(tmp_path)])
    assert rc == 0
    run = _one_run(tmp_path)
    assert {p.name for p in run.iterdir()} == DATA
    _says_how_to_draw(capsys.readouterr().out.splitlines()[-1], run)
    assert main(["plot", str(run)]) == 0
    drawn = {p.name for p in run.iterdir()} - DATA
    assert drawn == {"roofline.png", "roofline.svg", "occupancy.png", "occupancy.svg"}



def test_a_stop_while_report_md_is_written_is_recorded_and_it_is_written_again(
        tmp_path, roofs_file, monkeypatch):
    """As with figures (test_hostile_user): the stop is the run's, in the report phase, exit
    130; report.md is written once more, and still no figure."""
    from roofbench.bench.present import outputs
    from roofbench.bench.results import load_run

    real, calls = outputs.write_report_md, []

    def stopped_once(run, folder):
        calls.append(folder)
        if len(calls) == 1:
            raise KeyboardInterrupt
        return real(run, folder)
    monkeypatch.setattr(outputs, "write_report_md", stopped_once)
    assert main(["run", *CASE, "--no-figures", "--roofs", str(roofs_file),
                 "--out", str(tmp_path)]) == 130
    run = _one_run(tmp_path)
    rec = load_run(run / "results.json")
    assert rec.interrupted and rec.stop is not None and rec.stop.phase == "report"
    assert len(calls) == 2 and {p.name for p in run.iterdir()} == DATA
