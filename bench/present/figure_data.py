"""What both rooflines draw (the static one, plot.py, and report.html's interactive one): the
valid points, which roofs to draw, their ridges, the frame, the colours and line styles."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING

from roofbench.ncu_checks import hw_dram_ai
from roofbench.records import CaseResult
from roofbench.roof_records import Roof, RoofSet

if TYPE_CHECKING:
    from matplotlib.typing import LineStyleType

PREC_COLORS = {
    "fp64": "#1f77b4", "fp32": "#d62728", "fp16": "#2ca02c", "bf16": "#9467bd",
    "fp8": "#ff7f0e", "fp64_tc": "#17becf", "tf32_tc": "#8c564b", "fp16_tc": "#bcbd22",
    "bf16_tc": "#e377c2", "fp8_tc": "#7f7f7f",
}
# Memory level by line style (measured roofs); datasheet roofs are dashed and faint whatever
# their level.
LEVEL_STYLES: dict[str, LineStyleType] = {"dram": "-", "l3": (0, (6, 3)), "l2": "-.",
                                          "l1": (0, (5, 1.5, 1, 1.5, 1, 1.5)), "smem": ":"}
FAINT = 0.45


@dataclass
class Point:
    label: str
    ai: float
    flops: float
    precision: str
    workload: str
    key: str
    efficiency: float | None = None
    level: str | None = None  # the memory level that bounds it (None: compute-bound)
    hw_ai: float | None = None  # DRAM intensity from hardware counters, when measured
    size: str = ""
    marker: str = "o"  # the workload's own (Workload.marker, stored with the case)
    # A profile's cases name their own (evidence.extra): the number on the plot (an op's
    # rank in profile.md), the legend entry it belongs to (op, fusion group, program)
    number: str | None = None
    group: str = ""
    noisy: bool = False  # its timing flagged noisy: marked in the key


def plot_facts(c: CaseResult) -> dict[str, str]:
    """What a case says of its own point (a profile's: ``plot_number``, ``plot_group``,
    ``plot_label``, ``time_share``), as stored in its evidence."""
    extra = c.evidence.extra
    return {k: str(extra[k]) for k in ("plot_number", "plot_group", "plot_label", "time_share")
            if extra.get(k) is not None}


def noise_flags(c: CaseResult) -> list[str]:
    """A case's noisy flag and its cause, as its timing records them (timing.py)."""
    t = c.measurement.timing
    return [f for f in (t.flags if t else []) if f.startswith(("noisy", "noise"))]


def _level_of(rs: RoofSet | None, c: CaseResult) -> str | None:
    if c.roofline.bound != "memory" or rs is None:
        return None
    for r in rs.roofs:
        if r.kind == "memory" and r.name == c.roofline.limiting_roof:
            return r.level
    return "dram"


def _usable(*xs: float | None) -> bool:
    return all(isinstance(x, (int, float)) and math.isfinite(x) and x > 0 for x in xs)


def point_key(c: CaseResult) -> tuple[str, str]:
    """A case as its plotted point names it: (backend/workload/variant/dtype, size)."""
    i = c.identity
    return f"{i.backend}/{i.workload}/{i.variant}/{i.dtype}", "x".join(map(str, i.size))


def point_xy(c: CaseResult) -> tuple[float, float | None]:
    """Where a case sits on the plot: its DRAM intensity and its FLOP/s."""
    return c.declaration.ai["dram"], c.roofline.flop_per_s


def valid_points(cases: list[CaseResult], level: str = "dram",
                 roofs: RoofSet | None = None) -> list[Point]:
    pts = []
    for c in cases:
        i, r = c.identity, c.roofline
        if r.flop_per_s is None or not (c.valid and c.outcome.status == "ok" and _usable(
                r.flop_per_s, c.declaration.ai.get(level), c.measurement.median_s)):
            continue  # a NaN or negative time is never a point, nor in the key
        hw_ai = hw_dram_ai(c)
        at = f" {i.occupancy_level.tag}" if i.occupancy_level else ""  # an occupancy scan's
        key, size = point_key(c)
        own = plot_facts(c)
        pts.append(Point(label=own.get("plot_label", f"{i.workload}/{i.variant} {i.dtype}{at}"),
                         ai=c.declaration.ai[level], flops=r.flop_per_s,
                         precision=i.precision, workload=i.workload, key=key,
                         efficiency=r.efficiency, level=_level_of(roofs, c),
                         hw_ai=hw_ai if hw_ai and hw_ai > 0 else None, size=size,
                         marker=c.declaration.marker, number=own.get("plot_number"),
                         group=own.get("plot_group", i.workload),
                         noisy=any(f.startswith("noisy") for f in noise_flags(c))))
    return pts


# -- which roofs ----------------------------------------------------------------------------

def best_roofs(rs: RoofSet, all_roofs: bool = False) -> tuple[list[Roof], list[Roof]]:
    """The highest roof per (source, precision) and per (source, level): one line each.
    Theoretical roofs only with ``all_roofs`` (a datasheet beside the measurement is enough)."""
    compute: dict[tuple[str, str], Roof] = {}
    memory: dict[tuple[str, str], Roof] = {}
    for r in rs.roofs:
        if r.source == "theoretical" and not all_roofs:
            continue
        if r.kind == "compute":
            k = (r.source, r.key)
            if k not in compute or r.value > compute[k].value:
                compute[k] = r
        elif r.kind == "memory":
            k = (r.source, r.key)
            if k not in memory or r.value > memory[k].value:
                memory[k] = r
    return list(compute.values()), list(memory.values())


def select_roofs(rs: RoofSet, points: list[Point],
                 all_roofs: bool = False) -> tuple[list[Roof], list[Roof]]:
    """The roofs to draw: those the points use (their precisions, the memory levels that bound
    them, DRAM always), or every roof with ``all_roofs`` or when there is no point."""
    compute, memory = best_roofs(rs, all_roofs)
    if all_roofs or not points:
        return compute, memory
    precisions = {p.precision for p in points}
    # A CPU's cache levels (roofs with a sweep) are always drawn: one diagonal per level.
    levels = {"dram"} | {p.level for p in points if p.level} | {
        r.level for r in memory if r.cache is not None and r.level}
    return ([r for r in compute if r.precision in precisions],
            [r for r in memory if r.level in levels])


def _dram_for(rs: RoofSet, source: str) -> Roof | None:
    return rs.memory("dram", source) or rs.memory("dram")


def ridge_points(rs: RoofSet, compute: list[Roof]) -> list[tuple[Roof, float]]:
    """(compute roof, intensity where it meets the DRAM roof of its source)."""
    out = []
    for c in compute:
        m = _dram_for(rs, c.source)
        if m is not None:
            out.append((c, c.value / m.value))
    return out


# -- frame ----------------------------------------------------------------------------------

def _decade_floor(v: float) -> float:
    return 10.0 ** math.floor(math.log10(v))


def _decade_ceil(v: float) -> float:
    return 10.0 ** math.ceil(math.log10(v))


def frame(roofsets: list[RoofSet], points: list[Point]) -> tuple[tuple, tuple]:
    """Axes limits from every roof of the devices (decades), widened for outlying points."""
    ridges, tops, bws = [], [], []
    for rs in roofsets:
        comp, mem = best_roofs(rs, all_roofs=True)
        tops += [r.value for r in comp]
        bws += [r.value for r in mem if r.level == "dram"]
        ridges += [x for _, x in ridge_points(rs, comp)]
    if ridges:
        xlo, xhi = _decade_floor(min(ridges) / 256), _decade_ceil(max(ridges) * 16)
    else:
        xlo, xhi = 0.01, 1000.0
    xs = [p.ai for p in points] + [p.hw_ai for p in points if p.hw_ai]
    if xs:
        xlo = min(xlo, _decade_floor(min(xs) / 2))
        xhi = max(xhi, _decade_ceil(max(xs) * 4))
    lows = [b * xlo for b in bws] + [p.flops for p in points]
    highs = [t * 3 for t in tops] + [p.flops * 4 for p in points]
    ylo = _decade_floor(min(lows) / 2) if lows else 1e9
    yhi = _decade_ceil(max(highs)) if highs else 1e15
    if tops and not points:
        ylo = max(ylo, _decade_floor(min(tops) / 1e4))
    return (xlo, xhi), (ylo, yhi)
