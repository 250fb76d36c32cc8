"""Roofs for a run: the calibrated file of a GPU (measured once, reused), or a fresh measurement.

``obtain_roofs`` is what `roofbench run/bench` call; ``calibrate`` is `roofbench calibrate`.
Printing (a rich table of measured vs datasheet) and the device's roofline plot live here too.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.markup import escape
from rich.table import Table
from roofbench.roofs.calibrated import (
    CalibrationError,
    default_path,
    load_roofs,
    save_calibrated,
    side_by_side,
)
from roofbench.roofs.model import device_slug

from roofbench.schema import RoofSet

from ..backends import base as backends
from ..errors import UserError


def wide_console() -> Console:
    """Rich falls back to 80 columns when stdout is not a terminal; tables of figures read
    better unwrapped in a log than folded."""
    return Console() if sys.stdout.isatty() else Console(width=160)


def obtain_roofs(backend: backends.Backend, *, roofs_file: str | Path | None = None,
                 cache: str | Path | None = None, recalibrate: bool = False,
                 quick: bool = False, progress: Callable[[str], None] | None = None) -> RoofSet:
    """The roofs a run is placed under: one policy for `roofbench run` and `bench`.

    - ``roofs_file`` (``--roofs``): that file as given, on any backend, read by the one loader
      (a calibrated file, a bare roof set, a run's results.json); never measured, never
      written. It may be another device's (the machine a kernel is tuned for, a hand-written
      set): it is used, and the run records "roofs come from X, cases ran on Y" in its notes
      and report. A file that cannot be read is a one-line error naming it.
    - GPU without ``--roofs``: the calibration cache (``cache``, by default roofs/<slug>.json),
      reused when present, else measured and saved; ``recalibrate`` measures it again. A cache
      that is corrupt or holds another device's roofs (a file copied from another machine) is a
      one-line error with --recalibrate advice: a cache is never silently used, nor silently
      overwritten.
    - CPU without ``--roofs``: measured every run (seconds, and the load of the machine moves
      them), never cached.
    """
    if roofs_file:
        return _load(Path(roofs_file), require_schema=False)
    if backend.kind != "gpu":
        return backend.measure_roofs(quick=quick, progress=progress)
    path = Path(cache) if cache else default_path(backend.device_name())
    if path.exists() and not recalibrate:
        rs = _load(path, require_schema=True)
        if device_slug(rs.device) != device_slug(backend.device_name()):
            raise UserError(f"{path} holds roofs of {rs.device!r}, this GPU is "
                            f"{backend.device_name()!r}; run `roofbench calibrate "
                            f"--recalibrate` or pass the right --roofs file")
        return rs
    rs = backend.measure_roofs(quick=quick, progress=progress)
    try:
        save_calibrated(rs, path)
        rs.info["calibrated_file"] = str(path)
    except OSError as e:  # an unwritable package folder must not lose the measurement
        rs.info["calibrated_file_error"] = f"{path}: {e.strerror or e}"
    return rs


def _load(path: Path, require_schema: bool) -> RoofSet:
    try:
        return load_roofs(path, require_schema=require_schema)
    except CalibrationError as e:
        raise UserError(str(e)) from None


def open_cuda(device: int = 0) -> backends.Backend:
    """The CUDA backend on one device, or a one-line UserError saying why there is none."""
    why = backends.unavailable_reason("cuda")
    if why is not None:
        line = str(why).strip().splitlines()[0] if str(why).strip() else "unknown reason"
        raise UserError(f"no CUDA GPU here: {line}")
    cls = backends.backend_class("cuda")
    try:
        return cls(device=device)  # type: ignore[call-arg]
    except TypeError:
        if device:
            raise UserError(f"the cuda backend cannot select --device {device}") from None
        return cls()


def fmt_value(v: float | None, unit: str) -> str:
    if v is None:
        return "-"
    for scale, prefix in ((1e15, "P"), (1e12, "T"), (1e9, "G"), (1e6, "M")):
        if v >= scale:
            return f"{v / scale:.3f} {prefix}{unit}"
    return f"{v:.3g} {unit}"


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
        cells = [row["key"], fmt_value(row["measured"], unit), row["measured_by"] or "-",
                 fmt_value(row["datasheet"], unit), f"{r1:.1%}" if r1 else "-",
                 fmt_value(row["theoretical"], unit), f"{r2:.1%}" if r2 else "-"]
        if with_mma:
            cells.append(fmt_value(row.get("mma_sync"), unit))
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
            extra = f"SMs x lanes x 2 x clock = {fmt_value(r['theoretical_at_clock'], unit)}" \
                    f" ({r['value'] / r['theoretical_at_clock']:.1%})"
        t.add_row(str(r.get("probe")), str(r.get("key")), fmt_value(r.get("value"), unit),
                  str(extra))
    return t


# Targets of issue 10 (HBM against the libraries and the datasheet, FMA against the clock).
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
    t = Table(title="ratios (issue 10 targets)")
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
        from ..present.plot import plot_roofline
    except ImportError as e:
        return [], f"plot module unavailable ({e})"
    try:
        paths = plot_roofline(roofsets, [[] for _ in roofsets], out_base, title, tags=tags)
    except Exception as e:  # a plot must never lose a calibration
        return [], f"plot failed: {type(e).__name__}: {e}"
    return list(paths), None


def calibrate(device: int = 0, *, quick: bool = False, recalibrate: bool = False,
              out: str | Path | None = None,
              progress: Callable[[str], None] | None = None) -> tuple[RoofSet, Path, bool]:
    """`roofbench calibrate`: (roofs, file, measured now?)."""
    be = open_cuda(device)
    path = Path(out) if out else default_path(be.device_name())
    if path.exists() and not recalibrate:
        rs = _load(path, require_schema=True)
        return rs, path, False
    rs = be.measure_roofs(quick=quick, progress=progress)
    try:
        save_calibrated(rs, path)
    except OSError as e:
        raise UserError(f"cannot write {path}: {e.strerror or e}") from None
    return rs, path, True
