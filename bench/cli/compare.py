"""`roofbench compare A B`: per-case speedups and regressions of run B over run A."""

from __future__ import annotations

import argparse
from pathlib import Path

from rich.console import Console
from rich.table import Table

from roofbench.fileio import atomic_write_text

from ..results import check_writable, load_run, resolve_run


def cmd_compare(args: argparse.Namespace) -> int:
    from roofbench.bench.present.deltas import compare

    from ..present.plot import plot_roofline

    a, b = load_run(args.a), load_run(args.b)
    deltas = compare(a, b, threshold=args.threshold)
    t = Table(title=f"A: {a.device} {a.created}  vs  B: {b.device} {b.created}")
    for col in ("case", "time A", "time B", "speedup (A/B)", "verdict"):
        t.add_column(col)
    for d in deltas:
        t.add_row(d.key, f"{d.time_a * 1e3:.3f} ms" if d.time_a else "-",
                  f"{d.time_b * 1e3:.3f} ms" if d.time_b else "-",
                  f"{d.speedup:.3f}x" if d.speedup else "-", d.verdict)
    Console().print(t)
    base = Path(args.out) if args.out else resolve_run(args.b).parent / "compare"
    check_writable(base.parent)
    rs = [r for r in (a.roofs, b.roofs) if r is not None]
    paths = plot_roofline(rs, [a.cases, b.cases], base.with_suffix(""),
                          f"A: {a.device} ({a.backend})  vs  B: {b.device} ({b.backend})",
                          tags=["A: ", "B: "])
    print(f"plot: {paths[0]}")
    from ..present.report_html import render_compare_html

    page = base.with_suffix(".html")
    atomic_write_text(page, render_compare_html(a, b, deltas))
    print(f"html: {page}")
    regressions = [d for d in deltas if d.verdict.startswith("regression")]
    if regressions:
        print(f"{len(regressions)} regression(s)")
    return 1 if regressions and args.fail_on_regression else 0


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("compare", help="per-case speedups and regressions of run B over A")
    p.add_argument("a")
    p.add_argument("b")
    p.add_argument("--threshold", type=float, default=0.05,
                   help="slowdown beyond which (and beyond the noise) a case regressed")
    p.add_argument("--out", help="plot path without extension (default: B's folder/compare)")
    p.add_argument("--fail-on-regression", action="store_true", help="exit 1 on a regression")
    p.set_defaults(func=cmd_compare)
