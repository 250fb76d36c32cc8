"""`roofbench run` and `roofbench bench` (the main job: the same run with the defaults that fill
the device); both share ``execute``, which `fleet` and the ncu case runner reuse too."""

from __future__ import annotations

import argparse
import contextlib
import signal
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

from rich.console import Console
from rich.markup import escape
from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from roofbench.records import CaseResult, RoofSet, RunResult
from roofbench.timing import TimerConfig

from ..backends import base as backends
from ..measure.progress import Heartbeat
from ..measure.roof_source import obtain_roofs
from ..measure.runner import parse_size, run_cases, select_cases
from ..results import (
    REPO_ROOT,
    check_writable,
    environment,
    git_commit,
    run_dir,
    save_run,
    utc_stamp,
)

DEFAULT_RESULTS = REPO_ROOT / "results"
console = Console(stderr=True)


# -- helpers --------------------------------------------------------------------------------

def roofs_with_progress(be: backends.Backend, roofs_file: str | None, quick: bool,
                        recalibrate: bool = False) -> RoofSet:
    """``obtain_roofs`` (bench/measure/roof_source.py: the one roof-sourcing policy) with a
    progress line while probes measure."""
    if roofs_file:
        return obtain_roofs(be, roofs_file=roofs_file)
    with _progress() as prog:
        task = prog.add_task("measuring roofs", total=None)

        beat = Heartbeat()

        def say(msg: str) -> None:
            prog.update(task, description=f"roofs: {msg}")
            if prog.disable:  # no terminal (a log, a CI job): one line per step instead
                beat.say(f"roofs: {msg}")
                beat.start(f"roofs: {msg}")

        with beat:
            return obtain_roofs(be, recalibrate=recalibrate, quick=quick, progress=say)


def _progress() -> Progress:
    return Progress(TextColumn("{task.description}"), BarColumn(), TextColumn(
        "{task.completed}/{task.total}"), TimeElapsedColumn(), console=console,
        transient=True, disable=not sys.stderr.isatty())


# Sampling time per case on a GPU: a memory-bound kernel there takes ~0.3 ms, so half a
# second is over a thousand samples, and the median-CI rule usually stops far sooner.
GPU_CASE_BUDGET_S = 0.5
GPU_LAUNCH_BUDGET_S = 0.2


def _timer_config(args: argparse.Namespace, kind: str = "cpu") -> tuple[TimerConfig, TimerConfig]:
    """(config of a whole case, config of each launch of a pipeline timed alone)."""
    cfg = TimerConfig.quick() if args.quick else TimerConfig()
    if args.cold:
        cfg = replace(cfg, cold=True)
    if kind == "gpu":
        return cfg.with_budget(GPU_CASE_BUDGET_S), cfg.with_budget(GPU_LAUNCH_BUDGET_S)
    return cfg, cfg


def case_line(i: int, n: int, c: CaseResult, elapsed_s: float) -> str:
    """One line per finished case: the run is never silent for longer than one case."""
    if c.status == "ok" and c.median_s:
        what = (f"ok {c.median_s * 1e3:.4g} ms"
                + (f", {c.efficiency:.0%} of roof" if c.efficiency else ""))
    else:
        what = f"{c.status}: {c.error}"
    spent = sum(c.phases.values())
    return f"[{i}/{n}] {c.key} {what} ({spent:.1f} s; run {elapsed_s:.0f} s)"


def execute(args: argparse.Namespace, be: backends.Backend, roofs: RoofSet | None,
            out_root: Path) -> tuple[RunResult, Path]:
    """Run the selected cases, rewriting results.json atomically after every case: a run
    killed at any moment keeps every finished case. SIGTERM ends the run like Ctrl-C: the
    finished cases are saved with a note and the reports are still written."""
    size = parse_size(args.size) if args.size else None
    cases, skipped = select_cases(be, kernels=args.kernel, variant=args.variant,
                                  dtypes=args.dtype, size=size, quick=args.quick)
    cfg, launch_cfg = _timer_config(args, be.kind)
    out = run_dir(out_root, be.device_name())
    check_writable(out)  # fail before measuring, not after
    run = RunResult(backend=be.name, device=be.device_name(), roofs=roofs,
                    cases=list(skipped), environment=environment(be.info()),
                    command=["roofbench"] + sys.argv[1:], created=utc_stamp(),
                    git_commit=git_commit(), timer=cfg.__dict__)
    if roofs is not None and roofs.device != be.device_name():
        run.notes.append(f"roofs come from {roofs.device}, cases ran on {be.device_name()}")
    save_run(run, out)
    t0 = time.perf_counter()
    finished: list[CaseResult] = []
    beat = Heartbeat()

    def done(rec: CaseResult) -> None:
        finished.append(rec)
        run.cases = finished + list(skipped)
        save_run(run, out)
        beat.say(case_line(len(finished), len(cases), rec, time.perf_counter() - t0))

    try:
        with _sigterm_as_interrupt(), beat:
            run_cases(cases, be, roofs, cfg, seed=args.seed, done=done, launch_cfg=launch_cfg,
                      progress=beat.start)
            if getattr(args, "ncu", False):  # counters of each valid case, after all are timed
                from roofbench.bench.measure.ncu import collect

                notes = collect(finished, seed=args.seed,
                                progress=lambda m: print(m, file=sys.stderr, flush=True))
                for note in notes:  # each a one-line reason: the run still goes on
                    print(note, file=sys.stderr, flush=True)
                run.notes += notes
                save_run(run, out)
    except KeyboardInterrupt:
        run.notes.append(f"interrupted: {len(finished)} of {len(cases)} cases finished")
        run.interrupted = True
        save_run(run, out)
    return run, out


@contextlib.contextmanager
def _sigterm_as_interrupt() -> Iterator[None]:
    """SIGTERM (a scheduler's or `timeout`'s stop) raises KeyboardInterrupt in the main
    thread, so the finished cases are saved with a note instead of the process vanishing."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def handler(signum: int, frame: object) -> None:
        raise KeyboardInterrupt(f"signal {signum}")

    old = signal.signal(signal.SIGTERM, handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, old)


def render_outputs(run: RunResult, out: Path) -> list[Path]:
    from ..present.outputs import write_outputs

    return write_outputs(run, out)


def summary_table(run: RunResult) -> Table:
    from ..present.fusion import fusion_rows

    t = Table(title=f"{run.device} ({run.backend})", show_lines=False)
    t.add_column("case", no_wrap=True)
    for col in ("AI", "time", "GFLOP/s", "GB/s", "eff.", "bound", "status"):
        t.add_column(col, justify="left" if col in ("status", "bound") else "right")
    for c in run.cases:
        t.add_row(c.key, f"{c.ai.get('dram', 0):.3g}",
                  f"{c.median_s * 1e3:.3f} ms" if c.median_s else "-",
                  f"{c.flop_per_s / 1e9:.3g}" if c.flop_per_s else "-",
                  f"{c.bytes_per_s.get('dram', 0) / 1e9:.3g}" if c.median_s else "-",
                  f"{c.efficiency:.0%}" if c.efficiency else "-", c.bound or "-",
                  c.status if c.status == "ok" else escape(f"{c.status}: {c.error}"))
    for r in fusion_rows(run.cases):
        if r.valid:
            t.caption = (t.caption + "\n" if t.caption else "") + (
                f"fusion {r.workload} {r.dtype}: {r.src} -> {r.dst}, AI "
                f"{r.ai_src:.3g} -> {r.ai_dst:.3g} FLOP/B, {r.speedup:.2f}x faster "
                f"(bytes ratio {r.bytes_ratio:.2f}x)")
    return t


# -- commands -------------------------------------------------------------------------------

def cmd_run(args: argparse.Namespace) -> int:
    be = backends.open_for_user(args.backend)
    out_root = Path(args.out) if args.out else DEFAULT_RESULTS
    check_writable(out_root)
    roofs = roofs_with_progress(be, args.roofs, args.quick)
    run, out = execute(args, be, roofs, out_root)
    paths = render_outputs(run, out)
    Console(width=max(Console().width, 140)).print(summary_table(run))
    print(f"results: {out / 'results.json'}")
    print(f"report:  {paths[-2]}")
    print(f"html:    {paths[-1]}")
    if run.interrupted:
        print("interrupted: the finished cases are saved", file=sys.stderr)
        return 130
    return 0 if all(c.status in ("ok", "unsupported") for c in run.cases) else 1


def cmd_bench(args: argparse.Namespace) -> int:
    """roofs + run + plot + report with defaults that fill the device."""
    t0 = time.perf_counter()
    rc = cmd_run(args)
    print(f"make bench finished in {time.perf_counter() - t0:.0f} s")
    return rc


# -- parser ---------------------------------------------------------------------------------

def _add_run_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--backend", default="auto",
                   help="auto (best available), " + ", ".join(backends.REGISTRY))
    p.add_argument("--kernel", action="append", metavar="K",
                   help="workload to run (repeatable; default: all)")
    p.add_argument("--variant", help="only this variant")
    p.add_argument("--dtype", action="append", metavar="D",
                   help="fp64, fp32, fp16, bf16, fp8 (repeatable; default: all the backend runs)")
    p.add_argument("--size", help="N, NxM or MxNxK, e.g. 16M, 4096x1024 (default: fills the "
                                  "device by the stated rule)")
    p.add_argument("--roofs", metavar="FILE", help="roofs JSON to use instead of measuring")
    p.add_argument("--quick", action="store_true", help="small sizes, short timing (smoke run)")
    p.add_argument("--cold", action="store_true",
                   help="flush the last-level cache before every sample (outside the window)")
    p.add_argument("--seed", type=int, default=None, help="input generator seed")
    p.add_argument("--out", metavar="DIR", help="results root (default: results/)")
    p.add_argument("--ncu", action="store_true",
                   help="after timing, run each valid case once more under Nsight Compute "
                        "(ncu on PATH or $ROOFBENCH_NCU) and compare its counters with the model")


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("run", help="run kernels, validate, time, place on the roofline")
    _add_run_options(p)
    p.set_defaults(func=cmd_run)

    p = sub.add_parser("bench", help="the main job: roofs + every kernel + plot + report")
    _add_run_options(p)
    p.set_defaults(func=cmd_bench)
