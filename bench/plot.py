"""The roofline plot: a pure function of stored results (and roof sets).

Log-log. Measured roofs solid, datasheet (and theoretical) roofs dashed; one compute roof per
precision and one bandwidth roof per memory level; ridge points marked; each valid case a
labelled point; an arrow from each naive variant to its fused variant; a dotted path along a
workload's precision ladder (FP32 -> FP16 -> FP8 moves right as bytes per value shrink);
empirical (ERT) curves when the roofs carry them. Invalid cases are never drawn.
"""

from __future__ import annotations

import io
from dataclasses import dataclass
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
from roofbench.kernels.spec import itemsize  # noqa: E402
from roofbench.roofs.model import LEVEL_LABELS, Roof, RoofSet  # noqa: E402

from .results import RunResult, atomic_write_bytes  # noqa: E402
from .runner import CaseResult  # noqa: E402

PREC_COLORS = {
    "fp64": "#1f77b4", "fp32": "#d62728", "fp16": "#2ca02c", "bf16": "#9467bd",
    "fp8": "#ff7f0e", "fp64_tc": "#17becf", "tf32_tc": "#8c564b", "fp16_tc": "#bcbd22",
    "bf16_tc": "#e377c2", "fp8_tc": "#7f7f7f",
}
LEVEL_COLORS = {"dram": "black", "l2": "#555555", "l1": "#888888", "smem": "#aaaaaa"}
MARKERS = {"vector_add": "o", "l2norm": "s", "rownorm": "D", "gemm": "^"}


@dataclass
class Point:
    label: str
    ai: float
    flops: float
    precision: str
    workload: str
    key: str
    efficiency: float | None = None


def valid_points(cases: list[CaseResult], level: str = "dram") -> list[Point]:
    pts = []
    for c in cases:
        if not (c.valid and c.status == "ok" and c.flop_per_s and c.ai.get(level)):
            continue
        pts.append(Point(label=f"{c.workload}/{c.variant} {c.dtype}", ai=c.ai[level],
                         flops=c.flop_per_s, precision=c.precision, workload=c.workload,
                         key=f"{c.backend}/{c.workload}/{c.variant}/{c.dtype}",
                         efficiency=c.efficiency))
    return pts


def _fmt(v: float, unit: str) -> str:
    for p, s in ((1e15, "P"), (1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k")):
        if v >= p:
            return f"{v / p:.3g} {s}{unit}"
    return f"{v:.3g} {unit}"


def _roofs_to_draw(rs: RoofSet, precisions: set[str]) -> tuple[list[Roof], list[Roof]]:
    """The best roof per (source, precision) and per (source, level)."""
    compute: dict[tuple[str, str], Roof] = {}
    memory: dict[tuple[str, str], Roof] = {}
    for r in rs.roofs:
        if r.kind == "compute":
            if r.source != "measured" and precisions and r.precision not in precisions:
                continue  # keep the plot readable: leads only for precisions in use
            k = (r.source, r.precision)
            if k not in compute or r.value > compute[k].value:
                compute[k] = r
        elif r.kind == "memory":
            k = (r.source, r.level)
            if k not in memory or r.value > memory[k].value:
                memory[k] = r
    return list(compute.values()), list(memory.values())


def draw_roofs(ax, rs: RoofSet, xlim: tuple[float, float], precisions: set[str],
               tag: str = "", alpha: float = 1.0) -> None:
    compute, memory = _roofs_to_draw(rs, precisions)
    x0, x1 = xlim
    top = max((r.value for r in compute), default=None)
    for m in memory:
        style = "-" if m.source == "measured" else "--"
        y_end = top if top else m.value * x1
        x_end = min(x1, y_end / m.value)
        ax.plot([x0, x_end], [m.value * x0, m.value * x_end], style,
                color=LEVEL_COLORS.get(m.level, "black"), lw=1.6, alpha=alpha,
                label=f"{tag}{LEVEL_LABELS.get(m.level, m.level)} {_fmt(m.value, 'B/s')}"
                      f" ({m.source})")
    for c in compute:
        style = "-" if c.source == "measured" else "--"
        # Start the compute roof at its ridge with the DRAM roof of the same source (or the
        # measured one), so each source draws its own complete roofline.
        mem = rs.memory("dram", c.source) or rs.memory("dram")
        ridge = c.value / mem.value if mem else x0
        ax.plot([max(ridge, x0), x1], [c.value, c.value], style,
                color=PREC_COLORS.get(c.precision, "gray"), lw=1.6, alpha=alpha,
                label=f"{tag}{c.precision} {_fmt(c.value, 'FLOP/s')} ({c.source})")
        if mem and x0 < ridge < x1:
            ax.plot([ridge], [c.value], "o", mfc="white",
                    mec=PREC_COLORS.get(c.precision, "gray"), ms=6, alpha=alpha)
            if c.source == "measured":
                ax.annotate(f"ridge {ridge:.3g}", (ridge, c.value), textcoords="offset points",
                            xytext=(4, -11), fontsize=7, color="dimgray")


def draw_ert_curves(ax, rs: RoofSet) -> None:
    curves = rs.info.get("ert_curves") or {}
    for prec, pts in curves.items():
        pts = [p for p in pts if p[0] > 0 and p[1] > 0]
        if len(pts) < 2:
            continue
        xs, ys = zip(*sorted(pts), strict=True)
        ax.plot(xs, ys, ":", color=PREC_COLORS.get(prec, "gray"), lw=1.2,
                label=f"ERT curve {prec} (measured)")


def _axes_limits(points: list[Point], roofsets: list[RoofSet]) -> tuple[tuple, tuple]:
    xs = [p.ai for p in points]
    ys = [p.flops for p in points]
    ridges, tops, bws = [], [], []
    for rs in roofsets:
        for r in rs.roofs:
            if r.kind == "compute":
                tops.append(r.value)
                m = rs.memory("dram")
                if m:
                    ridges.append(r.value / m.value)
            elif r.kind == "memory":
                bws.append(r.value)
    xlo = min(xs + [min(ridges, default=1.0)]) / 8 if xs or ridges else 0.01
    xhi = max(xs + ridges + [1.0]) * 8
    ylo = min(ys + [b * xlo for b in bws] + ([min(tops)] if tops else [])) / 4 if (
        ys or bws or tops) else 1e6
    yhi = max(ys + tops + [1.0]) * 3
    return (xlo, xhi), (max(ylo, 1e-3), yhi)


def plot_roofline(roofsets: list[RoofSet], cases_by_run: list[list[CaseResult]],
                  out_base: Path, title: str, tags: list[str] | None = None) -> list[Path]:
    """Draw roofs and valid points of one or more runs; writes out_base.png and .svg."""
    tags = tags or [""] * max(len(roofsets), len(cases_by_run))
    points_by_run = [valid_points(cs) for cs in cases_by_run]
    all_points = [p for pts in points_by_run for p in pts]
    precisions = {p.precision for p in all_points}
    xlim, ylim = _axes_limits(all_points, roofsets)
    # Points are numbered on the plot and named in a key beside it: memory-bound cases sit
    # close together and their full labels would overlap.
    fig, (ax, key_ax) = plt.subplots(1, 2, figsize=(14, 7.5), dpi=110,
                                     gridspec_kw={"width_ratios": [3.2, 1]})
    key_ax.axis("off")
    key_lines: list[str] = []
    ax.set_xscale("log")
    ax.set_yscale("log")
    for i, rs in enumerate(roofsets):
        draw_roofs(ax, rs, xlim, precisions, tag=tags[i] if len(roofsets) > 1 else "",
                   alpha=1.0 if i == 0 else 0.55)
        draw_ert_curves(ax, rs)
    for i, (cases, pts) in enumerate(zip(cases_by_run, points_by_run, strict=True)):
        by_key = {p.key: p for p in pts}
        for p in pts:
            num = len(key_lines) + 1
            ax.plot(p.ai, p.flops, MARKERS.get(p.workload, "o"),
                    color=PREC_COLORS.get(p.precision, "gray"), ms=8, mec="black", mew=0.6,
                    alpha=1.0 if i == 0 else 0.6)
            ax.annotate(str(num), (p.ai, p.flops), textcoords="offset points",
                        xytext=(5, 3 if num % 2 else -9), fontsize=7)
            tag = tags[i] if len(cases_by_run) > 1 else ""
            eff = f"  {p.efficiency:.0%}" if p.efficiency else ""
            key_lines.append(f"{num:>2}  {tag}{p.label}{eff}")
        _draw_fusion_arrows(ax, cases, by_key)
        _draw_precision_ladders(ax, pts)
    ax.set_xlim(*xlim)
    ax.set_ylim(*ylim)
    ax.set_xlabel("arithmetic intensity (FLOP / byte of DRAM traffic)")
    ax.set_ylabel("performance (FLOP/s)")
    ax.set_title(title, fontsize=11)
    ax.grid(True, which="both", alpha=0.25)
    # Marker shapes say which workload a point is; colours say its precision.
    for wl in sorted({p.workload for p in all_points}):
        ax.plot([], [], MARKERS.get(wl, "o"), color="white", mec="black", label=wl)
    ax.legend(fontsize=7, loc="lower right", ncol=2, framealpha=0.9)
    key_ax.text(0.0, 1.0, "valid points (efficiency vs roof)\n" + "\n".join(key_lines),
                va="top", ha="left", family="monospace", fontsize=7,
                transform=key_ax.transAxes)
    fig.tight_layout()
    paths = []
    for ext in ("png", "svg"):
        path = out_base.with_suffix(f".{ext}")
        buf = io.BytesIO()
        fig.savefig(buf, format=ext)
        atomic_write_bytes(path, buf.getvalue())
        paths.append(path)
    plt.close(fig)
    return paths


def _draw_fusion_arrows(ax, cases: list[CaseResult], by_key: dict[str, Point]) -> None:
    from roofbench.kernels.registry import workloads

    ws = workloads()
    for c in cases:
        w = ws.get(c.workload)
        v = w.variants.get(c.variant) if w else None
        if v is None or not v.arrow_from:
            continue
        dst = by_key.get(f"{c.backend}/{c.workload}/{c.variant}/{c.dtype}")
        src = by_key.get(f"{c.backend}/{c.workload}/{v.arrow_from}/{c.dtype}")
        if src and dst:
            ax.annotate("", xy=(dst.ai, dst.flops), xytext=(src.ai, src.flops),
                        arrowprops={"arrowstyle": "->", "color": "dimgray", "lw": 1.2})


def _draw_precision_ladders(ax, pts: list[Point]) -> None:
    groups: dict[str, list[Point]] = {}
    for p in pts:
        backend, workload, variant, _dtype = p.key.split("/")
        groups.setdefault(f"{backend}/{workload}/{variant}", []).append(p)
    for g in groups.values():
        if len(g) < 2:
            continue
        g.sort(key=lambda p: -itemsize(p.key.rsplit("/", 1)[1]))
        ax.plot([p.ai for p in g], [p.flops for p in g], ":", color="gray", lw=0.9)


def plot_run(run: RunResult, out_base: Path) -> list[Path]:
    rs = [run.roofs] if run.roofs else []
    title = f"{run.device} — {run.backend} backend — {run.created}"
    return plot_roofline(rs, [run.cases], out_base, title)

