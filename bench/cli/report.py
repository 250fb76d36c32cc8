"""`roofbench report`: rewrite report.md and report.html of a stored run; a profile's folder
(`roofbench model`, `roofbench.profile`) gets its own report back: profile.md, report.html
and its roofline, from results.json and the sections it stored (profile.json)."""

from __future__ import annotations

import argparse
from pathlib import Path

from ..results import check_output_paths, load_for_output, resolve_run
from .argtypes import stored_run_parser


def profile_paths(path: Path, default: bool) -> tuple[Path, Path]:
    """(profile.md, the roofline's base) of a profile's report: beside results.json by
    default, else ``--out``'s file and ``<stem>-roofline`` beside it."""
    if default:
        return path, path.parent / "roofline"
    return path, path.with_name(f"{path.stem}-roofline")


def cmd_report(args: argparse.Namespace) -> int:
    from ..present.outputs import write_report
    from ..profile.report import load_stored, render_profile

    stored = load_stored(resolve_run(args.run).parent)
    if stored is None:
        run, path = load_for_output(args.run, args.out, "report.md", suffixes=("", ".html"))
        for p in write_report(run, path):
            print(p)
        return 0
    run, path = load_for_output(args.run, args.out, "profile.md", suffixes=("", ".html"))
    md, fig = profile_paths(path, args.out is None)
    html = md.parent / "report.html" if md.name == "profile.md" else md.with_suffix(".html")
    check_output_paths([html, fig.with_suffix(".png"), fig.with_suffix(".svg")],
                       inputs=[resolve_run(args.run)])
    for p in render_profile(run, stored, md, fig):
        print(p)
    return 0


def register(sub: argparse._SubParsersAction) -> None:
    p = stored_run_parser(sub, "report", "rewrite report.md and report.html of a stored run "
                                         "(a profile's: profile.md and report.html)",
                          "output file (default: report.md in the run folder, profile.md "
                          "in a profile's)")
    p.set_defaults(func=cmd_report)
