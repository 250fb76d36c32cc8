"""Roofs as tables on the terminal: measured beside datasheet and theoretical, every probe,
the ratio targets, and the device's roofline plot (`roofbench calibrate`, `roofbench roofs`).

Where the roofs come from (the calibrated file, a fresh measurement) is
bench/measure/roof_source.py; this module only shows them.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from roofbench.errors_text import first_line
from roofbench.roof_records import RoofSet
from roofbench.roofline import side_by_side
from roofbench.units import si


def wide_console() -> Console:
    """Rich falls back to 80 columns when stdout is not a terminal; tables of figures read
    better unwrapped in a log than folded."""
    return Console() if sys.stdout.isatty() else Console(width=160)


def roofs_table(rs: RoofSet, title: str | None = None) -> Table:
    t = Table(title=title or f"roofs of {rs.device}")
    rows = side_by_side(rs)
    with_mma = any(r.get("mma_sync") for r in rows)
    cols = ["roof", "measured", "by", "datasheet", "measured/datasheet", "theoretical",
            "measured/theoretical"] + (["mma.sync ceiling"] if with_mma else [])
    for col in cols:
        t.add_column(col, overflow="fold")
    for row in rows:
        unit = "B/s" if row["kind"] == "memory" else "FLOP/s"
        r1 = row["measured_over_datasheet"]
        r2 = row["measured_over_theoretical"]
        cells = [row["key"], si(row["measured"], unit), row["measured_by"] or "-",
                 si(row["datasheet"], unit), f"{r1:.1%}" if r1 else "-",
                 si(row["theoretical"], unit), f"{r2:.1%}" if r2 else "-"]
        if with_mma:
            cells.append(si(row.get("mma_sync"), unit))
        t.add_row(*cells)
    return t


def probes_table(rs: RoofSet) -> Table | None:
    """Every probe's figure (the roofs table shows only the best per level/precision)."""
    rows: list[dict[str, Any]] = rs.info.get("probes") or []
    if not rows:
        return None
    t = Table(title="every probe")
    for col in ("probe", "roof", "value", "config / clock peak"):
        t.add_column(col, overflow="fold")
    for r in rows:
        unit = "B/s" if r.get("kind") == "memory" else "FLOP/s"
        extra = r.get("config") or ""
        if r.get("theoretical_at_clock"):
            extra = f"SMs x lanes x 2 x clock = {si(r['theoretical_at_clock'], unit)}" \
                    f" ({r['value'] / r['theoretical_at_clock']:.1%})"
        t.add_row(str(r.get("probe")), str(r.get("key")), si(r.get("value"), unit),
                  str(extra))
    return t


# The calibration's targets: HBM against the libraries and the datasheet, FMA against the clock.
_TC = ("fp16_tc", "bf16_tc", "fp8_tc")


def _measured(rs: RoofSet, kind: str, key: str, ceiling: str | None = None) -> float | None:
    vals = [r.value for r in rs.roofs if r.source == "measured" and r.kind == kind
            and (r.level if kind == "memory" else r.precision) == key
            and (ceiling is None or r.evidence.get("ceiling") == ceiling)]
    return max(vals) if vals else None


def summary_ratios(rs: RoofSet) -> list[tuple[str, float, float | None]]:
    """(what, ratio, target or None) for calibrate's summary: each roof against the best
    library figure of the same run and against the datasheet, FMA probes against the clock
    peak, hand-written tensor ceilings (wgmma, mma.sync) against the library's."""
    out: list[tuple[str, float, float | None]] = []
    hbm = _measured(rs, "memory", "dram")
    refs = rs.info.get("reference_copies") or {}
    lib = max((v["bytes_per_s"] for v in refs.values() if v.get("bytes_per_s")), default=None)
    if hbm and lib:
        out.append(("HBM roof / best library copy-add-triad", hbm / lib, 1.0))
    ds = rs.memory("dram", "datasheet")
    if hbm and ds:
        out.append(("HBM roof / datasheet", hbm / ds.value, 0.90))
    for prec in ("fp64", "fp32", "fp16", "bf16"):
        r = rs.compute(prec, "measured")
        frac = r.evidence.get("fraction_of_clock_peak") if r else None
        if frac:
            out.append((f"{prec} FMA / clock peak", float(frac), 0.95))
    for prec in ("fp64_tc", "tf32_tc", *_TC):
        libv = _measured(rs, "compute", prec, "library")
        for ceiling, target in (("wgmma", None), ("mma.sync", None)):
            v = _measured(rs, "compute", prec, ceiling)
            if v and libv:
                out.append((f"{prec} {ceiling} probe / library GEMM", v / libv, target))
        roof = _measured(rs, "compute", prec)
        dsr = rs.compute(prec, "datasheet")
        if roof and dsr:
            out.append((f"{prec} roof / datasheet", roof / dsr.value, None))
    return out


def ratios_table(rs: RoofSet) -> Table | None:
    rows = summary_ratios(rs)
    if not rows:
        return None
    t = Table(title="ratios against their targets")
    for col in ("ratio", "value", "target", "met"):
        t.add_column(col, overflow="fold")
    for what, v, target in rows:
        met = "-" if target is None else ("yes" if v >= target else "NO")
        t.add_row(what, f"{v:.3f}", "-" if target is None else f">= {target:.2f}", met)
    return t


def print_summary(rs: RoofSet, console: Console | None = None) -> None:
    con = console or wide_console()
    con.print(roofs_table(rs))
    pt = probes_table(rs)
    if pt is not None:
        con.print(pt)
    for prec, e in (rs.info.get("ert") or {}).items():
        knee = e.get("measured_ridge")
        comp = e.get("computed_ridge")
        con.print(f"ERT {prec}: measured ridge {knee:.3g} FLOP/B" if knee else
                  f"ERT {prec}: no knee", end="")
        con.print(f", computed ridge {comp:.3g} FLOP/B" if comp else "")
    for k, v in (rs.info.get("probe_library_ratio") or {}).items():
        con.print(f"probe/library {k}: {v:.3f}")
    rt = ratios_table(rs)
    if rt is not None:
        con.print(rt)
    for f in rs.failed_probes:
        con.print(f"[yellow]not measured[/yellow] {escape(f.probe)}: {escape(f.reason)}")
    for note in rs.notes:
        con.print(f"note: {escape(note)}")
    if rs.elapsed_s is not None:
        con.print(f"probes took {rs.elapsed_s:.1f} s")


def plot_device(roofsets: list[RoofSet], out_base: Path, title: str,
                tags: list[str] | None = None) -> tuple[list[Path], str | None]:
    """The roofline of one or more devices (no kernel points); (paths, error or None)."""
    try:
        from .plot import plot_roofline
    except ImportError as e:
        return [], f"plot module unavailable ({e})"
    try:
        paths = plot_roofline(roofsets, [[] for _ in roofsets], out_base, title, tags=tags)
    except Exception as e:  # a plot must never lose a calibration
        return [], f"plot failed: {first_line(e)}"
    return list(paths), None
