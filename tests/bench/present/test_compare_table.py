"""compare.html's table labels the raw medians apart from the ratio the verdict judged, with
the same columns and figures as the terminal's table (issue 57: "speedup (A/B)" beside raw
times read as a contradiction when the judged ratio was roof-normalised)."""

from __future__ import annotations

import re
from html import unescape

import pytest
from roofbench.bench.cli.compare import table
from roofbench.bench.present import report_html
from roofbench.bench.present.deltas import COLUMNS, deltas
from roofbench.bench.results import load_run
from testpaths import ROOT

from roofbench.gate import CaseVerdict, Comparison, RunRef
from roofbench.records import RunResult

CPU = sorted((ROOT / "results" / "amd-epyc").glob("*/results.json"))
pytest.importorskip("bokeh", reason="bokeh is the report extra: pip install roofbench[report]")


def _cmp() -> tuple[RunResult, RunResult, Comparison]:
    a, b = load_run(CPU[0]), load_run(CPU[1])
    # raw medians 77.467 ms -> 89.760 ms (B slower as measured), judged on roof-normalised
    # times 1.234x faster: the case of the issue
    v = CaseVerdict("cpu/add/default/fp32/1", "faster", median_a=0.077467, median_b=0.089760,
                    ratio=1 / 1.234, ratio_lo=0.70, ratio_hi=0.90, n_a=30, n_b=30,
                    reason="the memory got slower", normalised=True)
    return a, b, Comparison(RunRef.of(a, "a"), RunRef.of(b, "b"), 0.05, [v])


def _html_table(page: str, heading: str) -> tuple[list[str], list[list[str]]]:
    part = page[page.index(heading):]
    part = part[:part.index("</table>")]
    head = [unescape(h) for h in re.findall(r"<th>(.*?)</th>", part)]
    rows = [[unescape(c) for c in re.findall(r"<td>(.*?)</td>", r)]
            for r in re.findall(r"<tr>(.*?)</tr>", part.split("<tbody>")[1])]
    return head, rows


def test_the_page_labels_raw_medians_and_the_judged_ratio_as_the_terminal_does():
    a, b, cmp = _cmp()
    page = report_html.render_compare_html(a, b, deltas(cmp))
    head, rows = _html_table(page, "Speedup of B over A, case by case")
    assert head == list(COLUMNS)
    assert "speedup (A/B)" not in page  # the unlabelled column is gone
    assert rows == [["cpu/add/default/fp32/1", "77.467 ms", "89.760 ms",
                     "roof-normalised medians", "0.810 [0.700, 0.900]", "1.234x",
                     "faster (the memory got slower)"]]
    assert "raw median: the times as measured" in unescape(page)
    # the terminal's table: the same columns, the same cells
    t = table(cmp)
    assert [c.header for c in t.columns] == list(COLUMNS)
    assert [[str(c._cells[0]) for c in t.columns]] == rows


def test_the_plot_hover_names_its_speedup_raw():
    a, b, _ = _cmp()
    plot = report_html.bokeh_roofline([a.roofs, b.roofs], [a.cases, b.cases],
                                      "t", tags=["A: ", "B: "])
    hover = [t for t in plot.tools if t.__class__.__name__ == "HoverTool"][0]
    labels = [name for name, _ in hover.tooltips]
    assert "speedup A/B (raw medians)" in labels and "speedup (A/B)" not in labels
