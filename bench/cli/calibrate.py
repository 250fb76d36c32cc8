"""`roofbench calibrate [--recalibrate] [--quick] [--device N] [--out FILE]`."""

from __future__ import annotations

import argparse

from ..measure.roof_source import calibrate
from ..present.tables import plot_device, print_summary
from .progress import steps


def cmd_calibrate(args: argparse.Namespace) -> int:
    with steps("calibrate", timed=True) as say:
        rs, path, measured = calibrate(args.device, quick=args.quick,
                                       recalibrate=args.recalibrate, out=args.out,
                                       progress=say)
    if measured:
        print(f"calibrated {rs.device}: {path}")
    else:
        print(f"using calibrated {path} (from {rs.info.get('calibrated_utc', '?')}); "
              "--recalibrate measures again")
    print_summary(rs)
    if not args.no_plot:
        paths, why = plot_device([rs], path.with_suffix(""), f"{rs.device}: measured roofs "
                                 "(solid), datasheet (dashed), ERT curves (dotted)")
        print(f"plot: {paths[0]}" if paths else f"plot: not drawn ({why})")
    return 0


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("calibrate", help="measure this GPU's roofs once and save them "
                                         "(roofs/<device>.json)")
    p.add_argument("--recalibrate", action="store_true",
                   help="measure again even when a calibrated file exists")
    p.add_argument("--quick", action="store_true", help="short probes (under a minute)")
    p.add_argument("--device", type=int, default=0, metavar="N", help="CUDA device index")
    p.add_argument("--out", metavar="FILE", help="calibrated file (default roofs/<device>.json)")
    p.add_argument("--no-plot", action="store_true", help="do not draw the roofline")
    p.set_defaults(func=cmd_calibrate)
