"""The static roofline (PNG/SVG): a pure function of stored results (and roof sets).

Log-log, drawn to be read at a glance:
- one diagonal per memory level (line style = level) and one horizontal per precision/unit
  (colour = precision); measured roofs solid, datasheet roofs faint and dashed;
- by default only the roofs the plotted points use: the compute roofs of their precisions and
  the memory levels they are bound by (DRAM always: the x axis is DRAM intensity);
  ``all_roofs`` draws every roof (theoretical ones and ERT curves included). With no valid
  point at all every measured and datasheet roof is drawn: there is nothing to select by;
- each roof is labelled on its line (name, value, ridge); labels are placed where they overlap
  no other label, no point and no ridge marker; a label that fits nowhere goes to the legend;
- the legend and the key of numbered points sit outside the axes;
- the frame comes from the device's roofs, rounded out to decades, so two runs of one device
  share one frame; it widens only for a point outside it;
- an arrow from each naive variant to its fused variant; a hollow marker at the hardware-
  measured DRAM intensity (Nsight Compute) when the case carries one.
Invalid cases are never drawn.
"""

from __future__ import annotations

import io
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.axes import Axes  # noqa: E402
from matplotlib.backends.backend_agg import FigureCanvasAgg, RendererAgg  # noqa: E402
from matplotlib.figure import Figure  # noqa: E402
from matplotlib.legend import Legend  # noqa: E402
from matplotlib.lines import Line2D  # noqa: E402
from matplotlib.text import Text  # noqa: E402
from matplotlib.transforms import Bbox  # noqa: E402

from roofbench.fileio import atomic_write_bytes  # noqa: E402
from roofbench.records import CaseResult, RunResult
from roofbench.roof_records import (  # noqa: E402
    SOURCE_RANK,  # noqa: E402
    Roof,
    RoofSet,
)
from roofbench.roofline import LEVEL_LABELS
from roofbench.units import si  # noqa: E402

from .figure_data import (  # noqa: E402
    FAINT,
    LEVEL_STYLES,
    PREC_COLORS,
    Point,
    frame,
    noise_flags,
    plot_facts,
    ridge_points,
    select_roofs,
    valid_points,
)
from .label_layout import Layout, label_point, label_roof  # noqa: E402
from .plot_dense import DENSE_POINTS, dense_note, draw_dense  # noqa: E402
from .roof_state import draw_drift_band  # noqa: E402


@dataclass
class RooflineFigure:
    """The drawn figure and the artists the tests measure."""

    fig: Figure
    ax: Axes
    points: list[Line2D] = field(default_factory=list)
    labels: list[Text] = field(default_factory=list)  # roof labels and point numbers
    legend: Legend | None = None
    key: Text | None = None
    ridges: list[tuple[float, float]] = field(default_factory=list)
    xy: list[tuple[float, float]] = field(default_factory=list)  # every point drawn (data)
    legend_roofs: list[str] = field(default_factory=list)  # roofs whose label went there
    joins: int = 0  # comparison: segments joining a case's points of run A and run B
    arrows: list[tuple[tuple[float, float], tuple[float, float]]] = field(
        default_factory=list)  # fusion arrows drawn: (from xy, to xy) in data units
    drawn_roofs: list[tuple[Roof, Line2D]] = field(default_factory=list)  # roof, its line
    note: str = ""  # said on the plot: many points drawn as dots (plot_dense.py)


# No measurement is past this (10^30 FLOP/s is a million zettaflops); a point beyond it, or
# below its inverse, would take the log axes past what a float holds (flops=1e300 did).
FRAME_BOUND = 1e30


def _in_frame(p: Any) -> bool:
    return all(1 / FRAME_BOUND < v < FRAME_BOUND for v in (p.ai, p.flops, p.hw_ai or 1.0))


def bandwidth_only(cases_by_run: list[list[CaseResult]]) -> int:
    """Valid cases of 0 FLOPs that move bytes (copies, layout changes): placed by bandwidth
    (roofline.by_bandwidth), never drawn (their intensity is 0), counted in a note."""
    return len(_zero_flop(cases_by_run))


def _zero_flop(cases_by_run: list[list[CaseResult]]) -> list[CaseResult]:
    return [c for cs in cases_by_run for c in cs if c.valid and c.outcome.status == "ok"
            and c.declaration.flops == 0 and any(c.declaration.bytes.values())]


def percent(x: float) -> str:
    """An efficiency as the key shows it: whole percents, two digits below 1% (never "0%"
    for a point that did run)."""
    return f"{x:.0%}" if x >= 0.01 or x == 0 else f"{100 * x:.2g}%"


NOT_DRAWN_SHOWN = 12  # invalid cases named in the key at most (the rest counted)


def _case_label(c: CaseResult) -> tuple[str, str]:
    """(number, label) a case names itself by in the key (a profile's own, else its key)."""
    own = plot_facts(c)
    i = c.identity
    return own.get("plot_number", ""), own.get("plot_label", f"{i.workload}/{i.variant} {i.dtype}")


def beside_lines(cases_by_run: list[list[CaseResult]]) -> list[str]:
    """The key's lines for what the axes cannot show: 0-FLOP cases (intensity 0, no place on
    a log axis) with their bandwidth and time share, and every invalid case by name and
    cause (a point above its roof is not drawn, never silently)."""
    out: list[str] = []
    zero = _zero_flop(cases_by_run)
    if zero:
        out.append("0 FLOPs: placed by bandwidth, not on this axis")
        for c in zero:
            num, label = _case_label(c)
            r = c.roofline
            eff = (f"  {percent(r.efficiency)} of {r.limiting_roof}"
                   if r.efficiency is not None else "")
            share = plot_facts(c).get("time_share")
            out.append(f"{num:>3}  {label}{eff}" + (f", {share} of the time" if share else "")
                       + (" (noisy)" if any(f.startswith("noisy") for f in noise_flags(c))
                          else ""))
    bad = [c for cs in cases_by_run for c in cs if c.outcome.status == "invalid"]
    if bad:
        out.append("not drawn, not valid")
        for c in bad[:NOT_DRAWN_SHOWN]:
            num, label = _case_label(c)
            out.append(f"{num:>3}  {label}: {c.outcome.error or 'failed its check'}")
        if len(bad) > NOT_DRAWN_SHOWN:
            out.append(f"     and {len(bad) - NOT_DRAWN_SHOWN} more (the report's table)")
    return out


def build_figure(roofsets: list[RoofSet], cases_by_run: list[list[CaseResult]], title: str,
                 tags: list[str] | None = None, all_roofs: bool = False,
                 dense_above: int = DENSE_POINTS, mark: str = "") -> RooflineFigure:
    """The figure; ``mark``: a line said in red on the axes (a run taken under load)."""
    n_runs = max(len(roofsets), len(cases_by_run), 1)
    tags = tags or [""] * n_runs
    rs_for = [roofsets[min(i, len(roofsets) - 1)] if roofsets else None
              for i in range(len(cases_by_run))]
    points_by_run = [valid_points(cs, roofs=rs) for cs, rs in zip(cases_by_run, rs_for,
                                                                   strict=True)]
    beyond = sum(not _in_frame(p) for pts in points_by_run for p in pts)
    points_by_run = [[p for p in pts if _in_frame(p)] for pts in points_by_run]
    all_points = [p for pts in points_by_run for p in pts]
    xlim, ylim = frame(roofsets, all_points)
    out = _new_figure(title, xlim, ylim)
    renderer = _renderer(out.fig)
    layout = Layout(inside=out.ax.get_window_extent(renderer))

    roof_lines = _draw_device_roofs(out, roofsets, rs_for, points_by_run, tags, xlim, ylim,
                                    all_roofs)
    dense = len(all_points) > dense_above
    # Obstacles first: every point, its hardware-intensity twin and every ridge marker.
    if dense:  # dots and a key by group (plot_dense.py): linear in the points
        out.points, out.xy, key_lines = draw_dense(out.ax, points_by_run, tags)
        numbered, arrows = [], []
        out.note = dense_note(len(all_points))
        ax: Any = out.ax
        ax.text(0.01, 0.01, out.note, transform=ax.transAxes, fontsize=7, va="bottom",
                ha="left", color="dimgray")
    else:
        key_lines, numbered, arrows = _draw_points(out, cases_by_run, points_by_run, tags)
    said = [f"{beyond} point(s) beyond {FRAME_BOUND:.0e} left out"] if beyond else []
    if (bw := bandwidth_only(cases_by_run)):  # intensity 0: no place on a log axis
        said.append(f"{bw} case(s) of 0 FLOPs placed by bandwidth: listed in the key")
    if mark:
        out.ax.text(0.5, 0.99, mark, transform=out.ax.transAxes, fontsize=8, ha="center",
                    va="top", color="#b00000", zorder=8)
    if said:
        out.note = "; ".join(filter(None, [out.note, *said]))
        out.ax.text(0.01, 0.97 if dense else 0.01, "; ".join(said),
                    transform=out.ax.transAxes, fontsize=7, ha="left", color="dimgray",
                    va="top" if dense else "bottom")
    out.arrows = list(arrows)
    if len(points_by_run) == 2 and not dense:  # a comparison: each case's points joined
        arrows += _draw_joins(out, points_by_run[0], points_by_run[1])
    _add_obstacles(out, renderer, layout, roof_lines, arrows, points=not dense)

    _place_labels(out, renderer, layout, roof_lines, numbered, key_lines)
    out.legend = legend = _legend(out.ax, all_points, roof_lines, out.legend_roofs)
    out.key = _key_text(out, legend, renderer, key_lines, dense, beside_lines(cases_by_run))
    return out


def _renderer(fig: Figure) -> RendererAgg:
    canvas = fig.canvas
    assert isinstance(canvas, FigureCanvasAgg)  # matplotlib.use("Agg") above
    return canvas.get_renderer()


def _new_figure(title: str, xlim, ylim) -> RooflineFigure:
    """The empty log-log frame."""
    fig = plt.figure(figsize=(12.5, 7.5), dpi=110)
    # A fixed axes box (no tight_layout): label angles are computed in display space.
    ax = fig.add_axes((0.065, 0.08, 0.66, 0.84))
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlim(*xlim)
    ax.set_ylim(*ylim)
    ax.set_xlabel("arithmetic intensity (FLOP / byte of DRAM traffic)")
    ax.set_ylabel("performance (FLOP/s)")
    ax.set_title(title, fontsize=11)
    ax.grid(True, which="major", alpha=0.25)
    ax.grid(True, which="minor", alpha=0.08)
    return RooflineFigure(fig=fig, ax=ax)


def _draw_device_roofs(out: RooflineFigure, roofsets: list[RoofSet],
                       rs_for: list[RoofSet | None], points_by_run: list[list[Point]],
                       tags: list[str], xlim, ylim, all_roofs: bool) -> list:
    """Roofs of the first device in full; a second roof set of another device faint and tagged
    (a second run of the same device shares the first one's roofs). Returns _draw_roofs' list
    over every device drawn."""
    all_points = [p for pts in points_by_run for p in pts]
    roof_lines: list[tuple[Roof, list[str], list[tuple[float, float]], float]] = []
    for i, rs in enumerate(roofsets):
        if i > 0 and rs.device == roofsets[0].device:
            continue
        tag = tags[i] if len({r.device for r in roofsets}) > 1 else ""
        pts_i = [p for j, pts in enumerate(points_by_run) if rs_for[j] is rs for p in pts]
        compute, memory = select_roofs(rs, pts_i or all_points, all_roofs)
        roof_lines += _draw_roofs(out.ax, rs, compute, memory, xlim, ylim, tag,
                                  alpha=1.0 if i == 0 else 0.6, out=out)
        draw_drift_band(out.ax, rs, xlim, ylim)  # a run whose DRAM bandwidth moved
        if all_roofs:
            _draw_ert_curves(out.ax, rs)
    return roof_lines


def _draw_points(out: RooflineFigure, cases_by_run: list[list[CaseResult]],
                 points_by_run: list[list[Point]], tags: list[str]):
    """Every valid point (and its hardware-intensity twin) and the naive -> fused arrows.
    Returns the key's lines, (number, point, data xy) to label, and the arrows drawn."""
    ax = out.ax
    key_lines: list[str] = []
    numbered: list[tuple[int, str, tuple[float, float]]] = []
    arrows: list[tuple[tuple[float, float], tuple[float, float]]] = []
    for i, (cases, pts) in enumerate(zip(cases_by_run, points_by_run, strict=True)):
        tag = tags[i] if len(cases_by_run) > 1 else ""
        for p in pts:
            color = PREC_COLORS.get(p.precision, "gray")
            (ln,) = ax.plot(p.ai, p.flops, p.marker, color=color, ms=8,
                            mec="black", mew=0.6, alpha=1.0 if i == 0 else 0.7, zorder=5)
            out.points.append(ln)
            out.xy.append((p.ai, p.flops))
            if p.hw_ai:
                (hw,) = ax.plot(p.hw_ai, p.flops, p.marker, mfc="none",
                                mec=color, ms=8, mew=1.2, zorder=5)
                ax.plot([p.ai, p.hw_ai], [p.flops, p.flops], ":", color=color, lw=0.8)
                out.points.append(hw)
                out.xy.append((p.hw_ai, p.flops))
            eff = f"  {percent(p.efficiency)}" if p.efficiency else ""
            num = p.number or str(len(key_lines) + 1)
            key_lines.append(f"{num:>3}  {tag}{p.label}{eff}" + ("  (noisy)" if p.noisy else ""))
            numbered.append((len(key_lines) - 1, num, (p.ai, p.flops)))
        arrows += _draw_fusion_arrows(ax, cases, {(p.key, p.size): p for p in pts})
    return key_lines, numbered, arrows


def _draw_joins(out: RooflineFigure, run_a: list[Point], run_b: list[Point]) -> list:
    """A comparison: a dotted segment joining the two points of each case (same key, size)."""
    joins = []
    in_b = {(p.key, p.size): p for p in run_b}
    for p in run_a:
        q = in_b.get((p.key, p.size))
        if q is not None:
            out.ax.plot([p.ai, q.ai], [p.flops, q.flops], ":", color="dimgray", lw=1.0,
                        zorder=4)
            joins.append(((p.ai, p.flops), (q.ai, q.flops)))
            out.joins += 1
    return joins


def _add_obstacles(out: RooflineFigure, renderer, layout: Layout, roof_lines: list,
                   arrows: list, points: bool = True) -> None:
    """What labels must avoid: roof lines and arrows (crossed), points and ridges (covered)."""
    to_px = out.ax.transData.transform
    for roof, _texts, seg, _a in roof_lines:
        layout.segments.append((roof, (*to_px(seg[0]), *to_px(seg[1]))))
    for a, b in arrows:
        layout.segments.append((None, (*to_px(a), *to_px(b))))
    for ln in out.points if points else []:  # dense dots: roof labels may cross them
        layout.taken.append(ln.get_window_extent(renderer))
    for x, y in out.ridges:
        px, py = to_px((x, y))
        layout.taken.append(Bbox.from_extents(px - 4, py - 4, px + 4, py + 4))


def _place_labels(out: RooflineFigure, renderer, layout: Layout, roof_lines: list,
                  numbered: list, key_lines: list[str]) -> None:
    """Roof labels on their lines, then the point numbers around their points; a roof label
    that fits nowhere goes to the legend, an unplaced number is flagged in the key."""
    for roof, texts, seg, alpha in roof_lines:
        art = label_roof(out.ax, renderer, layout, roof, texts, seg, alpha)
        if art is None:
            out.legend_roofs.append(texts[-1])
        else:
            out.labels.append(art)
    for line, num, (x, y) in numbered:
        art = label_point(out.ax, renderer, layout, num, x, y)
        if art is not None:
            out.labels.append(art)
        else:  # no free spot near the point: the key names it by its coordinates instead
            key_lines[line] += "  (unlabelled on the plot)"


KEY_MIN_PT = 6.0  # the key is never set smaller: past this the figure grows downwards


def _key_text(out: RooflineFigure, legend: Legend, renderer: RendererAgg,
              key_lines: list[str], dense: bool = False,
              beside: list[str] | None = None) -> Text:
    """The numbered points' key, under the legend, then what the axes cannot show
    (``beside``: 0-FLOP cases, invalid ones). Each line is wrapped to the figure's right edge
    (never cut); a key too long for the space under the legend is set smaller, down to
    ``KEY_MIN_PT``; past that the figure grows downwards, the axes keeping their size in
    pixels (label angles stay true). The legend places itself when its extent is asked for:
    no draw of the figure here (a first draw lays out every tick of both log axes, and
    savefig draws it anyway)."""
    fig = out.fig
    leg_bb = legend.get_window_extent(renderer).transformed(fig.transFigure.inverted())
    size = 7.0 if len(key_lines) <= 40 else 6.0
    head = ("valid points by group (count, median efficiency)" if dense else
            "valid points (efficiency vs roof)")
    lines = ([head, *key_lines] if key_lines else ["no valid point to plot"]) + [
        *([""] if beside else []), *(beside or [])]
    text = fig.text(leg_bb.x0, leg_bb.y0 - 0.02, "", va="top", ha="left", family="monospace",
                    fontsize=size)
    margin = 4.0  # pixels kept free at the figure's bottom and right edges

    def set_size(pt: float) -> None:
        text.set_fontsize(pt)
        text.set_text("\n".join(_wrapped(lines, renderer, text, fig.bbox.width - margin
                                          - leg_bb.x0 * fig.bbox.width)))

    set_size(size)
    while text.get_window_extent(renderer).y0 < margin and size > KEY_MIN_PT:
        size -= 0.5
        set_size(size)
    short = margin - text.get_window_extent(renderer).y0
    if short > 0:
        _grow_downwards(out, short)
        leg_bb = legend.get_window_extent(renderer).transformed(fig.transFigure.inverted())
        text.set_position((leg_bb.x0, leg_bb.y0 - 0.02 * 7.5 / fig.get_figheight()))
    return text


def _wrapped(lines: list[str], renderer: RendererAgg, text: Text, width_px: float) -> list[str]:
    """Each line cut into pieces no wider than ``width_px`` at the key's font (monospace: one
    character's width measured), the pieces after the first indented under its name."""
    import textwrap

    probe = Text(0, 0, "M" * 10, fontproperties=text.get_fontproperties())
    if (fig := text.get_figure()) is not None:
        probe.set_figure(fig)
    char = probe.get_window_extent(renderer).width / 10 or 1.0
    cols = max(20, int(width_px // char))
    out: list[str] = []
    for line in lines:
        out += textwrap.wrap(line, cols, subsequent_indent=" " * 7, drop_whitespace=False,
                             break_on_hyphens=False) or [""]
    return out


def _grow_downwards(out: RooflineFigure, pixels: float) -> None:
    """Add ``pixels`` at the bottom of the figure; the axes keep their pixel box."""
    fig, ax = out.fig, out.ax
    box = ax.get_window_extent().frozen()  # the live box would follow the resize
    h_old = fig.get_figheight() * fig.dpi
    h_new = h_old + pixels
    fig.set_figheight(h_new / fig.dpi)
    ax.set_position((box.x0 / (fig.get_figwidth() * fig.dpi), (box.y0 + pixels) / h_new,
                     box.width / (fig.get_figwidth() * fig.dpi), box.height / h_new))
    fig.canvas.draw()


def _draw_roofs(ax, rs: RoofSet, compute: list[Roof], memory: list[Roof], xlim, ylim,
                tag: str, alpha: float, out: RooflineFigure) -> list:
    """Draw the chosen roofs; return (roof, label text, display segment ends, alpha) for each."""
    x0, x1 = xlim
    lines = []
    tops: dict[str, float] = {}
    for c in compute:
        tops[c.source] = max(tops.get(c.source, 0.0), c.value)
    top_any = max(tops.values(), default=ylim[1])
    for m in sorted(memory, key=lambda r: (SOURCE_RANK.get(r.source, 9), r.value)):
        faint = m.source not in ("measured", "user")
        style = "--" if faint else LEVEL_STYLES.get(m.key, "-")
        y_end = min(tops.get(m.source, top_any), ylim[1])
        x_end = min(x1, y_end / m.value)
        a = alpha * (FAINT if faint else 1.0)
        (ln,) = ax.plot([x0, x_end], [m.value * x0, m.value * x_end], linestyle=style,
                        color="black", lw=1.6, alpha=a, zorder=2)
        out.drawn_roofs.append((m, ln))
        src = "" if m.source == "measured" else f" ({m.source})"
        text = f"{tag}{LEVEL_LABELS.get(m.key, m.key)} {si(m.value, 'B/s')}{src}"
        lines.append((m, [text], [(x0, m.value * x0), (x_end, m.value * x_end)], a))
    for c, ridge in sorted(ridge_points(rs, compute),
                           key=lambda t: (SOURCE_RANK.get(t[0].source, 9), -t[0].value)):
        faint = c.source not in ("measured", "user")
        a = alpha * (FAINT if faint else 1.0)
        color = PREC_COLORS.get(c.key, "gray")
        (ln,) = ax.plot([max(ridge, x0), x1], [c.value, c.value], "--" if faint else "-",
                        color=color, lw=1.6, alpha=a, zorder=2)
        out.drawn_roofs.append((c, ln))
        if x0 < ridge < x1:
            ax.plot([ridge], [c.value], "o", mfc="white", mec=color, ms=5, alpha=a, zorder=3)
            out.ridges.append((ridge, c.value))
        src = "" if c.source == "measured" else f" ({c.source})"
        val = si(c.value, "FLOP/s")
        short = c.name.split(" (")[0]
        texts = [f"{tag}{c.name} {val}, ridge {ridge:.3g}{src}", f"{tag}{c.name} {val}{src}",
                 f"{tag}{short} {val}{src}"]
        lines.append((c, texts, [(max(ridge, x0), c.value), (x1, c.value)], a))
    for c in compute:  # a compute roof with no DRAM roof at all: a plain horizontal
        if not any(c is r for r, _ in ridge_points(rs, compute)):
            (ln,) = ax.plot([x0, x1], [c.value, c.value], "-",
                            color=PREC_COLORS.get(c.key), lw=1.6, alpha=alpha)
            out.drawn_roofs.append((c, ln))
            lines.append((c, [f"{tag}{c.name} {si(c.value, 'FLOP/s')}"],
                          [(x0, c.value), (x1, c.value)], alpha))
    return lines


def _legend(ax, points: list[Point], roof_lines, legend_roofs: list[str]):
    handles = []
    # one entry per group of points (a workload; a profile's op, fusion group, program),
    # each point told apart by its number in the key
    markers = {p.group or p.workload: p.marker for p in points}
    for wl in sorted(markers):
        handles.append(Line2D([], [], linestyle="", marker=markers[wl], color="white",
                              mec="black", label=wl))
    if any(p.hw_ai for p in points):
        handles.append(Line2D([], [], linestyle="", marker="o", mfc="none", mec="black",
                              label="hardware-measured DRAM AI (ncu)"))
    precs = sorted({p.precision for p in points}
                   | {r.precision for r, *_ in roof_lines if r.kind == "compute"})
    for prec in precs:
        handles.append(Line2D([], [], color=PREC_COLORS.get(prec, "gray"), lw=2,
                              label=f"{prec} (roof and points)"))
    levels = sorted({r.level for r, *_ in roof_lines if r.kind == "memory"
                     and r.source in ("measured", "user")})
    for lv in levels:
        handles.append(Line2D([], [], color="black", linestyle=LEVEL_STYLES.get(lv, "-"),
                              label=f"{LEVEL_LABELS.get(lv, lv)} bandwidth (measured)"))
    if any(r.source not in ("measured", "user") for r, *_ in roof_lines):
        handles.append(Line2D([], [], color="black", linestyle="--", alpha=FAINT,
                              label="datasheet / theoretical (faint, dashed)"))
    if any(r.kind == "compute" for r, *_ in roof_lines):
        handles.append(Line2D([], [], linestyle="", marker="o", mfc="white", mec="black",
                              ms=5, label="ridge (meets DRAM roof)"))
    for text in legend_roofs:  # labels that found no free spot on their line
        handles.append(Line2D([], [], color="gray", lw=1, label=text))
    return ax.legend(handles=handles, fontsize=7, loc="upper left", bbox_to_anchor=(1.02, 1.0),
                     borderaxespad=0.0, framealpha=0.95)


def _draw_ert_curves(ax, rs: RoofSet) -> None:
    curves = rs.info.get("ert_curves") or {}
    for prec, pts in curves.items():
        pts = [p for p in pts if p[0] > 0 and p[1] > 0]
        if len(pts) < 2:
            continue
        xs, ys = zip(*sorted(pts), strict=True)
        ax.plot(xs, ys, ":", color=PREC_COLORS.get(prec, "gray"), lw=1.0, alpha=0.6)


def _draw_fusion_arrows(ax, cases: list[CaseResult],
                        by_key: dict[tuple[str, str], Point]) -> list:
    """An arrow from each variant's arrow_from point to it, at the same dtype and size (a
    sweep has one arrow per size)."""
    from .fusion import fused_from

    drawn = []
    for c, naive in fused_from(cases):
        i = c.identity
        size = "x".join(map(str, i.size))
        dst = by_key.get((f"{i.backend}/{i.workload}/{i.variant}/{i.dtype}", size))
        src = by_key.get((f"{i.backend}/{i.workload}/{naive}/{i.dtype}", size))
        if src and dst:
            ax.annotate("", xy=(dst.ai, dst.flops), xytext=(src.ai, src.flops), zorder=4,
                        arrowprops={"arrowstyle": "->", "color": "dimgray", "lw": 1.0,
                                    "shrinkA": 5, "shrinkB": 5})
            drawn.append(((src.ai, src.flops), (dst.ai, dst.flops)))
    return drawn


def save_figure(rf: RooflineFigure, out_base: Path) -> list[Path]:
    paths = []
    for ext in ("png", "svg"):
        path = out_base.with_suffix(f".{ext}")
        buf = io.BytesIO()
        rf.fig.savefig(buf, format=ext)
        atomic_write_bytes(path, buf.getvalue())
        paths.append(path)
    plt.close(rf.fig)
    return paths


def plot_roofline(roofsets: list[RoofSet], cases_by_run: list[list[CaseResult]],
                  out_base: Path, title: str, tags: list[str] | None = None,
                  all_roofs: bool = False, mark: str = "") -> list[Path]:
    """Draw roofs and valid points of one or more runs; writes out_base.png and .svg."""
    return save_figure(build_figure(roofsets, cases_by_run, title, tags, all_roofs,
                                    mark=mark), out_base)


UNDER_LOAD = "taken under load"  # a run's note that begins so is its mark on the plot


def plot_run(run: RunResult, out_base: Path, all_roofs: bool = False) -> list[Path]:
    rs = [run.roofs] if run.roofs else []
    title = f"{run.device} — {run.backend} backend — {run.created}"
    mark = next((n for n in run.notes if n.startswith(UNDER_LOAD)), "")
    return plot_roofline(rs, [run.cases], out_base, title, all_roofs=all_roofs, mark=mark)
