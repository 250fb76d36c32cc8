"""`roofbench run` and `roofbench bench` (the main job: the same run with the defaults that fill
the device): roofs, the run session (bench/suite/session.py), the reports, a summary."""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from rich.console import Console
from rich.markup import escape
from rich.table import Table
from roofbench.bench.suite.session import RunOptions, RunSession

from roofbench.boundary import EXIT_STOPPED, signal_name
from roofbench.paths import home
from roofbench.records import RunResult
from roofbench.roof_records import RoofSet
from roofbench.timing import GATE_MIN_SAMPLES

from ..backends import REGISTRY
from ..backends import base as backends
from ..measure.roof_source import obtain_roofs
from ..results import check_writable
from .argtypes import checked
from .progress import Heartbeat, steps

# -- helpers --------------------------------------------------------------------------------

def roofs_with_progress(be: backends.Backend, quick: bool) -> RoofSet:
    """The run's roofs without --roofs (bench/measure/roof_source.py: the one roof-sourcing
    policy), with progress while probes measure."""
    with steps("roofs") as say:
        return obtain_roofs(be, quick=quick, progress=say)


def summary_table(run: RunResult) -> Table:
    from ..present.fusion import fusion_rows

    t = Table(title=f"{run.device} ({run.backend})", show_lines=False)
    t.add_column("case", no_wrap=True)
    for col in ("AI", "time", "GFLOP/s", "GB/s", "eff.", "bound", "status"):
        t.add_column(col, justify="left" if col in ("status", "bound") else "right")
    for c in run.cases:
        tuned = c.evidence.extra.get("tuned")
        t.add_row(
            c.key + (f" (tuned: {escape(tuned)})" if tuned else ""),
            f"{c.declaration.ai.get('dram', 0):.3g}",
            f"{c.measurement.median_s * 1e3:.3f} ms" if c.measurement.median_s else "-",
            f"{c.roofline.flop_per_s / 1e9:.3g}" if c.roofline.flop_per_s else "-",
            f"{c.roofline.bytes_per_s.get('dram', 0) / 1e9:.3g}" if c.measurement.median_s else "-",
            f"{c.roofline.efficiency:.0%}" if c.roofline.efficiency else "-",
            c.roofline.bound or "-",
            c.outcome.status
            if c.outcome.status == "ok"
            else escape(f"{c.outcome.status}: {c.outcome.error}"),
        )
    for r in fusion_rows(run.cases):
        if r.valid:
            t.caption = (t.caption + "\n" if t.caption else "") + (
                f"fusion {r.workload} {r.dtype}: {r.src} -> {r.dst}, AI "
                f"{r.ai_src:.3g} -> {r.ai_dst:.3g} FLOP/B, {r.speedup:.2f}x faster "
                f"(bytes ratio {r.bytes_ratio:.2f}x)")
    return t


# -- commands -------------------------------------------------------------------------------

def run_session(args: argparse.Namespace, be: backends.Backend, opts: RunOptions
                ) -> tuple[RunSession, list[Path]]:
    """The run of `run`, `bench` and `occupancy`: its folder (before the roofs), then roofs,
    cases and the report each inside the session's guard; the summary table printed."""
    out_root = Path(args.out) if args.out else home() / "results"
    check_writable(out_root)
    given = obtain_roofs(be, roofs_file=args.roofs) if args.roofs else None  # checked first
    session = RunSession(opts, be, out_root)  # names and sizes checked, then the folder made
    try:
        with session.guard("roofs"):
            roofs = given or roofs_with_progress(be, args.quick)
            session.set_roofs(roofs)
        with session.guard("cases"), Heartbeat() as beat:
            session.run_cases(beat)
    except KeyboardInterrupt as e:  # the report of what finished is still written
        if not session.run.interrupted:  # landed between two guarded steps
            session.cut_short("signal", signal_name(e))
    paths = write_report_files(session, figures=not args.no_figures)
    Console(width=max(Console().width, 140)).print(summary_table(session.run))
    return session, paths


def cmd_run(args: argparse.Namespace) -> int:
    """Settings and names checked, then the run's own folder; roofs, cases and the report each
    inside the session's guard: whatever stops the run is saved in results.json as its stop,
    and the report is still written when a signal stopped it."""
    be = backends.open_for_user(args.backend)
    session, paths = run_session(args, be, RunOptions.from_args(args))
    run = session.run
    if said_written(run, session.out, paths, figures=not args.no_figures):
        return EXIT_STOPPED
    return 0 if all(c.outcome.status in ("ok", "unsupported") for c in run.cases) else 1


def said_written(run: RunResult, out: Path, paths: list[Path], figures: bool = True) -> bool:
    """Print the files a session wrote (without ``figures``, how to draw them later); True
    (said on stderr) when a stop cut the run."""
    from ..present.outputs import no_figures_note

    print(f"results: {out / 'results.json'}")
    print_report_paths(paths)
    if not figures:
        print(no_figures_note(out))
    if run.interrupted:
        why = run.stop.detail if run.stop else "stopped"
        print(f"interrupted ({why}): the finished cases are saved", file=sys.stderr)
    return run.interrupted


def print_report_paths(paths: list[Path]) -> None:
    """The report's files written (report.md alone when a stop left no page)."""
    for p in paths:
        if p.suffix in (".md", ".html"):
            print(f"{'report:  ' if p.suffix == '.md' else 'html:    '}{p}")


def write_report_files(session: RunSession, figures: bool = True) -> list[Path]:
    """The plot and the report of a session (without ``figures``, report.md alone); a stop
    while they are written is recorded, and the report (without the plot) is written once
    more."""
    from ..present.outputs import write_outputs, write_report_md

    try:
        with session.guard("report"):
            if not figures:
                return write_report_md(session.run, session.out)
            return write_outputs(session.run, session.out)
    except KeyboardInterrupt:
        if not figures:
            with session.guard("report"):  # a second stop here ends the command
                return write_report_md(session.run, session.out)
        from ..measure.api import report_after_stop

        with session.guard("report"):  # a second stop here ends the command
            return report_after_stop(session.run, session.out)


def cmd_bench(args: argparse.Namespace) -> int:
    """roofs + run + plot + report with defaults that fill the device."""
    t0 = time.perf_counter()
    rc = cmd_run(args)
    print(f"make bench finished in {time.perf_counter() - t0:.0f} s")
    return rc


# -- parser ---------------------------------------------------------------------------------

def add_measure_options(p: argparse.ArgumentParser, ncu_help: str) -> None:
    """The options of every command that measures cases: roofs, quick, cold, seed, out, ncu."""
    p.add_argument("--roofs", metavar="FILE", help="roofs JSON to use instead of measuring")
    p.add_argument("--quick", action="store_true", help="small sizes, short timing (smoke run)")
    p.add_argument("--samples", type=checked(int, lambda v: v >= 1, "must be >= 1", "an integer"),
                   metavar="N", help="exactly N timed samples a case (default: until the "
                   f"noise rule stops, at least {GATE_MIN_SAMPLES}; fewer and compare cannot "
                   "judge the case)")
    p.add_argument("--cold", action="store_true",
                   help="flush the last-level cache before every sample (outside the window)")
    p.add_argument("--seed", type=int, default=None, help="input generator seed")
    p.add_argument("--out", metavar="DIR", help="results root (default: results/ under "
                                                "$ROOFBENCH_HOME, else the working directory)")
    p.add_argument("--ncu", action="store_true", help=ncu_help)
    p.add_argument("--no-figures", action="store_true",
                   help="write results.json, results.csv and report.md only: no roofline or "
                   "occupancy PNG/SVG, no report.html (a CI gate's or a smoke run's data; "
                   "`roofbench plot RUN` and `roofbench report RUN` draw them later)")


def _add_run_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--backend", default="auto",
                   help="auto (best available), " + ", ".join(REGISTRY))
    p.add_argument("--workload", "--kernel", dest="workload", action="append", metavar="W",
                   help="workload to run (repeatable; default: all; --kernel is the same)")
    p.add_argument("--variant", help="only this variant")
    p.add_argument("--dtype", action="append", metavar="D",
                   help="fp64, fp32, fp16, bf16, fp8 (repeatable; default: all the backend runs)")
    p.add_argument("--size", help="N, NxM or MxNxK, e.g. 16M, 4096x1024 (default: fills the "
                                  "device by the stated rule)")
    add_measure_options(p, "after timing, run each valid case once more under Nsight Compute "
                           "(ncu on PATH or $ROOFBENCH_NCU) and compare its counters with the "
                           "model")


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("run", help="run kernels, validate, time, place on the roofline")
    _add_run_options(p)
    p.set_defaults(func=cmd_run)

    p = sub.add_parser("bench", help="the main job: roofs + every kernel + plot + report")
    _add_run_options(p)
    p.set_defaults(func=cmd_bench)
