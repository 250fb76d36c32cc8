"""`roofbench compare A B`: per-case speedups of run B over run A, classified from the raw
samples (roofbench/gate.py), and the regression gate of a CI job (``--fail-on slower:5%``).

Writes the plot (``compare.png``/``.svg``), the page (``compare.html``) and the
classification (``compare.json``) beside each other. Exit codes: 1 when the gate fails (a case
it names, e.g. slower by more than the threshold and beyond the noise); 2 for bad input, and
when a gate was asked but nothing could be compared (no common case, or runs of different
devices: a gate that judged nothing must not pass); 0 otherwise (without a gate, two devices
side by side on one plot is a legitimate use: a note says that nothing was compared).
"""

from __future__ import annotations

import argparse
import json
import math
from pathlib import Path

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from roofbench.fileio import atomic_write_text
from roofbench.gate import Comparison, FailOn, classify
from roofbench.records import RunResult
from roofbench.run_checks import contradiction

from ..errors import UserError
from ..present.deltas import CAPTION, COLUMNS, cells, of_verdict
from ..results import check_output_paths, check_writable, load_run, resolve_run

DEFAULT_THRESHOLD = 0.05


def fraction(text: str) -> float:
    """'0.05' or '5%' -> 0.05; NaN, infinite or negative values are refused."""
    t = text.strip()
    try:
        v = float(t[:-1]) / 100 if t.endswith("%") else float(t)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number or a percentage: {text!r}") from None
    if not (math.isfinite(v) and v >= 0):
        raise argparse.ArgumentTypeError(f"must be a finite number >= 0, got {text}")
    return v


def fail_on_spec(text: str) -> list[tuple[str, float | None]]:
    """'slower:5%', 'slower', 'invalid', 'uncertain', or several joined by commas."""
    out: list[tuple[str, float | None]] = []
    for part in (p.strip() for p in text.split(",")):
        kind, _, value = part.partition(":")
        if kind == "slower":
            if value and not value.endswith("%"):
                raise argparse.ArgumentTypeError(
                    f"give the slowdown as a percentage (slower:5%), got {part!r}")
            out.append(("slower", fraction(value) if value else None))
        elif kind in ("invalid", "uncertain") and not value:
            out.append((kind, None))
        else:
            raise argparse.ArgumentTypeError(
                f"unknown gate {part!r}; use slower:N% (e.g. slower:5%), slower, invalid or "
                "uncertain")
    return out


def gate_of(args: argparse.Namespace) -> tuple[float, FailOn]:
    """The classification threshold and what fails the gate, from --threshold, --fail-on and
    --fail-on-regression; a threshold given twice with two values is refused."""
    specs = [s for group in args.fail_on or [] for s in group]
    slower = [v for k, v in specs if k == "slower"]
    given = {v for v in slower if v is not None}
    if args.threshold is not None:
        given.add(args.threshold)
    if len(given) > 1:
        shown = ", ".join(f"{v:.4g}" for v in sorted(given))
        raise UserError(f"two thresholds given ({shown}): give one, with --threshold or "
                        "--fail-on slower:N%")
    threshold = given.pop() if given else DEFAULT_THRESHOLD
    fail_on = FailOn(slower=bool(slower) or args.fail_on_regression,
                     invalid=any(k == "invalid" for k, _ in specs) or args.fail_on_regression,
                     uncertain=any(k == "uncertain" for k, _ in specs))
    return threshold, fail_on


def runs_of(a: str, b: str | None) -> tuple[str, str]:
    """The two runs compared: A and B, or the sides a/ and b/ of one A/B run folder."""
    if b is not None:
        return a, b
    sides = [Path(a) / s for s in ("a", "b")]
    if not all((p / "results.json").is_file() for p in sides):
        raise UserError(f"{a} is not an A/B run (no a/results.json and b/results.json): "
                        "give two runs to compare")
    return str(sides[0]), str(sides[1])


def table(cmp: Comparison) -> Table:
    """The terminal's table: the same columns and cells as compare.html's (present/deltas)."""
    t = Table(title=f"A: {cmp.a.device} {cmp.a.created}  vs  B: {cmp.b.device} {cmp.b.created}"
              + ("  (A/B pairs)" if any(v.paired for v in cmp.cases) else ""),
              caption=CAPTION)
    for col in COLUMNS:
        t.add_column(col)
    for v in cmp.cases:
        t.add_row(*(escape(c) for c in cells(of_verdict(v)).values()))
    return t


def cmd_compare(args: argparse.Namespace) -> int:
    from ..present.deltas import deltas
    from ..present.plot import plot_roofline
    from ..present.report_html import render_compare_html

    threshold, fail_on = gate_of(args)
    pa, pb = runs_of(args.a, args.b)
    a, b = _samples_or_none(load_run(pa)), _samples_or_none(load_run(pb))
    for path, run in ((pa, a), (pb, b)):
        why = contradiction(run)
        if why:  # refused before anything is judged or written
            raise UserError(f"{resolve_run(path)} contradicts itself: {why}; not compared")
    if args.out is not None and not args.out.strip():
        raise UserError("--out is empty: give a path, or leave --out out for the default")
    base = Path(args.out) if args.out else resolve_run(pb).parent / "compare"
    stem = base.with_suffix("")
    check_output_paths([stem.with_suffix(x) for x in (".png", ".svg", ".html", ".json")],
                       inputs=[resolve_run(pa), resolve_run(pb)])
    check_writable(base.parent)
    cmp = classify(a, b, threshold, fail_on, paths=(str(resolve_run(pa)), str(resolve_run(pb))))
    for path, run in ((pb, b), (pa, a)):  # why a side has nothing to compare, said first
        if not run.cases:
            said = "; ".join(run.notes) or "it holds no case"
            cmp.notes.insert(0, f"nothing compared: {resolve_run(path)} has no case to "
                                f"compare ({said})")
    Console(width=max(Console().width, 160)).print(table(cmp))
    # A gate that judged nothing is refused before a file is written (exit 2), in the words
    # of why nothing was compared; a case the gate failed (invalid in B) is a judgement.
    if fail_on.active and cmp.compared == 0 and not cmp.failed:
        nothing = [n for n in cmp.notes if n.startswith("nothing compared")]
        raise UserError(nothing[0] if nothing else
                        "nothing compared: no common case has readable times in both runs")
    rs = [r for r in (a.roofs, b.roofs) if r is not None]
    paths = plot_roofline(rs, [a.cases, b.cases], base.with_suffix(""),
                          f"A: {a.device} ({a.backend})  vs  B: {b.device} ({b.backend})",
                          tags=["A: ", "B: "])
    print(f"plot: {paths[0]}")
    page = base.with_suffix(".html")
    atomic_write_text(page, render_compare_html(a, b, deltas(cmp)))
    print(f"html: {page}")
    js = base.with_suffix(".json")
    atomic_write_text(js, json.dumps(cmp.to_dict(), indent=1) + "\n")
    print(f"json: {js}")
    counts = cmp.counts()
    print(", ".join(f"{n} {v}" for v, n in counts.items()))
    for note in cmp.notes:
        print(f"note: {note}")
    rc = 0
    if cmp.failed:
        gate = " or ".join(cmp.fail_on)
        verdict_of = {c.key: c.verdict + (" in " + c.side if c.side else "") for c in cmp.cases}
        print(f"gate failed ({gate}): " + ", ".join(f"{k} ({verdict_of[k]})" for k in cmp.failed))
        rc = 1
    # the last line: how much was judged (a gate of `uncertain` cases is a gate that is off)
    print(cmp.judged_line())
    return rc


def _samples_or_none(run: RunResult) -> RunResult:
    """A timing stored with an empty list of samples is a timing without raw samples (the
    gate then judges the medians alone: no interval), never a median of nothing."""
    for c in run.cases:
        if c.measurement.timing is not None and not c.measurement.timing.samples:
            c.measurement.timing = None
    return run


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("compare", help="per-case speedups of run B over A; a regression gate")
    p.add_argument("a", help="the base run (or an A/B run folder, given alone)")
    p.add_argument("b", nargs="?", help="the new run")
    p.add_argument("--threshold", type=fraction, default=None,
                   help=f"a change smaller than this is 'same' (0.05 or 5%%; default "
                        f"{DEFAULT_THRESHOLD:g})")
    p.add_argument("--fail-on", type=fail_on_spec, action="append", metavar="GATE",
                   help="exit 1 on: slower:N%% (slower by more than N%% and beyond the "
                        "noise), invalid (valid in A, invalid in B), uncertain (a case the "
                        "gate could not judge); comma-separated or repeated. Any gate fails "
                        "on a case B holds unreadable")
    p.add_argument("--out", help="path of the plot, page and JSON without extension "
                                 "(default: B's folder/compare)")
    p.add_argument("--fail-on-regression", action="store_true",
                   help="the same as --fail-on slower,invalid")
    p.set_defaults(func=cmd_compare)
