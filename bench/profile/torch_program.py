"""``roofbench.profile(fn_or_module, *args, **kwargs)``: every aten op of a PyTorch program
counted, timed alone and placed on this device's measured roofs, the whole program beside it.

1. The program runs once under the recorder (``recording``): every aten op, its
   tensors, the data flow; FLOPs from torch's registry or the stated convention
   (``op_counts``), bytes by the unique-span rule.
2. Each distinct op is replayed alone on its cloned arguments and timed with the project's
   timer (``Clock.time``: the host clock on a CPU, CUDA events on a GPU); identical calls are
   timed once and counted. The whole program is timed end to end the same way; what it takes
   beyond the sum of its ops is stated as framework and dispatch overhead.
3. Each op and the program are timed and placed by the measurement core
   (``core.time_call``, ``core.fill_metrics``: the functions of the runner and of
   ``roofbench.measure``); an op of 0 FLOPs by bandwidth (its bytes/s over the memory roof,
   ``roofline.by_bandwidth``), a view (nothing moved) not at all. Amdahl's ranking
   (``present/amdahl``), the families, the fusion groups (``fusion``) and, with
   ``compile=True``, the program under ``torch.compile`` (``compiled``) follow.

Roofs as ``roofbench.measure`` finds them (``roof_source.device_roofs``): ``roofs=`` as given, else
this device's calibration cache, measured once by the quick calibration when absent.
"""

from __future__ import annotations

import contextlib
import inspect
import os
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from roofbench.bench.errors import UserError
from roofbench.bench.measure import core, door
from roofbench.bench.measure.above_roof import flag_above_roof
from roofbench.bench.measure.callables import clock_for
from roofbench.bench.measure.caller_settings import kept
from roofbench.bench.measure.door import MeasureError
from roofbench.bench.measure.pairs import pair_for
from roofbench.bench.measure.user_code import raised_by_user, users_failure
from roofbench.bench.present.amdahl import Share, roof_time
from roofbench.bench.profile import common
from roofbench.bench.profile.caller_state import (
    Backups,
    Caches,
    Grads,
    working_copy,
)
from roofbench.bench.profile.common import (
    OpPlace,
    profile_timer,
    program_case,
    program_shares,
    roofs_from,
)
from roofbench.bench.profile.inprogram import time_in_program
from roofbench.bench.profile.levels import program_working_set, reuse_distances
from roofbench.bench.profile.place import (
    ThreadHold,
    alone_summary,
    held_paired_time,
    launch_cost,
    mark_ranks,
    roofs_for_threads,
    used_cores,
)
from roofbench.bench.profile.recording import Distinct, record_program
from roofbench.bench.profile.report import Profile

from roofbench.boundary import Refusal
from roofbench.errors_text import first_line
from roofbench.records import CaseResult, RooflinePlace
from roofbench.roof_records import RoofSet
from roofbench.timing import TimerConfig


def op_case(op: Distinct, gpu: bool, backend: str) -> CaseResult:
    """The record of one distinct op (one call), before timing."""
    return common.op_case(op, gpu, backend, f"op{op.index}", "roofbench.profile",
                          {"replayed": "alone, on its first call's cloned arguments"})


def profile(fn: Callable[..., Any], *args: Any, roofs: RoofSet | str | Path | None = None,
            timer: TimerConfig | None = None, compile: bool = False,
            name: str | None = None, out: str | Path | None = None,
            **kwargs: Any) -> Profile:
    """Profile ``fn(*args, **kwargs)`` (a function or an ``nn.Module``) op by op on this
    device's roofs (see the module doc). A jitted JAX function is placed whole
    (``jax_program``). ``compile=True`` adds the program under ``torch.compile``; ``out``
    writes results.json, profile.md and roofline.png there (a folder that holds a run, or
    the roofs file given, is never written over: its first free sibling ``out-2`` is).
    Every argument is checked before the program runs (a ``MeasureError``, one line); a
    keyword of the program named like one of these (roofs, timer, compile, name, out)
    reaches it through ``functools.partial``. The program runs under the caller's grad
    mode: wrap the call in ``torch.no_grad()`` for inference."""
    return run_profile(fn, args, kwargs, roofs=roofs, timer=timer, compile=compile,
                       name=name, out=out)


def run_profile(fn: Any, args: tuple[Any, ...], kwargs: dict[str, Any], *,
                roofs: Any = None, timer: Any = None, compile: Any = False,
                name: Any = None, out: Any = None) -> Profile:
    """``profile`` with the program's keywords as a dict (any names, ``out`` too); the
    caller's settings (threads, dtype, grad mode, RNG, flags, environment) as found when it
    returns, raises or is interrupted (``caller_settings.kept``)."""
    with kept():
        return _run_profile(fn, args, kwargs, roofs=roofs, timer=timer, compile=compile,
                            name=name, out=out)


def _run_profile(fn: Any, args: tuple[Any, ...], kwargs: dict[str, Any], *,
                 roofs: Any, timer: Any, compile: Any, name: Any, out: Any) -> Profile:
    from roofbench.bench.profile.jax_program import is_jax, profile_jax

    door.function(fn)
    roofs, label = door.roofs_arg(roofs), door.name(name)
    if timer is not None and not isinstance(timer, TimerConfig):
        raise MeasureError(f"timer= must be a TimerConfig, got {type(timer).__name__}")
    if not isinstance(compile, bool):
        raise MeasureError(f"compile= must be True or False, got {compile!r}")
    where = door.out_arg(out)
    if where is not None:
        from roofbench.bench.results import (  # pandas: loaded when a profile is written
            check_out_folder,
        )

        try:
            check_out_folder(where)
        except UserError as e:
            raise MeasureError(f"out=: {e}") from None
    if roofs is not None and not isinstance(roofs, RoofSet):  # a file: readable, before work
        from roofbench.roofs.files import RoofsFileError, load_roofs

        try:
            load_roofs(roofs)
        except RoofsFileError as e:
            raise MeasureError(f"roofs=: {e}") from None
    refuse_tensors([*args, *kwargs.values()])
    label = label or getattr(fn, "__qualname__", None) or type(fn).__name__
    try:
        if is_jax(fn, args):
            prof = profile_jax(fn, args, kwargs, roofs=roofs, timer=timer, name=label)
        else:
            prof = profile_torch(fn, args, kwargs, roofs=roofs, timer=timer, name=label,
                                 compile=compile)
    except (Exception, SystemExit) as e:
        if isinstance(e, Refusal) or not raised_by_user(e):
            raise
        raise users_failure(e, f"the program {label}") from e
    if where is not None:
        prof.write(where)
    return prof


def refuse_tensors(values: list[Any]) -> None:
    """A sparse or meta tensor among the program's arguments: refused with the reason (the
    byte rule counts dense storage; a meta tensor has no data, so no time to place)."""
    torch = sys.modules.get("torch")
    if torch is None:
        return
    for i, v in enumerate(values):
        if not isinstance(v, torch.Tensor):
            continue
        if v.is_meta:
            raise MeasureError(f"argument {i} is a meta tensor: it has no data, so nothing "
                               "it does can be timed or placed; pass real tensors")
        if v.layout != torch.strided:
            raise MeasureError(f"argument {i} is a {v.layout} tensor: profile counts the "
                               "bytes of dense (strided) tensors only; pass v.to_dense()")


def profile_torch(fn: Callable[..., Any], args: tuple[Any, ...], kwargs: dict[str, Any], *,
                  roofs: RoofSet | str | Path | None, timer: TimerConfig | None, name: str,
                  compile: bool = False, keep_replays: bool = False) -> Profile:
    """The program profiled on a working copy of its arguments, every pre-existing storage
    it writes and every ``.grad`` put back when done (``caller_state``)."""
    import torch

    wargs, wkwargs = working_copy(args, kwargs)
    backups, grads = Backups(), Grads.of(fn)
    caches = Caches.of(wargs, wkwargs)  # a transformers cache: rewound before each run
    rewind_grads = torch.is_grad_enabled() and bool(grads.held)
    run = fn
    if rewind_grads or caches:
        def run(*a: Any, **k: Any) -> Any:  # each run starts from the caller's state
            if rewind_grads:
                grads.restore()
            caches.rewind()
            return fn(*a, **k)
    try:
        return _profile_torch(run, wargs, wkwargs, backups, roofs=roofs, timer=timer,
                              name=name, compile=compile, keep_replays=keep_replays)
    finally:
        backups.restore()
        grads.restore()


def _profile_torch(fn: Callable[..., Any], args: tuple[Any, ...], kwargs: dict[str, Any],
                   backups: Backups, *, roofs: RoofSet | str | Path | None,
                   timer: TimerConfig | None, name: str, compile: bool,
                   keep_replays: bool) -> Profile:
    import torch
    from roofbench.bench.measure.roof_source import device_roofs
    from roofbench.bench.profile.fusion import fusion_groups

    load_start = os.getloadavg() if hasattr(os, "getloadavg") else None
    hold = ThreadHold.now()  # the caller's count, held while timing (place.ThreadHold)
    t0 = time.perf_counter()
    with threads_started() as started:
        recording, result = record_program(fn, args, kwargs, backups=backups)
    t_record = time.perf_counter() - t0
    seen = unseen_work(recording, result, started)  # what the recorder could not count
    tensors = [a for a in (*args, *kwargs.values()) if isinstance(a, torch.Tensor)]
    clock = clock_for(tensors)
    gpu = clock.kind == "gpu"
    rs, note = device_roofs(clock, roofs)
    if rs is not None and not gpu:  # the cores torch's threads run on, at most: read
        rs = roofs_for_threads(rs, used_cores(hold.read()))
    cfg = profile_timer(clock, timer)
    program_ws = program_working_set(recording)
    program = program_case(recording, clock, gpu, "eager")
    # the program's eager runs paired with samples of the roof that bounds the whole program
    shares = program_shares(recording)
    pair = hold.pair(pair_for(program, rs, clock, program_ws, shares=shares)) if not gpu \
        else None
    t0 = time.perf_counter()
    inprog = time_in_program(lambda: fn(*args, **kwargs), recording, cfg, gpu, pair,
                             threads=hold.read)
    t_inprog = time.perf_counter() - t0
    distance = reuse_distances(recording)
    places = []
    t0 = time.perf_counter()
    for op in recording.distinct:
        rec = op_case(op, gpu, clock.backend_name)
        assert op.replay is not None
        # alone, each sample paired with its roof as measure() pairs it (on a CPU)
        alone = held_paired_time(hold, clock, _replay(op.func, *op.replay), cfg, rec,
                                 rs if not gpu else None,
                                 op.bytes if rs is not None else None, arrays=op.arrays)
        core.fill_metrics(rec, alone, rs, op.bytes if rs is not None else None)
        rec.evidence.extra["alone"] = alone_summary(rec)
        timing = inprog.timing(op.index)
        if timing is not None:  # the case holds its time in the program
            rec.roofline = RooflinePlace()
            core.fill_metrics(rec, timing, rs, distance.get(op.index, program_ws)
                              if rs is not None else None)
            rec.evidence.extra["timed"] = "in the program (dispatch mode, each call)"
        flag_above_roof(rec, rs)
        if not (compile or keep_replays):  # freed once timed (a fusion group replays them)
            op.replay = None
        places.append(OpPlace(op, rec))
    t_ops = time.perf_counter() - t0
    t0 = time.perf_counter()
    # on a CPU the program's samples are the eager runs paired with the timed ones (host
    # clock, each right after a run of its ops, so both meet the same load); on a GPU the
    # clock's own loop (CUDA events)
    paired = inprog.eager_timing() if not gpu else None
    core.fill_metrics(program, paired or core.time_call(clock, lambda: fn(*args, **kwargs),
                                                        cfg),
                      rs, program_ws if rs is not None else None)
    flag_above_roof(program, rs)
    t_program = time.perf_counter() - t0
    prof = Profile(name, clock.device_name(), rs, recording, places, program,
                   "CUDA events" if gpu else "host clock")
    if note:
        prof.notes.append(note)
    prof.notes += seen
    whole = max(prof.program_s, prof.ops_s) or 1.0
    for p in places:
        rt = roof_time(p.op.flops, p.case.declaration.bytes, p.case.identity.precision, rs)
        p.share = Share(f"{p.op.name} #{p.op.index}", p.total_s, p.total_s / whole,
                        rt * p.op.calls if rt is not None else None)
    mark_ranks(prof.ranking(), {p.op.index: inprog.run_totals(p.op.index, p.op.calls)
                                for p in places})
    # a profile taken while other processes held the cores: said in results.json (its
    # notes, the program's evidence) and in extra["under_load"] (the report's mark)
    loaded = inprog.under_load()
    if loaded:
        prof.extra["under_load"] = loaded
        program.evidence.extra["under_load"] = loaded
        prof.notes.append(f"taken under load: {loaded}")
    prof.extra["launch_s"] = launch_cost(clock, cfg, gpu)
    prof.groups = fusion_groups(prof)
    prof.extra["phases_s"] = {"record": t_record, "time_in_program": t_inprog,
                              "time_ops_alone": t_ops, "time_program": t_program}
    prof.extra["in_program_runs"] = len(inprog.run_s)
    # Σ ops run by run (on a shared machine a run's ops share its load; medians taken op by
    # op mix slow runs with fast ones) beside each run's wall under the mode
    prof.extra["ops_run_s"] = inprog.ops_s
    prof.extra["run_wall_s"] = inprog.run_s
    prof.extra["paired_eager_s"] = inprog.eager_s
    prof.extra["ops_over_eager_paired"] = inprog.paired_ratio()
    # Σ ops over the program from the same run (its wall less the timing mode's own), run
    # by run: a run a busy machine stretches stretches both; the median and the spread
    prof.extra["program_in_run_s"] = inprog.program_run_s
    # the mode's untimed entry per call (an empty op through it and without it, each run),
    # x the run's calls: the profiler's overhead, out of the program's time, its own line
    prof.extra["profiler_overhead_call_s"] = inprog.overhead_call_s or None
    prof.extra["profiler_overhead_s"] = inprog.overhead_s if inprog.overhead_call_s else None
    ratios = inprog.in_run_ratios()
    prof.extra["ops_over_program_runs"] = ratios
    prof.extra["ops_over_program"] = inprog.in_run_ratio()
    prof.extra["ops_over_program_spread"] = [min(ratios), max(ratios)] if ratios else None
    prof.extra["ops_alone_s"] = sum((p.case.evidence.extra["alone"]["median_s"] or 0.0)
                                    * p.op.calls for p in places)
    prof.extra["program_working_set"] = program_ws
    prof.extra["clock_info"] = clock.info()
    prof.extra["load_start"] = load_start
    prof.extra["roofs_from"] = roofs_from(roofs)
    # the count torch reported where each timed run started (one figure: the roofs are for
    # it), and how often a roof probe had moved it and it was set back
    prof.extra["torch_threads"] = hold.used()
    prof.extra["torch_threads_read"] = sorted(hold.seen)
    prof.extra["torch_threads_reset"] = hold.reset
    if len(hold.seen) > 1:
        prof.notes.append(f"torch's thread count read {sorted(hold.seen)} across the timed "
                          f"runs: roofs for {hold.used()}")
    if compile:
        from roofbench.bench.profile.compiled import compile_program

        prof.compiled = compile_program(prof, fn, args, kwargs, clock, cfg, hold)
        if not keep_replays:
            for op in recording.distinct:
                op.replay = None
    return prof


@contextlib.contextmanager
def threads_started() -> Iterator[list[str]]:
    """The names of the threads started while the program is recorded (the recorder sees
    the ops of the calling thread only)."""
    started: list[str] = []
    real = threading.Thread.start

    def start(self: threading.Thread) -> None:
        started.append(self.name)
        real(self)
    threading.Thread.start = start  # type: ignore[method-assign]
    try:
        yield started
    finally:
        threading.Thread.start = real  # type: ignore[method-assign]


INTEGER = ("int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64", "bool")


def unseen_work(recording: Any, result: Any, threads: list[str]) -> list[str]:
    """What the counts cannot hold, refused or said (issue 39): ops on meta tensors are
    refused (no data: their time is not traffic); complex ops are left at 0 FLOPs (torch's
    registry counts one per element, a complex multiply is six real FLOPs); integer ops,
    work in threads the program started, and a program that ran no aten op are noted."""
    notes: list[str] = []
    meta = [d.name for d in recording.distinct if d.device == "meta"]
    if meta:
        raise MeasureError(f"the program computes on meta tensors ({', '.join(meta[:3])}): "
                           "they hold no data, so their ops' times are no traffic to place; "
                           "profile a program on real tensors")
    cplx = [d for d in recording.distinct if d.dtype.startswith("complex") and d.flops]
    for d in cplx:
        d.flops, d.flops_by = 0, "not counted: complex arithmetic (one op is 2-6 real FLOPs)"
    if cplx:
        names = ", ".join(sorted({d.name for d in cplx}))
        notes.append(f"{len(cplx)} op(s) on complex tensors ({names}) "
                     "counted as 0 FLOPs, placed by bandwidth: torch counts one FLOP per "
                     "element where a complex multiply is six real ones")
    ints = sorted({d.name for d in recording.distinct if d.dtype in INTEGER and d.flops})
    if ints:
        notes.append(f"integer op(s) ({', '.join(ints[:4])}) counted one operation per "
                     "element and held against the fp32 roof: no integer roof is measured")
    if threads:
        notes.append(f"the program started {len(threads)} thread(s) ({', '.join(threads[:3])})"
                     ": the ops they ran are not recorded (the recorder sees the calling "
                     "thread's), so their time is counted as framework overhead")
    if not recording.calls:
        why = ("it returned a generator, which nothing iterated" if inspect.isgenerator(result)
               else "its work is not PyTorch's (numpy, a C extension) or ran in another "
               "thread")
        notes.append(f"no aten op was recorded: {why}; the program's whole time is overhead")
    return notes


def _replay(func: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Callable[[], None]:
    def call() -> None:
        try:
            func(*args, **kwargs)
        except Exception as e:  # the program ran this op: replaying it alone is roofbench's
            raise ReplayError(f"replaying {func} alone failed: {first_line(e)}") from e

    return call


class ReplayError(RuntimeError):
    """An op the program ran failed when roofbench replayed it alone: roofbench's failure
    (raised in its own frame, so never said as the program's)."""
