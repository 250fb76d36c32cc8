"""`roofbench report`: rewrite report.md and report.html of a stored run."""

from __future__ import annotations

import argparse

from ..results import atomic_write_text, load_for_output
from .argtypes import stored_run_parser


def cmd_report(args: argparse.Namespace) -> int:
    from ..present.report import render
    from ..present.report_html import missing_note, render_html

    run, path = load_for_output(args.run, args.out, "report.md")
    note = missing_note()
    atomic_write_text(path, render(run) + (f"\n> {note}\n" if note else ""))
    print(path)
    page = path.with_suffix(".html")  # report.html beside it
    atomic_write_text(page, render_html(run))
    print(page)
    return 0


def register(sub: argparse._SubParsersAction) -> None:
    p = stored_run_parser(sub, "report", "rewrite report.md and report.html of a stored run",
                          "output file (default: report.md in the run folder)")
    p.set_defaults(func=cmd_report)
