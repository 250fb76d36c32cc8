"""Many points on one roofline: past ``DENSE_POINTS`` valid points, numbering each point and
placing its label (every label tested against every other: quadratic) would take minutes and
cover the plot. The points are then drawn as dots, one artist per workload and precision,
the fusion arrows and point numbers left out, and the key lists each group (workload/variant
dtype) with its count and median efficiency; a note on the plot says so."""

from __future__ import annotations

import statistics

from .figure_data import PREC_COLORS, Point

DENSE_POINTS = 120  # beyond this, points are dots and the key is by group
KEY_GROUPS = 60  # groups listed in the key at most (the rest counted in one line)


def dense_note(n: int) -> str:
    return (f"{n} points: drawn as dots without numbers (too many to label); the key lists "
            "each group with its count and median efficiency")


def draw_dense(ax, points_by_run: list[list[Point]], tags: list[str]):
    """Dots, one artist per (run, workload marker, precision); returns the artists, every
    point's data xy, and the key's lines."""
    artists, xy, key = [], [], []
    for i, pts in enumerate(points_by_run):
        tag = tags[i] if len(points_by_run) > 1 else ""
        by_glyph: dict[tuple[str, str], list[Point]] = {}
        by_group: dict[str, list[Point]] = {}
        for p in pts:
            by_glyph.setdefault((p.marker, p.precision), []).append(p)
            by_group.setdefault(f"{tag}{p.label}", []).append(p)
        for (marker, prec), group in sorted(by_glyph.items()):
            (ln,) = ax.plot([p.ai for p in group], [p.flops for p in group], marker,
                            linestyle="none", color=PREC_COLORS.get(prec, "gray"), ms=4,
                            mec="black", mew=0.3, alpha=0.5 if i == 0 else 0.35, zorder=5,
                            rasterized=True)
            artists.append(ln)
            xy += [(p.ai, p.flops) for p in group]
        groups = sorted(by_group.items())
        for label, group in groups[:KEY_GROUPS]:
            effs = [p.efficiency for p in group if p.efficiency]
            med = f"  median {statistics.median(effs):.0%}" if effs else ""
            key.append(f"{len(group):>5} x {label}{med}")
        if len(groups) > KEY_GROUPS:
            rest = sum(len(g) for _, g in groups[KEY_GROUPS:])
            key.append(f"{rest:>5} x {len(groups) - KEY_GROUPS} more groups")
    return artists, xy, key
