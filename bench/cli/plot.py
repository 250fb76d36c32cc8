"""`roofbench plot`: redraw the roofline of a stored run."""

from __future__ import annotations

import argparse
from pathlib import Path

from ..results import check_writable, load_run, resolve_run


def cmd_plot(args: argparse.Namespace) -> int:
    from ..present.plot import plot_run

    run = load_run(args.run)
    base = Path(args.out) if args.out else resolve_run(args.run).parent / "roofline"
    check_writable(base.parent)
    for p in plot_run(run, base.with_suffix(""), all_roofs=args.all_roofs):
        print(p)
    return 0


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("plot", help="redraw the roofline of a stored run")
    p.add_argument("run", help="run folder or its results.json")
    p.add_argument("--out", help="output path without extension (default: in the run folder)")
    p.add_argument("--all-roofs", action="store_true",
                   help="draw every roof, not only those the plotted points use")
    p.set_defaults(func=cmd_plot)
