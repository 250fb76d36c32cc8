"""A run session: which cases, run one after the other, saved after each, stoppable.

``RunSession`` is what `roofbench run` and `roofbench bench` hold from the selection to the
reports: select the cases (unknown names and impossible sizes are one-line errors before
anything is allocated or written), make the run's own folder, run the cases, rewrite
results.json atomically after every case (a run killed at any moment keeps every finished
case), record whatever cuts it short (a signal, a full disk) as its ``stop``, and, with
``ncu``, profile each valid case once more.
``select_one`` is the same selection for the one case the ncu child runs.
"""

from __future__ import annotations

import argparse
import contextlib
import math
import sys
import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Protocol

from roofbench.bench.backends.base import Backend
from roofbench.bench.errors import UserError
from roofbench.bench.measure import pairs
from roofbench.bench.results import (
    check_writable,
    environment,
    git_commit,
    make_run_dir,
    save_run,
    utc_stamp,
)
from roofbench.bench.suite.case_record import case_record
from roofbench.bench.suite.drift import RoofTracker
from roofbench.bench.suite.runner import run_cases
from roofbench.kernels import registry
from roofbench.kernels.spec import Case, Size, SizeContext, Workload

from roofbench.boundary import EXIT_OS, Refusal, os_line, signal_name
from roofbench.errors_text import first_line
from roofbench.records import CaseResult, RunResult, RunStop, StopCause, StopPhase
from roofbench.roof_records import RoofSet
from roofbench.timing import GPU_CASE_BUDGET_S, GPU_LAUNCH_BUDGET_S, TimerConfig


@dataclass(frozen=True)
class RunOptions:
    """What a run measures and how (the options of `roofbench run`)."""

    workloads: tuple[str, ...] | None = None  # None: every workload
    variant: str | None = None
    dtypes: tuple[str, ...] | None = None
    size: str | None = None  # as typed: N, NxM, MxNxK with k/M/G or powers
    quick: bool = False
    samples: int | None = None  # exactly this many timed samples a case (--samples)
    cold: bool = False
    seed: int | None = None
    ncu: bool = False
    occupancy_scan: bool = False  # every case once per occupancy level (`roofbench occupancy`)

    @classmethod
    def from_args(cls, args: argparse.Namespace) -> RunOptions:
        return cls(workloads=tuple(args.workload) if args.workload else None,
                   variant=args.variant, dtypes=tuple(args.dtype) if args.dtype else None,
                   size=args.size, quick=args.quick, samples=getattr(args, "samples", None),
                   cold=args.cold, seed=args.seed, ncu=bool(getattr(args, "ncu", False)),
                   occupancy_scan=bool(getattr(args, "occupancy", False)))


class Progress(Protocol):
    """Who hears a run's progress: a case starts (``start``), a line to print (``say``)."""

    def start(self, key: str) -> None: ...

    def say(self, line: str) -> None: ...


# -- selection ------------------------------------------------------------------------------

# No case has more elements than this (2^48: 256 TiB of bytes): a size past it is a typo, and
# checking it in Python integers keeps every later product far from int64's wrap.
MAX_ELEMENTS = 1 << 48


def parse_size(text: str) -> Size:
    """'1048576', '16M', '2^24', '4096x1024', '2048x2048x2048' -> a tuple of ints.

    Checked in Python integers: each dimension and their product at most MAX_ELEMENTS (a
    power is bounded before it is computed: ``2^1000000000`` is refused, not evaluated)."""
    usage = f"malformed size {text!r}: use N, NxM or MxNxK (e.g. 16M, 4096x1024)"
    too_large = (f"size {text!r} is too large: at most 2^{MAX_ELEMENTS.bit_length() - 1} "
                 "elements in all")
    dims = []
    for part in text.lower().replace("*", "x").split("x"):
        p = part.strip()
        if not p:
            raise UserError(usage)
        mult = 1
        if p[-1] in "kmg" and p[:-1]:
            mult = {"k": 1 << 10, "m": 1 << 20, "g": 1 << 30}[p[-1]]
            p = p[:-1]
        try:
            if "^" in p:
                base_s, exp_s = p.split("^")
                base, exp = int(base_s), int(exp_s)
                if exp < 0:
                    raise UserError(f"size must be a positive integer, got {text!r}")
                if base > 1 and exp * (base.bit_length() - 1) > MAX_ELEMENTS.bit_length():
                    raise UserError(too_large)
                val = base ** exp
            else:
                val = int(p)
        except ValueError:
            raise UserError(usage) from None
        val *= mult
        if val <= 0:
            raise UserError(f"size must be positive, got {text!r}")
        if val > MAX_ELEMENTS:
            raise UserError(too_large)
        dims.append(val)
    if math.prod(dims) > MAX_ELEMENTS:
        raise UserError(too_large)
    return tuple(dims)


def select_cases(backend: Backend, *, workloads: Iterable[str] | None = None,
                 variant: str | None = None, dtypes: Iterable[str] | None = None,
                 size: Size | None = None, quick: bool = False,
                 reserve_bytes: int = 0) -> tuple[list[Case], list[CaseResult]]:
    """The cases a run will measure, and records for those it cannot (with the reason).

    Unknown names raise UserError naming the valid choices.
    """
    ws = registry.workloads()
    names = list(workloads or ws)
    for n in names:
        if n not in ws:
            raise UserError(f"unknown workload {n!r}; choose from: {', '.join(ws)}")
    if variant is not None:
        all_v = sorted({v for n in names for v in ws[n].variants})
        if variant not in all_v:
            raise UserError(f"unknown variant {variant!r} for {', '.join(names)}; "
                            f"choose from: {', '.join(all_v)}")
    want_dtypes = list(dtypes) if dtypes else None
    if want_dtypes:
        known = sorted({d for n in names for d in ws[n].dtypes()})
        for d in want_dtypes:
            if d not in known:
                raise UserError(f"unknown dtype {d!r}; choose from: {', '.join(known)}")
    budget = backend.memory_budget() - reserve_bytes
    cases: list[Case] = []
    skipped: list[CaseResult] = []
    for n in names:
        w = ws[n]
        if size is not None:
            w_check(w, size)
        for v in w.variants.values():
            if variant is not None and v.name != variant:
                continue
            for d in v.dtypes:
                if want_dtypes is None:
                    # By default each variant runs in the dtypes this backend supports.
                    if d not in backend.dtypes():
                        continue
                elif d not in want_dtypes:
                    continue
                sizes = [size] if size is not None else default_sizes(w, backend, d, quick,
                                                                      budget, v.name)
                for sz in sizes:
                    case = Case(w, v, d, sz)
                    if want_dtypes is None and not backend.has_kernel(case):
                        continue  # e.g. attention on CUDA: fp16/bf16 kernels only
                    why = backend.supports(case)
                    if why is None and case.footprint() > budget:
                        if size is not None:
                            raise UserError(
                                f"size {'x'.join(map(str, sz))} of {case.key} needs "
                                f"{case.footprint() / 2**20:.0f} MiB, more than the "
                                f"{budget / 2**20:.0f} MiB available to a case on "
                                f"{backend.name}")
                        why = f"needs {case.footprint() >> 20} MiB > budget {budget >> 20} MiB"
                    if why is None:
                        cases.append(case)
                    else:
                        skipped.append(case_record(case, backend, status="unsupported", error=why))
    if size is not None and not cases and not skipped:
        raise UserError("no case matches the selection")
    return cases, skipped


def select_one(backend: Backend, workload: str, variant: str, dtype: str, size: str) -> Case:
    """The one case of a selection that names everything (the ncu child's): the same checks
    as a run's, and the reason when this backend cannot run it."""
    ws = registry.workloads()
    if workload in ws and variant in ws[workload].variants and \
            dtype not in ws[workload].variants[variant].dtypes:
        raise UserError(f"{workload}/{variant} has no dtype {dtype!r}; choose from: "
                        f"{', '.join(ws[workload].variants[variant].dtypes)}")
    cases, skipped = select_cases(backend, workloads=[workload], variant=variant,
                                  dtypes=[dtype], size=parse_size(size))
    if skipped:
        raise UserError(
            f"{skipped[0].key} does not run on {backend.name}: {skipped[0].outcome.error}"
        )
    return cases[0]


def w_check(w: Workload, size: Size) -> None:
    try:
        w.check_size(size)
    except ValueError as e:
        raise UserError(str(e)) from None


def default_sizes(w: Workload, backend: Backend, dtype: str, quick: bool, budget: int,
                  variant: str = "") -> list[Size]:
    """The sizes a run without --size measures: the workload's sweep or its one default
    (--quick on a CPU: the quick size alone)."""
    ctx = SizeContext(kind=backend.kind, llc_bytes=backend.last_level_cache(),
                      budget_bytes=budget, dtype=dtype, quick=quick, variant=variant)
    if quick and backend.kind == "cpu":
        return [w.quick_size]
    return w.default_sizes(ctx)


# -- the run --------------------------------------------------------------------------------

def timer_configs(opts: RunOptions, kind: str = "cpu") -> tuple[TimerConfig, TimerConfig]:
    """(config of a whole case, config of each launch of a pipeline timed alone)."""
    cfg = TimerConfig.quick() if opts.quick else TimerConfig()
    if opts.cold:
        cfg = replace(cfg, cold=True)
    if opts.samples is not None:
        cfg = cfg.exactly(opts.samples)
    if kind == "gpu":
        return cfg.with_budget(GPU_CASE_BUDGET_S), cfg.with_budget(GPU_LAUNCH_BUDGET_S)
    return cfg, cfg


def case_line(i: int, n: int, c: CaseResult, elapsed_s: float) -> str:
    """One line per finished case: the run is never silent for longer than one case."""
    if c.outcome.status == "ok" and c.measurement.median_s:
        what = (f"ok {c.measurement.median_s * 1e3:.4g} ms"
                + (f", {c.roofline.efficiency:.0%} of roof" if c.roofline.efficiency else ""))
    else:
        what = f"{c.outcome.status}: {c.outcome.error}"
    spent = sum(c.measurement.phases.values())
    return f"[{i}/{n}] {c.key} {what} ({spent:.1f} s; run {elapsed_s:.0f} s)"


class RunSession:
    """One run: its own folder and its record, made before anything is measured (after every
    name and size is checked), saved after every step, and left saying so whatever ends it.

    ``guard(phase)`` wraps each phase (roofs, cases, report): a signal, an OSError (a full
    disk), memory exhausted or any other error is recorded in results.json as the run's
    ``stop`` (cause, detail, phase; ``interrupted``), saved when the disk still allows, and
    passed on to the command's error boundary."""

    def __init__(self, opts: RunOptions, be: Backend, out_root: Path) -> None:
        self.opts, self.be = opts, be
        size = parse_size(opts.size) if opts.size else None
        self.cases, self.skipped = select_cases(be, workloads=opts.workloads,
                                                variant=opts.variant, dtypes=opts.dtypes,
                                                size=size, quick=opts.quick)
        if opts.occupancy_scan:  # every case once per occupancy level (`roofbench occupancy`)
            from roofbench.bench.suite.scan import occupancy_cases

            self.cases, unscanned = occupancy_cases(self.cases, be)
            self.skipped += unscanned
        tuned_notes: list[str] = []
        if be.kind == "cpu":  # a stored tuned configuration runs instead of the default
            from roofbench.bench.suite.tuned import tuned_cases

            self.cases, tuned_notes = tuned_cases(self.cases, be.device_name(), "cpu")
        self.cfg, self.launch_cfg = timer_configs(opts, be.kind)
        check_writable(out_root)  # fail before measuring, not after
        self.out = make_run_dir(out_root, be.device_name())
        self.run = RunResult(backend=be.name, device=be.device_name(), roofs=None,
                             cases=list(self.skipped), environment=environment(be.info()),
                             command=["roofbench"] + sys.argv[1:], created=utc_stamp(),
                             git_commit=git_commit(), timer=self.cfg.__dict__)
        self.run.notes += tuned_notes
        self.finished: list[CaseResult] = []
        self.tracker: RoofTracker | None = None  # None: RoofTracker.for_run decides
        self.phase: StopPhase = "start"
        self.save()

    @property
    def results_path(self) -> Path:
        return self.out / "results.json"

    def save(self) -> None:
        save_run(self.run, self.out)

    def set_roofs(self, roofs: RoofSet | None) -> None:
        self.run.roofs = roofs
        if roofs is not None and roofs.device != self.be.device_name():
            self.run.notes.append(f"roofs come from {roofs.device}, cases ran on "
                                  f"{self.be.device_name()}")
        self.save()

    def cut_short(self, cause: StopCause, detail: str) -> bool:
        """Record that the run stopped (the first cause is kept) and save; whether it saved."""
        if self.run.stop is None:
            self.run.stop = RunStop(cause=cause, detail=detail, phase=self.phase)
        self.run.interrupted = True
        self.run.notes.append(f"interrupted: {len(self.finished)} of {len(self.cases)} cases "
                              f"finished ({detail}, during {self.phase})")
        try:
            self.save()
        except (OSError, Refusal):  # the disk is full: the last save stands
            return False
        return True

    @contextlib.contextmanager
    def guard(self, phase: StopPhase) -> Iterator[None]:
        self.phase = phase
        try:
            yield
        except KeyboardInterrupt as e:
            self.cut_short("signal", signal_name(e))
            raise
        except OSError as e:
            saved = self.cut_short("os-error", os_line(e))
            raise Refusal(f"cannot go on: {os_line(e)}; the run stopped, {self.results_path} "
                          f"{'records it with' if saved else 'keeps'} the "
                          f"{len(self.finished)} case(s) finished before", EXIT_OS) from None
        except MemoryError:
            self.cut_short("memory", "out of memory")
            raise
        except Exception as e:
            self.cut_short("error", first_line(e))
            raise

    def note_code_change(self) -> None:
        """Say so when the code's commit differs at the end of the cases from the one recorded
        at the start (a commit or an edit during the run): the cases may have run either."""
        now = git_commit()
        if now != self.run.git_commit:
            self.run.notes.append(f"the code changed during the run: {self.run.git_commit} "
                                  f"when it started, {now} when its cases ended")

    def run_cases(self, progress: Progress) -> None:
        """Every selected case, saved after each; then, with ncu, the counters of each."""
        t0 = time.perf_counter()
        # A CPU run brackets its memory-bound cases with short bandwidth probes (drift.py).
        tracker = self.tracker or RoofTracker.for_run(self.be, self.run.roofs)
        by_key = {c.key: c for c in self.cases}

        def start(key: str) -> None:
            if tracker is not None and key in by_key:
                tracker.before(by_key[key])
            progress.start(key)

        def done(rec: CaseResult) -> None:
            if tracker is not None:
                tracker.after(rec)
            self.finished.append(rec)
            self.run.cases = self.finished + list(self.skipped)
            self.save()
            progress.say(case_line(len(self.finished), len(self.cases), rec,
                                   time.perf_counter() - t0))

        try:
            run_cases(self.cases, self.be, self.run.roofs, self.cfg, seed=self.opts.seed,
                      done=done, launch_cfg=self.launch_cfg, progress=start)
        finally:
            if tracker is not None:
                self.run.notes += tracker.finish()
            pairs.close()  # the roof samplers' arrays
            self.note_code_change()
        self.save()
        if self.opts.ncu:  # counters of each valid case, after all are timed
            from roofbench.bench.counters.ncu import collect

            notes = collect(self.finished, seed=self.opts.seed, progress=progress.say)
            for note in notes:  # each a one-line reason: the run still goes on
                progress.say(note)
            self.run.notes += notes
            self.save()

