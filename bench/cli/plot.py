"""`roofbench plot`: redraw the roofline of a stored run (and an occupancy scan's figure); a
profile's folder gets its own figure back (its points numbered as profile.md ranks them)."""

from __future__ import annotations

import argparse

from ..results import load_for_output, resolve_run
from .argtypes import stored_run_parser


def cmd_plot(args: argparse.Namespace) -> int:
    from ..present.occupancy_scan import plot_occupancy
    from ..present.plot import plot_run
    from ..profile.report import load_stored, plot_profile

    stored = load_stored(resolve_run(args.run).parent)
    run, base = load_for_output(args.run, args.out, "roofline", suffixes=(".png", ".svg"))
    base = base.with_suffix("")
    if stored is not None:
        for p in plot_profile(run, stored, base, all_roofs=args.all_roofs):
            print(p)
        return 0
    for p in plot_run(run, base, all_roofs=args.all_roofs) + plot_occupancy(
            run, base.with_name(base.name.replace("roofline", "occupancy"))):
        print(p)
    return 0


def register(sub: argparse._SubParsersAction) -> None:
    p = stored_run_parser(sub, "plot", "redraw the roofline of a stored run",
                          "output path without extension (default: in the run folder)")
    p.add_argument("--all-roofs", action="store_true",
                   help="draw every roof, not only those the plotted points use")
    p.set_defaults(func=cmd_plot)
