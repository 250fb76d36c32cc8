"""report.html without a browser: self-contained, every section from the run's data, the
interactive plot's content, the compare page, and the page without Bokeh."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from roofbench.bench.present import report_html
from roofbench.bench.present.deltas import compare
from roofbench.bench.results import load_run
from testpaths import H200_RUNS, ROOT

H200 = [H200_RUNS[k] for k in sorted(H200_RUNS)]
CPU = sorted((ROOT / "results" / "amd-epyc").glob("*/results.json"))
bokeh = pytest.importorskip("bokeh", reason="bokeh is the report extra: pip install "
                            "roofbench[report]")


def _id(p: Path) -> str:
    return p.stem if p.stem != "results" else p.parent.name


def _no_remote(page: str) -> None:
    assert not re.search(r"<(script|link|img|iframe)[^>]+(src|href)=", page, re.I)
    assert "@import" not in page


@pytest.mark.parametrize("path", H200 + CPU, ids=_id)
def test_page_is_self_contained_and_has_every_section(path: Path):
    run = load_run(path)
    page = report_html.render_html(run)
    _no_remote(page)
    assert page.startswith("<!DOCTYPE html>") and page.rstrip().endswith("</html>")
    assert "Bokeh.embed.embed_items" in page and '"roofline"' in page  # BokehJS inlined
    # One section list: every section of report.md, in its order, after the roofline.
    from roofbench.bench.present.report import render

    md = [ln[3:] for ln in render(run).splitlines() if ln.startswith("## ")]
    assert re.findall(r"<h2>([^<]*)</h2>", page) == ["Roofline", *md]
    assert {"Roofs", "Cases", "Environment"} <= set(md)
    # Every roof is a row, with its evidence folded under it.
    for r in run.roofs.roofs:
        assert report_html._e(r.name) in page
    assert page.count("<details>") == sum(1 for r in run.roofs.roofs if r.evidence)
    for c in run.cases:
        if c.outcome.status != "ok":
            assert report_html._e(c.outcome.error)[:60] in page
    for c in run.cases:
        if c.outcome.status == "ok" and len(c.measurement.launches) > 1:
            size = "x".join(map(str, c.identity.size))
            assert (
                f"<h3>{c.identity.workload}/{c.identity.variant} {c.identity.dtype} {size}</h3>"
                in page
            )
    assert report_html._e(run.environment["host"]) in page


def _renderers(plot, prefix: str):
    return [r for r in plot.renderers if (r.name or "").startswith(prefix)]


def test_plot_has_one_point_per_valid_case_and_every_roof_in_the_legend():
    run = load_run(H200[0])
    plot = report_html.bokeh_roofline([run.roofs], [run.cases], "t")
    pts = _renderers(plot, "points:")
    assert sum(len(r.data_source.data["x"]) for r in pts) == sum(c.valid for c in run.cases)
    roofs = _renderers(plot, "roof:")
    assert len(roofs) == 24  # one line per (source, level/precision), theoretical included
    shown = {r.name for r in roofs if r.visible}
    used = {c.identity.precision for c in run.cases if c.valid}
    assert shown == {f"roof:{s}:{k}" for s in ("measured", "datasheet")
                     for k in ["dram", *used]}
    legend = plot.select_one({"name": "legend"})
    assert legend.click_policy == "hide"
    in_legend = {r.name for item in legend.items for r in item.renderers if r.name}
    assert {r.name for r in roofs + pts} <= in_legend
    hover = [t for t in plot.tools if t.__class__.__name__ == "HoverTool"]
    fields = " ".join(f for f, _ in hover[0].tooltips)
    for f in ("case", "size", "time", "FLOP/s", "B/s", "AI", "efficiency", "bound", "roof",
              "validated"):
        assert f in fields
    # each measured memory level keeps the static plot's dash, one per level
    dashes = {r.name.rsplit(":", 1)[1]: tuple(r.glyph.line_dash) for r in roofs
              if r.name.startswith("roof:measured:")}
    levels = [lv for lv in ("dram", "l2", "smem") if lv in dashes]
    assert len(levels) == 3 and len({dashes[lv] for lv in levels}) == 3, dashes
    assert plot.x_scale.__class__.__name__ == "LogScale"
    assert plot.y_scale.__class__.__name__ == "LogScale"


def test_every_level_style_has_a_bokeh_dash():
    """The l1 roof's matplotlib pattern (offset, on-off in line widths) becomes pixels; a
    named style its Bokeh name. No level falls back to solid unless it is solid."""
    from roofbench.bench.present.figure_data import LEVEL_STYLES

    assert report_html.bokeh_dash(LEVEL_STYLES["l1"]) == [10, 3, 2, 3, 2, 3]
    assert report_html.bokeh_dash("-.") == "dashdot" and report_html.bokeh_dash(":") == "dotted"
    got = {lv: str(report_html.bokeh_dash(st)) for lv, st in LEVEL_STYLES.items()}
    assert len(set(got.values())) == len(LEVEL_STYLES), got
    assert [lv for lv, d in got.items() if d == "solid"] == ["dram"]


def test_compare_page_has_speedups_and_joins():
    a, b = load_run(CPU[0]), load_run(CPU[1])
    deltas = compare(a, b)
    page = report_html.render_compare_html(a, b, deltas)
    _no_remote(page)
    for d in deltas:
        assert report_html._e(d.key) in page
        if d.speedup:
            assert f"{d.speedup:.3f}x" in page
    plot = report_html.bokeh_roofline([a.roofs, b.roofs], [a.cases, b.cases], "t",
                                      tags=["A: ", "B: "])
    joins = plot.select_one({"name": "joins"}).data_source.data
    both = {c.key for c in a.cases if c.valid} & {c.key for c in b.cases if c.valid}
    assert len(joins["x0"]) == len(both) == 20
    b_pts = [r for r in _renderers(plot, "points:B: ")]
    sp = [x for r in b_pts for x in r.data_source.data["speedup"]]
    assert len(sp) == 20 and all(x.endswith("x") for x in sp)
    hover = [t for t in plot.tools if t.__class__.__name__ == "HoverTool"][0]
    assert (report_html.RAW_SPEEDUP, "@speedup") in hover.tooltips
    names = {r.name for r in _renderers(plot, "points:")}
    assert any(n.startswith("points:A: ") for n in names)
    assert any(n.startswith("points:B: ") for n in names)


def test_without_bokeh_the_page_has_the_static_plot_and_says_so(monkeypatch):
    monkeypatch.setattr(report_html, "bokeh_available", lambda: False)
    page = report_html.render_html(load_run(CPU[0]))
    _no_remote(page)
    assert "<svg" in page and "Bokeh.embed" not in page
    assert report_html.MISSING_NOTE.split(":")[0] in page
    assert report_html.missing_note() == report_html.MISSING_NOTE
    monkeypatch.undo()
    assert report_html.missing_note() is None


def test_page_size_stays_near_bokehjs_alone():
    page = report_html.render_html(load_run(CPU[0]))
    assert 0.5e6 < len(page.encode()) < 2.5e6  # BokehJS core inlined, not every bundle


def test_hardware_intensity_has_its_own_hollow_group():
    from roofbench.records import LaunchCounters

    run = load_run(H200_RUNS["rownorm-default"])
    case = next(c for c in run.cases if c.identity.variant == "naive" and c.valid)
    for (
        la
    ) in case.measurement.launches:  # made-up counters for the test: 5% under the model's bytes
        la.counters = LaunchCounters(kernel=la.kernel, dram_read=la.bytes["dram"] * 0.95,
                                     dram_write=0.0)
    plot = report_html.bokeh_roofline([run.roofs], [run.cases], "t")
    hw = _renderers(plot, "hw:")
    assert len(hw) == 1 and hw[0].data_source.data["x"] == [
        pytest.approx(case.declaration.ai["dram"] / 0.95)
    ]
    assert "(ncu)" in hw[0].data_source.data["ai"][0]


def test_cli_run_report_compare_and_plot_write_the_pages(tmp_path: Path, capsys):
    """`run` writes report.html beside report.md; `report` rebuilds both; `compare` writes its
    page beside its plot; `plot --all-roofs` draws every roof."""
    import json

    from roofbench.bench.cli import main

    roofs = tmp_path / "roofs.json"
    roofs.write_text(json.dumps({"device": "test cpu", "roofs": [
        {"name": "dram", "kind": "memory", "level": "dram", "value": 2e10, "source": "measured"},
        {"name": "fp32", "kind": "compute", "precision": "fp32", "value": 2e11,
         "source": "measured"}]}))
    # two samples: the pages are checked, not a time
    assert main(["run", "--backend", "cpu", "--quick", "--samples", "2", "--workload", "l2norm",
                 "--dtype", "fp32", "--size", "100003", "--roofs", str(roofs),
                 "--out", str(tmp_path)]) == 0
    (run_dir,) = [p.parent for p in tmp_path.glob("*/*/results.json")]
    out = capsys.readouterr().out
    page = (run_dir / "report.html").read_text()
    assert f"html:    {run_dir / 'report.html'}" in out
    assert "Bokeh.embed.embed_items" in page and "l2norm/naive/fp32/100003" in page
    _no_remote(page)
    assert "pip install roofbench[report]" not in (run_dir / "report.md").read_text()

    assert main(["report", str(run_dir), "--out", str(tmp_path / "again.md")]) == 0
    assert (tmp_path / "again.html").read_text().count("<h2>") == page.count("<h2>")

    assert main(["compare", str(run_dir), str(run_dir), "--out", str(tmp_path / "cmp")]) == 0
    cmp = (tmp_path / "cmp.html").read_text()
    assert "Speedup of B over A" in cmp and "1.000x" in cmp and '"joins"' in cmp

    gemm = H200_RUNS["gemm-4096"]
    assert main(["plot", str(gemm), "--out", str(tmp_path / "used")]) == 0
    assert main(["plot", str(gemm), "--out", str(tmp_path / "all"), "--all-roofs"]) == 0
    assert "shared mem" in (tmp_path / "all.svg").read_text()
    assert "shared mem" not in (tmp_path / "used.svg").read_text()


def test_report_md_says_when_the_interactive_plot_is_missing(tmp_path: Path, monkeypatch):
    from roofbench.bench.cli import main

    monkeypatch.setattr(report_html, "bokeh_available", lambda: False)
    assert main(["report", str(CPU[0]), "--out", str(tmp_path / "r.md")]) == 0
    md = (tmp_path / "r.md").read_text()
    assert md.rstrip().endswith(report_html.MISSING_NOTE)
    assert "<svg" in (tmp_path / "r.html").read_text()
