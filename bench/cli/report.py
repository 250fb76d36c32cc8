"""`roofbench report`: rewrite report.md and report.html of a stored run."""

from __future__ import annotations

import argparse
from pathlib import Path

from ..results import atomic_write_text, check_writable, load_run, resolve_run


def cmd_report(args: argparse.Namespace) -> int:
    from ..present.report import render
    from ..present.report_html import missing_note, render_html

    run = load_run(args.run)
    path = Path(args.out) if args.out else resolve_run(args.run).parent / "report.md"
    check_writable(path.parent)
    note = missing_note()
    atomic_write_text(path, render(run) + (f"\n> {note}\n" if note else ""))
    print(path)
    page = path.with_suffix(".html")  # report.html beside it
    atomic_write_text(page, render_html(run))
    print(page)
    return 0


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("report", help="rewrite report.md of a stored run")
    p.add_argument("run", help="run folder or its results.json")
    p.add_argument("--out", help="output file (default: report.md in the run folder)")
    p.set_defaults(func=cmd_report)
