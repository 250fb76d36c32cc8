"""`roofbench report`: rewrite report.md and report.html of a stored run."""

from __future__ import annotations

import argparse

from ..results import load_for_output
from .argtypes import stored_run_parser


def cmd_report(args: argparse.Namespace) -> int:
    from ..present.outputs import write_report

    run, path = load_for_output(args.run, args.out, "report.md", suffixes=("", ".html"))
    for p in write_report(run, path):
        print(p)
    return 0


def register(sub: argparse._SubParsersAction) -> None:
    p = stored_run_parser(sub, "report", "rewrite report.md and report.html of a stored run",
                          "output file (default: report.md in the run folder)")
    p.set_defaults(func=cmd_report)
