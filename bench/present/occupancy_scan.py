"""An occupancy scan in the report: each case's levels, the level at which the plateau under
its roof is reached, and the figure of achieved bandwidth against occupancy.

The plateau is reached at the first level (lowest occupancy) whose achieved DRAM bandwidth is
within ``WITHIN`` (5%) of the best level's; the best level's efficiency says how far that
plateau is from the roof itself. A memory-bound case rises and flattens under its bandwidth
roof: occupancy hides latency but never moves it past the roof (only intensity would).
"""

from __future__ import annotations

import io
from dataclasses import dataclass
from pathlib import Path

from roofbench.fileio import atomic_write_bytes
from roofbench.records import CaseResult, RunResult
from roofbench.units import duration, si

from .blocks import Block, Image, Section, Sub, Table, Text

WITHIN = 0.05  # a level within 5% of the best level's bandwidth has reached the plateau


@dataclass
class Scan:
    """One case's levels (lowest first): what the scan measured of it."""

    title: str
    levels: list[CaseResult]

    @property
    def valid(self) -> list[CaseResult]:
        return [c for c in self.levels if c.outcome.status == "ok" and c.measurement.median_s]

    def constant_counts(self) -> bool:
        """Whether every level counts the same FLOPs and bytes (the scan's premise)."""
        return len({(d.flops, tuple(sorted(d.bytes.items())))
                    for c in self.levels if (d := c.declaration)}) <= 1

    def best(self) -> CaseResult | None:
        return max(self.valid, key=bandwidth, default=None)

    def reached(self) -> CaseResult | None:
        """The first level within WITHIN of the best level's DRAM bandwidth."""
        best = self.best()
        if best is None:
            return None
        return next(c for c in self.valid if bandwidth(c) >= (1 - WITHIN) * bandwidth(best))


def bandwidth(c: CaseResult) -> float:
    return c.roofline.bytes_per_s.get("dram", 0.0)


def scans(run: RunResult) -> list[Scan]:
    """The run's occupancy scans, one per case (backend, workload, variant, dtype, size)."""
    groups: dict[tuple[str, str, str, str, tuple[int, ...]], list[CaseResult]] = {}
    for c in run.cases:
        if c.identity.occupancy_level is not None:
            i = c.identity
            groups.setdefault((i.backend, i.workload, i.variant, i.dtype, tuple(i.size)),
                              []).append(c)
    out = []
    for (backend, w, v, d, size), cs in groups.items():
        cs.sort(key=lambda c: c.identity.occupancy_level.value if c.identity.occupancy_level else 0)
        out.append(Scan(f"{w}/{v} {d} {'x'.join(map(str, size))} ({backend})", cs))
    return out


def theoretical(c: CaseResult) -> float | None:
    """The level's occupancy as a fraction: threads / cores on a CPU; on a GPU the kernels'
    theoretical occupancy (weighted by each launch's time when there are several)."""
    lv = c.identity.occupancy_level
    if lv is None:
        return None
    if lv.axis == "threads":
        return lv.fraction
    launches = c.measurement.launches
    return _weighted(c, [la.occupancy.occupancy if la.occupancy else None for la in launches])


def achieved(c: CaseResult) -> float | None:
    """The achieved occupancy ncu measured (run with --ncu), weighted as ``theoretical``."""
    return _weighted(c, [la.counters.achieved_occupancy if la.counters else None
                         for la in c.measurement.launches])


def _weighted(c: CaseResult, values: list[float | None]) -> float | None:
    if not values or any(v is None for v in values):
        return None
    if len(values) == 1:
        return values[0]
    times = [la.timing.median if la.timing else 0.0 for la in c.measurement.launches]
    total = sum(times)
    if not total:
        return None
    return sum(v * t for v, t in zip(values, times, strict=True) if v is not None) / total


def x_of(c: CaseResult) -> float | None:
    """Where a level sits on the figure's axis: achieved occupancy when measured, else the
    theoretical one."""
    a = achieved(c)
    return a if a is not None else theoretical(c)


def level_text(c: CaseResult) -> str:
    lv = c.identity.occupancy_level
    if lv is None:
        return "-"
    unit = "threads" if lv.axis == "threads" else "blocks/SM"
    return f"{lv.value} of {lv.of} {unit}"


def _pct(v: float | None) -> str:
    return f"{v:.0%}" if v is not None else "-"


def scan_rows(s: Scan) -> list[dict[str, str]]:
    best = s.best()
    top = bandwidth(best) if best is not None else 0.0
    return [{"level": level_text(c), "occupancy": _pct(theoretical(c)),
             "achieved (ncu)": _pct(achieved(c)), "time": duration(m.median_s),
             "DRAM B/s": si(bandwidth(c) if m.median_s else None, "B/s"),
             "of best": _pct(bandwidth(c) / top) if top and m.median_s else "-",
             "efficiency": _pct(c.roofline.efficiency), "status": c.outcome.status + (
                 " (noisy)" if m.timing and any(f.startswith("noisy") for f in m.timing.flags)
                 else "")} for c in s.levels if (m := c.measurement)]


def reached_text(s: Scan) -> str:
    best, at = s.best(), s.reached()
    if best is None or at is None:
        return "No level ran to completion."
    return (f"The plateau is reached at {level_text(at)} (occupancy {_pct(theoretical(at))}): "
            f"{si(bandwidth(at), 'B/s')}, within {WITHIN:.0%} of the best level "
            f"({level_text(best)}, {si(bandwidth(best), 'B/s')}, "
            f"{_pct(best.roofline.efficiency)} of its roof{_roof(best)}).")


def _roof(c: CaseResult) -> str:
    return f", {c.roofline.limiting_roof}" if c.roofline.limiting_roof else ""


def occupancy_section(run: RunResult) -> Section | None:
    found = scans(run)
    if not found:
        return None
    out: list[Block] = [
        Text(f"One case per occupancy level, the same FLOPs and bytes at each. The plateau is "
             f"reached at the first level whose DRAM bandwidth is within {WITHIN:.0%} of the "
             "best level's; the best level's efficiency is its distance to the roof. "
             "Occupancy on a CPU: Numba threads / cores; on a GPU: theoretical occupancy of "
             "the resident blocks per SM (limited through dynamic shared memory and the grid), "
             "achieved occupancy from Nsight Compute with --ncu."),
        Image("occupancy.png", "achieved DRAM bandwidth against occupancy",
              svg=lambda: occupancy_svg(run))]
    for s in found:
        same = s.constant_counts()
        out += [Sub(s.title), Text(reached_text(s) + (
            " FLOPs and bytes are identical at every level." if same else
            " _The levels do not count the same FLOPs and bytes: this is not a scan._")),
            Table(scan_rows(s))]
    return Section("Occupancy scan", out)


# -- the figure -----------------------------------------------------------------------------

def plot_occupancy(run: RunResult, out_base: Path) -> list[Path]:
    """occupancy.png/.svg beside ``out_base``; [] when the run has no scan with a valid level."""
    paths: list[Path] = []
    for ext in ("png", "svg"):
        data = _render(run, ext)
        if data is None:
            return []
        path = out_base.with_suffix(f".{ext}")
        atomic_write_bytes(path, data)
        paths.append(path)
    return paths


def occupancy_svg(run: RunResult) -> str:
    """The figure as SVG markup (report.html inlines it)."""
    data = _render(run, "svg")
    return data.decode() if data is not None else ""


def _render(run: RunResult, fmt: str) -> bytes | None:
    """Achieved DRAM bandwidth against occupancy, one line per scan, the measured DRAM roof,
    each scan's plateau level ringed; None when the run has no scan with a valid level."""
    found = [s for s in scans(run) if s.valid]
    if not found:
        return None
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(8.5, 5.2), dpi=110)
    for s in found:
        pts = [(x, bandwidth(c)) for c in s.valid if (x := x_of(c)) is not None]
        if not pts:
            continue
        xs, ys = zip(*pts, strict=True)
        (ln,) = ax.plot(xs, ys, "o-", lw=1.5, ms=6, label=s.title)
        at = s.reached()
        x_at = x_of(at) if at is not None else None
        if at is not None and x_at is not None:
            ax.plot([x_at], [bandwidth(at)], "o", ms=14, mfc="none", mec=ln.get_color(),
                    mew=1.5)
    roof = run.roofs.memory("dram") if run.roofs else None
    if roof is not None:
        ax.axhline(roof.value, color="black", lw=1.4,
                   label=f"DRAM roof {si(roof.value, 'B/s')} ({roof.source})")
    ax.plot([], [], "o", ms=12, mfc="none", mec="gray",
            label=f"plateau reached (within {WITHIN:.0%} of the best)")
    from matplotlib.ticker import FuncFormatter

    ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _pos: si(v, "B/s") if v else "0"))
    ax.set_xlim(0, 1.05)
    ax.set_ylim(0, None)
    ax.set_xlabel("occupancy (CPU: threads / cores; GPU: resident warps / maximum)")
    ax.set_ylabel("achieved DRAM bandwidth (B/s)")
    ax.set_title(f"Occupancy scan: {run.device} ({run.backend})", fontsize=10)
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=7, loc="lower right")
    fig.tight_layout()
    buf = io.BytesIO()
    fig.savefig(buf, format=fmt)
    plt.close(fig)
    return buf.getvalue()
