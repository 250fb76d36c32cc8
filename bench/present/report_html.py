"""report.html: one self-contained page (no network at view time) built from results.json.

The interactive roofline is drawn with Bokeh, its JavaScript inlined (about 1.3 MB a page):
hover a point for its numbers, click a legend entry to hide a roof or a group, wheel/box zoom,
log axes. Below it every section of report.md (sections.SECTIONS, rendered as HTML; the roofs
table adds each roof's evidence). ``render_compare_html`` does the same for two runs, with each
case's speedup and the two points of a case joined.

Bokeh is the optional extra ``roofbench[report]``. Without it the page is still written, with
the static roofline inlined as SVG and a note saying how to get the interactive one.
"""

from __future__ import annotations

import html
import io
import re
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from roofbench.bench.present.deltas import CAPTION, Delta, cells

from roofbench.records import CaseResult, RunResult
from roofbench.roof_records import Roof, RoofSet
from roofbench.roofline import LEVEL_LABELS
from roofbench.units import duration, si

from .blocks import Image, Renderer, Section, Table, guarded
from .figure_data import (
    FAINT,
    LEVEL_STYLES,
    PREC_COLORS,
    best_roofs,
    frame,
    point_key,
    point_xy,
    ridge_points,
    select_roofs,
    valid_points,
)
from .sections import (
    SECTIONS,
    environment_section,
    fusion_section,
    not_measured_section,
    roofs_section,
)

if TYPE_CHECKING:
    from matplotlib.typing import LineStyleType

MISSING_NOTE = ("report.html has a static roofline only: `pip install roofbench[report]` "
                "(Bokeh) for the interactive one.")
# matplotlib marker (Workload.marker) -> Bokeh's name for the same shape
BOKEH_MARKERS = {"o": "circle", "s": "square", "D": "diamond", "^": "triangle", "v":
                 "inverted_triangle", "x": "x", "*": "star", "+": "cross", "h": "hex"}
BOKEH_DASH: dict[LineStyleType, str] = {"-": "solid", "-.": "dashdot", ":": "dotted",
                                         "--": "dashed"}


def bokeh_dash(style: LineStyleType, width: float = 2) -> str | list[int]:
    """Bokeh's dash for a matplotlib line style: a named one, or an (offset, on-off) pattern
    in line widths (the l1 roof's) turned into pixels at ``width``."""
    if isinstance(style, tuple):
        _, seq = style
        return [max(1, round(x * width)) for x in seq or ()] or "solid"
    return BOKEH_DASH.get(style, "solid")


def bokeh_available() -> bool:
    try:
        import bokeh  # noqa: F401
    except ImportError:
        return False
    return True


def missing_note() -> str | None:
    """One line for report.md when the interactive plot cannot be drawn, else None."""
    return None if bokeh_available() else MISSING_NOTE


# -- data for the plot ----------------------------------------------------------------------

def _case_row(c: CaseResult, tag: str = "") -> dict[str, Any]:
    i, r = c.identity, c.roofline
    return {
        "x": c.declaration.ai["dram"], "y": r.flop_per_s, "run": tag.strip(": "),
        "workload": i.workload, "variant": i.variant, "dtype": i.dtype,
        "size": "x".join(map(str, i.size)), "time": duration(c.measurement.median_s),
        "flops": si(r.flop_per_s, "FLOP/s"), "bps": si(r.bytes_per_s.get("dram"), "B/s"),
        "ai": f"{c.declaration.ai['dram']:.4g} FLOP/B",
        "eff": f"{r.efficiency:.1%}" if r.efficiency else "-", "bound": r.bound or "-",
        "roof": r.limiting_roof or "-", "precision": i.precision,
        "checked": "yes" if c.outcome.checked else "no: no reference given",
        "color": PREC_COLORS.get(i.precision, "gray"),
        "key": _key(c),
    }


def _valid(cases: list[CaseResult]) -> list[CaseResult]:
    keys = {(p.key, p.size) for p in valid_points(cases)}
    return [c for c in cases if point_key(c) in keys]


TOOLTIPS = [("case", "@run @workload/@variant @dtype"), ("size", "@size"), ("time", "@time"),
            ("FLOP/s", "@flops"), ("B/s", "@bps"), ("AI", "@ai"), ("efficiency", "@eff"),
            ("bound", "@bound"), ("roof", "@roof"), ("validated", "@checked")]
# A compare plot's hover: the raw medians' ratio, named so (the verdict's ratio, which may be
# roof-normalised, is in the page's table under "speedup A/B judged").
RAW_SPEEDUP = "speedup A/B (raw medians)"


def _roof_label(r: Roof, tag: str = "") -> str:
    if r.kind == "memory":
        name = f"{LEVEL_LABELS.get(r.key, r.key)} {si(r.value, 'B/s')}"
    else:
        name = f"{r.name} {si(r.value, 'FLOP/s')}"
    return f"{tag}{name}" + ("" if r.source == "measured" else f" ({r.source})")


def bokeh_roofline(roofsets: list[RoofSet], runs: list[list[CaseResult]], title: str,
                   tags: list[str] | None = None):
    """The interactive roofline: every roof (those the points use visible, the others one
    legend click away), the points grouped by run and workload, naive -> fused arrows, and for
    two runs a segment joining the two points of each case."""
    from bokeh.models import HoverTool
    from bokeh.models.annotations import Legend

    tags = tags or [""] * len(runs)
    cases = [_valid(cs) for cs in runs]
    rs_for = [roofsets[min(i, len(roofsets) - 1)] if roofsets else None
              for i in range(len(runs))]
    pts = [valid_points(cs, roofs=rs) for cs, rs in zip(runs, rs_for, strict=True)]
    xlim, ylim = frame(roofsets, [p for ps in pts for p in ps])
    p = _bokeh_frame(title, xlim, ylim)
    items = []
    for i, rs in enumerate(roofsets):
        if i > 0 and rs.device == roofsets[0].device:
            continue
        tag = tags[i] if len({r.device for r in roofsets}) > 1 else ""
        own = [pt for j, ps in enumerate(pts) if rs_for[j] is rs for pt in ps]
        items += _bokeh_roofs(p, rs, own, tag, xlim, ylim)
    point_renderers = []
    speedups = _speedups(cases[0], cases[1]) if len(cases) == 2 else {}
    for i, cs in enumerate(cases):
        tag = tags[i] if len(runs) > 1 else ""
        rends, its = _bokeh_points(p, cs, pts[i], tag, speedups, fill_alpha=1.0 if i == 0
                                   else 0.6)
        point_renderers += rends
        items += its
    if len(cases) == 2:
        items += _bokeh_joins(p, cases[0], cases[1])
    tips = TOOLTIPS + ([(RAW_SPEEDUP, "@speedup")] if len(cases) == 2 else [])
    p.add_tools(HoverTool(renderers=point_renderers, tooltips=tips))
    legend = Legend(items=items, click_policy="hide", label_text_font_size="8pt",
                    spacing=0, name="legend")
    p.add_layout(legend, "right")
    return p


def _bokeh_frame(title: str, xlim, ylim):
    """The empty log-log Bokeh figure over the device's frame."""
    from bokeh.plotting import figure

    return figure(title=title, x_axis_type="log", y_axis_type="log", x_range=xlim,
                  y_range=ylim, width=1400, height=700,
                  tools="pan,wheel_zoom,box_zoom,reset,save", active_scroll="wheel_zoom",
                  x_axis_label="arithmetic intensity (FLOP / byte of DRAM traffic)",
                  y_axis_label="performance (FLOP/s)", name="roofline")


def _bokeh_roofs(p, rs: RoofSet, own: list, tag: str, xlim, ylim) -> list:
    """Every roof of one device as a line (a ridge dot on each compute roof); those its points
    use (select_roofs) visible, the others hidden. Returns their legend items."""
    from bokeh.models.annotations import LegendItem

    (x0, x1), (_y0, y1) = xlim, ylim
    shown_c, shown_m = select_roofs(rs, own, all_roofs=False)
    shown = {id(r) for r in shown_c + shown_m}
    comp, mem = best_roofs(rs, all_roofs=True)
    tops: dict[str, float] = {}
    for c in comp:
        tops[c.source] = max(tops.get(c.source, 0.0), c.value)
    items = []
    for m in mem:
        faint = m.source not in ("measured", "user")
        top = tops.get(m.source, max(tops.values(), default=y1))
        xe = min(x1, top / m.value)
        r = p.line([x0, xe], [m.value * x0, m.value * xe], line_color="black",
                   line_width=2, line_alpha=FAINT if faint else 1.0,
                   line_dash="dashed" if faint else bokeh_dash(LEVEL_STYLES.get(m.key, "-")),
                   name=f"roof:{m.source}:{m.level}")
        r.visible = id(m) in shown
        items.append(LegendItem(label=_roof_label(m, tag), renderers=[r]))
    for c, ridge in ridge_points(rs, comp):
        faint = c.source not in ("measured", "user")
        color = PREC_COLORS.get(c.key, "gray")
        r = p.line([max(ridge, x0), x1], [c.value, c.value], line_color=color,
                   line_width=2, line_alpha=FAINT if faint else 1.0,
                   line_dash="dashed" if faint else "solid",
                   name=f"roof:{c.source}:{c.precision}")
        dot = p.scatter([ridge], [c.value], marker="circle", size=7, fill_color="white",
                        line_color=color, line_alpha=FAINT if faint else 1.0)
        r.visible = dot.visible = id(c) in shown
        items.append(LegendItem(label=_roof_label(c, tag) + f", ridge {ridge:.3g}",
                                renderers=[r, dot]))
    return items


def _speedups(a: list[CaseResult], b: list[CaseResult]) -> dict[str, str]:
    """B's raw speedup over A (the medians as measured) per case key, on both points."""
    out = {}
    in_a = {_key(c): c for c in a}
    for c in b:
        ca = in_a.get(_key(c))
        if ca is not None and ca.measurement.median_s and c.measurement.median_s:
            out[_key(c)] = f"{ca.measurement.median_s / c.measurement.median_s:.3f}x"
    return out


def _bokeh_points(p, cs: list[CaseResult], pts: list, tag: str, speedups: dict[str, str],
                  fill_alpha: float) -> tuple[list, list]:
    """One run's points (one glyph per workload), their hardware-intensity twins and the
    naive -> fused arrows. Returns (the renderers to hover, legend items)."""
    from bokeh.models import ColumnDataSource
    from bokeh.models.annotations import LegendItem

    renderers, items = [], []
    for wl in sorted({c.identity.workload for c in cs}):
        rows = [{**_case_row(c, tag), "speedup": speedups.get(_key(c), "-")}
                for c in cs if c.identity.workload == wl]
        src = ColumnDataSource({k: [r[k] for r in rows] for k in rows[0]})
        mk = next(c.declaration.marker for c in cs if c.identity.workload == wl)
        r = p.scatter("x", "y", source=src, marker=BOKEH_MARKERS.get(mk, "circle"),
                      size=11, fill_color="color", line_color="black",
                      fill_alpha=fill_alpha, name=f"points:{tag}{wl}")
        renderers.append(r)
        items.append(LegendItem(label=f"{tag}{wl} ({len(rows)})", renderers=[r]))
    hw = {(pt.key, pt.size): pt.hw_ai for pt in pts if pt.hw_ai}
    hw_rows = [{**_case_row(c, tag), "x": hw[k], "ai": f"{hw[k]:.4g} FLOP/B (ncu)",
                "speedup": speedups.get(_key(c), "-")}
               for c in cs if (k := point_key(c)) in hw]
    if hw_rows:
        src = ColumnDataSource({k: [r[k] for r in hw_rows] for k in hw_rows[0]})
        r = p.scatter("x", "y", source=src, marker="circle", size=11, fill_alpha=0,
                      line_color="color", line_width=2, name=f"hw:{tag}")
        renderers.append(r)
        items.append(LegendItem(label=f"{tag}hardware-measured DRAM AI (ncu)",
                                renderers=[r]))
    arrows = _fusion_segments(cs)
    if arrows:
        r = p.segment("x0", "y0", "x1", "y1", source=ColumnDataSource(arrows),
                      line_color="dimgray", line_width=1.5, name=f"fusion:{tag}")
        items.append(LegendItem(label=f"{tag}naive -> fused", renderers=[r]))
    return renderers, items


def _bokeh_joins(p, a: list[CaseResult], b: list[CaseResult]) -> list:
    """A comparison: a dotted segment joining the two points of each case."""
    from bokeh.models import ColumnDataSource
    from bokeh.models.annotations import LegendItem

    joins = _join_segments(a, b)
    if not joins["x0"]:
        return []
    r = p.segment("x0", "y0", "x1", "y1", source=ColumnDataSource(joins),
                  line_color="#555555", line_dash="dotted", line_width=1.5, name="joins")
    return [LegendItem(label="A -> B, same case", renderers=[r])]


def _fusion_segments(cases: list[CaseResult]) -> dict[str, list]:
    by = {(i.backend, i.workload, i.variant, i.dtype, tuple(i.size)): c
          for c in cases if (i := c.identity)}
    seg: dict[str, list] = {"x0": [], "y0": [], "x1": [], "y1": []}
    for c in cases:
        i, arrow_from = c.identity, c.declaration.arrow_from
        src = by.get((i.backend, i.workload, arrow_from, i.dtype, tuple(i.size))) if (
            arrow_from) else None
        if src is not None:
            for k, val in zip(seg, (*point_xy(src), *point_xy(c)), strict=True):
                seg[k].append(val)
    return seg


def _key(c: CaseResult) -> str:
    return "/".join(point_key(c))


def _join_segments(a: list[CaseResult], b: list[CaseResult]) -> dict[str, list]:
    ib = {_key(c): c for c in b}
    seg: dict[str, list] = {"x0": [], "y0": [], "x1": [], "y1": []}
    for c in a:
        d = ib.get(_key(c))
        if d is not None:
            for k, val in zip(seg, (*point_xy(c), *point_xy(d)), strict=True):
                seg[k].append(val)
    return seg


# -- page -----------------------------------------------------------------------------------

CSS = """
body{font:14px/1.45 system-ui,sans-serif;margin:1.5em auto;max-width:1480px;color:#222;
padding:0 1em}
h1{font-size:1.5em}h2{font-size:1.2em;margin-top:1.6em;border-bottom:1px solid #ddd}
table{border-collapse:collapse;margin:.5em 0;font-size:12.5px}
th,td{border:1px solid #ddd;padding:3px 7px;text-align:left;vertical-align:top}
th{background:#f4f4f4}tr:nth-child(even) td{background:#fafafa}
code,pre{font-size:12px}pre{max-height:18em;overflow:auto;background:#f7f7f7;padding:.5em}
.note{background:#fff8e0;border-left:4px solid #e0b000;padding:.4em .8em}
details summary{cursor:pointer;color:#0550ae}
"""


def _e(v: Any) -> str:
    return html.escape("" if v is None else str(v))


_CODE = re.compile(r"`([^`]+)`")
_EM = re.compile(r"(?<![\w])_([^_]+)_(?![\w])")
_STRONG = re.compile(r"\*\*([^*]+)\*\*")


def inline(text: str) -> str:
    """A line of Markdown inline text as HTML: escaped, `code`, **strong** and _emphasis_
    kept."""
    return _EM.sub(r"<em>\1</em>", _STRONG.sub(r"<strong>\1</strong>",
                                               _CODE.sub(r"<code>\1</code>", _e(text))))


def _table(rows: Iterable[dict[str, Any]], raw: Iterable[str] = (),
           headers: list[str] | None = None) -> str:
    """An HTML table of dict rows; cells escaped except the columns named in ``raw``."""
    rows = list(rows)
    if not rows:
        return "<p>none</p>"
    raw = set(raw)
    cols = list(rows[0])
    head = "".join(f"<th>{_e(c)}</th>" for c in (headers or cols))
    body = "".join("<tr>" + "".join(
        f"<td>{r.get(c, '') if c in raw else _e(r.get(c, ''))}</td>" for c in cols) + "</tr>"
        for r in rows)
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def _image_html(b: Image) -> str:
    """Inlined: the page stays self-contained."""
    if b.svg is None:
        return f"<p>{_e(b.alt)}: <code>{_e(b.path)}</code> beside this page</p>"
    markup = b.svg()
    return f'<figure aria-label="{_e(b.alt)}">{markup[markup.find("<svg"):]}</figure>'


def _table_html(b: Table) -> str:
    rows = [{**row, **{k: v[i] for k, v in b.html_columns.items()}}
            for i, row in enumerate(b.rows)]
    return _table(rows, raw=b.html_columns, headers=b.headers)


block_html = Renderer[str](
    text=lambda b: f"<p>{inline(b.text)}</p>",
    lines=lambda b: "".join(f"<p>{inline(x)}</p>" for x in b.lines),
    items=lambda b: "<ul>" + "".join(f"<li>{inline(x)}</li>" for x in b.items) + "</ul>",
    sub=lambda b: f"<h3>{_e(b.title)}</h3>",
    image=_image_html,
    table=_table_html,
)


def section_html(section: Section | None, title: str | None = None) -> tuple[str, str] | None:
    """(heading, body) of a section, or None when it has nothing to say."""
    if section is None:
        return None
    return title or section.title, "\n".join(block_html(b) for b in section.blocks)


def run_sections(run: RunResult) -> list[tuple[str, str]]:
    """Every section of the report (sections.SECTIONS), as report.md has them."""
    out = [section_html(guarded(title, fn, run)) for title, fn in SECTIONS]
    return [s for s in out if s is not None]


def _plot_html(roofsets: list[RoofSet], runs: list[list[CaseResult]], title: str,
               tags: list[str] | None = None) -> tuple[str, str]:
    """(head, body) of the roofline: Bokeh with its JS inlined, else the static SVG."""
    if bokeh_available():
        from bokeh.embed import components
        from bokeh.resources import Resources

        script, div = components(bokeh_roofline(roofsets, runs, title, tags))
        # Only BokehJS itself, inlined: no widgets, tables, WebGL or MathJax bundles.
        js = Resources(mode="inline", components=["bokeh"]).render_js()
        return js + script, (
            "<p>Hover a point for its numbers; click a legend entry to hide or show a roof "
            "or a group (roofs the points do not use start hidden); wheel or box to zoom."
            "</p>" + div)
    import matplotlib.pyplot as plt

    from .plot import build_figure

    rf = build_figure(roofsets, runs, title, tags)
    buf = io.StringIO()
    rf.fig.savefig(buf, format="svg")
    plt.close(rf.fig)
    svg = buf.getvalue()
    svg = svg[svg.index("<svg"):]
    return "", f'<p class="note">{_e(MISSING_NOTE)}</p>' + svg


def _page(title: str, head: str, sections: list[tuple[str, str]], intro: str) -> str:
    body = "\n".join(f"<h2>{_e(h)}</h2>\n{s}" for h, s in sections)
    return (f"<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
            f"<title>{_e(title)}</title><style>{CSS}</style>{head}</head>\n<body>"
            f"<h1>{_e(title)}</h1>\n{intro}\n{body}\n</body></html>\n")


def render_html(run: RunResult) -> str:
    """The whole report of one run as one self-contained HTML page."""
    title = f"roofbench report: {run.device} ({run.backend})"
    head, plot = _plot_html([run.roofs] if run.roofs else [], [run.cases],
                            f"{run.device} — {run.backend} backend — {run.created}")
    notes = "".join(f'<p class="note">{_e(n)}</p>' for n in run.notes)
    intro = (f"<p>backend <code>{_e(run.backend)}</code>, created {_e(run.created)}, "
             f"commit <code>{_e(run.git_commit)}</code></p>{notes}")
    return _page(title, head, [("Roofline", plot), *run_sections(run)], intro)


def render_sections_html(title: str, intro: str, notes: list[str],
                         sections: list[Section]) -> str:
    """A report of its own sections (a profile's) as one self-contained page: its figures
    inlined as SVG (Image blocks), its notes set apart."""
    body = [s for s in (section_html(x) for x in sections) if s is not None]
    lead = f"<p>{inline(intro)}</p>" + "".join(f'<p class="note">{inline(n)}</p>'
                                                for n in notes)
    return _page(title, "", body, lead)


def render_compare_html(a: RunResult, b: RunResult, deltas: list[Delta]) -> str:
    """Two runs on one page: both on the roofline (each case's two points joined), the
    per-case speedups, and each run's roofs, fusion and environment."""
    title = f"roofbench compare: A {a.device} ({a.backend}) vs B {b.device} ({b.backend})"
    rs = [r for r in (a.roofs, b.roofs) if r is not None]
    head, plot = _plot_html(rs, [a.cases, b.cases],
                            f"A: {a.device} {a.created}  vs  B: {b.device} {b.created}",
                            tags=["A: ", "B: "])
    rows = [cells(d) for d in deltas]  # the terminal table's columns, labels and figures
    n_reg = sum(d.verdict in ("slower", "invalid in B") for d in deltas)
    intro = (f"<p>A: {_e(a.created)} ({_e(a.git_commit)}), B: {_e(b.created)} "
             f"({_e(b.git_commit)}). {n_reg} regression(s) (slower beyond the threshold "
             "and the noise, or invalid in B).</p>")
    sections = [("Roofline", plot), ("Speedup of B over A, case by case",
                                     f'<p class="note">{_e(CAPTION)}</p>' + _table(rows))]
    for name, fn in (("Roofs", roofs_section), ("Fusion", fusion_section),
                     ("Not measured", not_measured_section),
                     ("Environment", environment_section)):
        for tag, run in (("A", a), ("B", b)):
            got = section_html(guarded(name, fn, run), f"{name} of {tag}")
            if got is not None:
                sections.append(got)
    return _page(title, head, sections, intro)
