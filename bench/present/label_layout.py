"""Placing the static roofline's labels: each roof's label on its own line, each point's
number beside it, where they cover no other label, point, ridge marker or line (display-space
boxes; Liang-Barsky for the lines)."""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from matplotlib.transforms import Bbox

from roofbench.roof_records import Roof

from .figure_data import PREC_COLORS


def seg_hits(bb: Bbox, seg: tuple[float, float, float, float]) -> bool:
    """Does the display segment cross the box? (Liang-Barsky clipping)"""
    x0, y0, x1, y1 = seg
    dx, dy = x1 - x0, y1 - y0
    t0, t1 = 0.0, 1.0
    for p, q in ((-dx, x0 - bb.x0), (dx, bb.x1 - x0), (-dy, y0 - bb.y0), (dy, bb.y1 - y0)):
        if p == 0:
            if q < 0:
                return False
            continue
        r = q / p
        if p < 0:
            t0 = max(t0, r)
        else:
            t1 = min(t1, r)
        if t0 > t1:
            return False
    return True


@dataclass
class Layout:
    """Display-space boxes already taken, the lines labels should not cross, and the axes box
    labels must stay inside."""

    inside: Bbox
    taken: list[Bbox] = field(default_factory=list)
    segments: list[tuple[object, tuple[float, float, float, float]]] = field(
        default_factory=list)

    def fits(self, bb: Bbox, own: object = None, lines: bool = True, pad: float = 2.0) -> bool:
        bb = bb.padded(pad)
        if not (self.inside.x0 <= bb.x0 and bb.x1 <= self.inside.x1
                and self.inside.y0 <= bb.y0 and bb.y1 <= self.inside.y1):
            return False
        if any(bb.overlaps(t) for t in self.taken):
            return False
        return not (lines and any(seg_hits(bb, s) for o, s in self.segments if o is not own))


def text_size(ax, renderer, text: str, fontsize: float) -> tuple[float, float]:
    t = ax.text(0, 0, text, fontsize=fontsize, transform=None)
    bb = t.get_window_extent(renderer)
    t.remove()
    return bb.width, bb.height


def box(cx: float, cy: float, w: float, h: float, angle: float = 0.0) -> Bbox:
    """Axis-aligned box of a w x h text centred at (cx, cy), rotated by angle degrees."""
    a = math.radians(angle)
    hw = (abs(w * math.cos(a)) + abs(h * math.sin(a))) / 2
    hh = (abs(w * math.sin(a)) + abs(h * math.cos(a))) / 2
    return Bbox.from_extents(cx - hw, cy - hh, cx + hw, cy + hh)


def choose(layout: Layout, cands, own: object = None):
    """The first candidate (centre x, centre y, box, ...) whose box fits: clear of lines if
    possible, else only clear of boxes. Its box is then taken."""
    for lines in (True, False):
        for cand in cands:
            if layout.fits(cand[2], own=own, lines=lines):
                layout.taken.append(cand[2])
                return cand
    return None


def label_roof(ax, renderer, layout: Layout, roof: Roof, texts: list[str], seg,
                alpha: float):
    """Write the roof's label along its own line, at the first free spot; None if none is."""
    pa, pb = (ax.transData.transform(p) for p in seg)
    faint = roof.source not in ("measured", "user")
    color = "black" if roof.kind == "memory" else PREC_COLORS.get(roof.key, "gray")
    angle = math.degrees(math.atan2(pb[1] - pa[1], pb[0] - pa[0]))
    nx, ny = -math.sin(math.radians(angle)), math.cos(math.radians(angle))
    # Measured labels go under their line first, datasheet ones over it: a datasheet roof is
    # usually the higher of the two.
    sides = (1, -1) if faint else (-1, 1)
    if roof.kind == "memory":
        fracs = [0.5, 0.4, 0.6, 0.3, 0.7, 0.2, 0.8, 0.12, 0.88, 0.45, 0.55, 0.35, 0.65]
    else:
        fracs = [1.0, 0.85, 0.7, 0.55, 0.4, 0.25, 0.1, 0.92, 0.78, 0.62, 0.48, 0.32]
    cands = []
    for text in texts:
        w, h = text_size(ax, renderer, text, 7)
        for f in fracs:
            for side in sides:
                if roof.kind == "memory":
                    cx, cy = pa + (pb - pa) * f
                else:  # right-aligned at the fraction, but never past the axes' right edge
                    cx = min(pa[0] + (pb[0] - pa[0]) * f, layout.inside.x1 - 4) - w / 2
                    cy = pa[1]
                off = h / 2 + 2
                cx, cy = cx + side * off * nx, cy + side * off * ny
                cands.append((cx, cy, box(cx, cy, w, h, angle), text))
    got = choose(layout, cands, own=roof)
    if got is None:
        return None
    cx, cy, _bb, text = got
    return ax.text(*ax.transData.inverted().transform((cx, cy)), text, fontsize=7,
                   color=color, alpha=max(alpha, 0.75), rotation=angle,
                   rotation_mode="anchor", ha="center", va="center", zorder=6)


def label_point(ax, renderer, layout: Layout, text: str, x: float, y: float):
    """The point's number close to it (a leader line when it had to move further)."""
    px, py = ax.transData.transform((x, y))
    w, h = text_size(ax, renderer, text, 7)
    cands = []
    for r in (10, 14, 20, 28, 38, 50, 64, 80):
        for k in range(16):
            ang = math.pi / 4 + 2 * math.pi * k / 16
            cx, cy = px + r * math.cos(ang), py + r * math.sin(ang)
            cands.append((cx, cy, box(cx, cy, w, h), r))
    got = choose(layout, cands)
    if got is None:
        return None
    cx, cy, _bb, r = got
    far = r > 14
    return ax.annotate(text, (x, y), textcoords="offset pixels", xytext=(cx - px, cy - py),
                       fontsize=7, ha="center", va="center", zorder=7,
                       arrowprops={"arrowstyle": "-", "lw": 0.5, "color": "gray",
                                   "shrinkA": 0, "shrinkB": 5} if far else None)
