"""`roofbench roofs [--backend B] [--quick] [--out FILE]` measures and writes a roofs JSON for
any backend; `roofbench roofs --compare A.json B.json [--out PNG]` puts two devices on one plot.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from rich.table import Table
from roofbench.roofs.files import RoofsFileError, load_roofs

from roofbench.roof_records import RoofSet
from roofbench.roofline import side_by_side
from roofbench.units import si

from ..backends import REGISTRY
from ..backends import base as backends
from ..errors import UserError
from ..measure.roof_source import roofs_file, source
from ..present.tables import plot_device, print_summary, wide_console
from ..results import check_output_paths, check_writable
from .progress import steps


def _measure(args: argparse.Namespace) -> int:
    """Measured now, whatever is cached, and written to --out, else to a GPU's calibration
    cache (a CPU's roofs are measured on every run): roof_source.source, purpose "measure"."""
    be = backends.open_for_user(args.backend or "auto")
    out = roofs_file(be, "measure", args.out)
    if out is not None:  # before the probes: a bad --out never costs their minutes
        check_output_paths([out])
        check_writable(out.parent)
    with steps("roofs") as say:
        rs = source(be, "measure", file=out, quick=args.quick, progress=say).roofs
    print_summary(rs)
    if out is None:
        print("not saved (CPU roofs are measured on every run); --out FILE saves them")
        return 0
    print(f"roofs: {out}")
    return 0


def _load(path: str) -> RoofSet:
    try:
        return load_roofs(Path(path))
    except RoofsFileError as e:
        raise UserError(str(e)) from None


def compare_table(a: RoofSet, b: RoofSet) -> Table:
    t = Table(title=f"A: {a.device}  vs  B: {b.device}")
    for col in ("roof", "A", "B", "B/A"):
        t.add_column(col)
    rows_a = {(r["kind"], r["key"]): r for r in side_by_side(a)}
    rows_b = {(r["kind"], r["key"]): r for r in side_by_side(b)}
    for key in list(rows_a) + [k for k in rows_b if k not in rows_a]:
        ra, rb = rows_a.get(key), rows_b.get(key)
        unit = "B/s" if key[0] == "memory" else "FLOP/s"

        def best(r: dict | None) -> tuple[float | None, str]:
            if r is None:
                return None, ""
            if r["measured"] is not None:
                return r["measured"], ""
            return r["datasheet"], " (datasheet)" if r["datasheet"] is not None else ""
        va, sa = best(ra)
        vb, sb = best(rb)
        t.add_row(key[1], si(va, unit) + sa, si(vb, unit) + sb,
                  f"{vb / va:.2f}x" if va and vb else "-")
    return t


def _compare(args: argparse.Namespace) -> int:
    if args.backend is not None or args.quick:
        raise UserError("--compare draws two roofs files already measured: it takes no "
                        "--backend or --quick")
    a, b = (_load(p) for p in args.compare)
    wide_console().print(compare_table(a, b))
    base = Path(args.out).with_suffix("") if args.out else \
        Path(args.compare[1]).with_name("compare-roofs")
    check_output_paths([base.with_suffix(".png"), base.with_suffix(".svg")],
                       inputs=[Path(p) for p in args.compare])
    check_writable(base.parent)
    paths, why = plot_device([a, b], base, f"A: {a.device}  vs  B: {b.device}",
                             tags=["A: ", "B: "])
    if not paths:
        raise UserError(f"could not draw {base}.png: {why}")
    print(f"plot: {paths[0]}")
    return 0


def cmd_roofs(args: argparse.Namespace) -> int:
    return _compare(args) if args.compare else _measure(args)


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("roofs", help="measure a backend's roofs and write them as JSON, or "
                                     "--compare two roofs files on one plot")
    p.add_argument("--backend", default=None,
                   help="auto (best available, the default), " + ", ".join(REGISTRY))
    p.add_argument("--quick", action="store_true", help="short probes")
    p.add_argument("--out", metavar="FILE", help="roofs JSON to write (with --compare: the "
                                                 "plot, .png/.svg)")
    p.add_argument("--compare", nargs=2, metavar=("A.json", "B.json"),
                   help="draw two devices' roofs on one plot")
    p.set_defaults(func=cmd_roofs)
