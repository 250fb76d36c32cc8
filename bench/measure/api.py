"""The Python API: your own kernel on this device's roofline.

``roofbench.measure(fn, *args, flops=..., reads=..., writes=...)`` times ``fn(*args)`` with the
project's timer, validates it against ``reference`` when given, and returns the typed case
record (``CaseResult``) placed under this device's calibrated roofs. ``roofbench.Session(out=)``
collects measured cases into a results.json of the run schema, rewritten atomically after
every case, with report.md, report.html and the roofline plot written when it closes: the
files `roofbench report`, `plot` and `compare` read like any run's.

Roofs: ``roofs=`` (a RoofSet or any roofs file) is used as given; otherwise this device's
calibration cache (roofs/<device-slug>.json under $ROOFBENCH_HOME, else the per-user cache
directory: the file `roofbench calibrate` writes; a CPU's is measured again when the machine's
fingerprint changed), measured
once by the quick calibration when there is none and reused by every later call and process.
"""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict
from pathlib import Path
from typing import Any

from roofbench.boundary import Refusal, prepare_environment
from roofbench.errors_text import first_line
from roofbench.readers import case_problem
from roofbench.records import CaseResult, Declaration, Evidence, Identity, Outcome, RunResult
from roofbench.roof_records import RoofSet
from roofbench.timing import TimerConfig, timer_for

from ..errors import UserError
from ..present.roof_state import paired_text
from ..present.sections import above_roof_cause
from ..results import environment, git_commit, process_command, save_run, utc_stamp
from . import door
from .above_roof import ABOVE, flag_above_roof
from .callables import Clock, clock_for, measure_callable, placement_line
from .declared import Call, declare
from .door import MeasureError
from .roof_source import device_roofs

_ACTIVE: list[Session] = []


def _say(line: str) -> None:
    print(f"roofbench: {line}", file=sys.stderr, flush=True)


class Session:
    """Measured cases of one device collected into one results.json (see the module doc).

    ``out``: the folder results.json, results.csv, report.md, report.html and roofline.png
    go to (None: kept in memory, ``run`` holds them), resolved now; a folder that holds a
    run (or any file of that name) is never written over: the session takes the first free
    sibling ``out-2``, ``out-3``, ... and says so (``self.out`` is the folder written).
    ``roofs``: a RoofSet or roofs file to
    place every case under instead of the calibration cache; ``roofs_cache``: another path
    for that cache. ``timer`` / ``quick``: the timer's configuration (default: a run's).
    Use it as a context manager, or call ``close()``; inside ``with Session(...)``,
    ``roofbench.measure`` adds its cases to it.
    """

    def __init__(self, out: str | Path | None = None, *,
                 roofs: RoofSet | str | Path | None = None,
                 roofs_cache: str | Path | None = None, timer: TimerConfig | None = None,
                 quick: bool = False) -> None:
        try:
            prepare_environment()  # Numba's thread count and cache, before it is imported
        except Refusal as e:
            raise MeasureError(str(e)) from None
        asked = door.out_arg(out)
        self.roofs_arg = door.roofs_arg(roofs)
        self.roofs_cache = door.out_arg(roofs_cache) if roofs_cache is not None else None
        if timer is not None and not isinstance(timer, TimerConfig):
            raise MeasureError(f"timer= must be a TimerConfig, got {type(timer).__name__}")
        if not isinstance(quick, bool):
            raise MeasureError(f"quick= must be True or False, got {quick!r}")
        self.timer, self.quick = timer, quick
        self.run: RunResult | None = None
        self.closed = False
        self.out = _claim(asked) if asked is not None else None  # before measuring, not after

    @property
    def cases(self) -> list[CaseResult]:
        return list(self.run.cases) if self.run else []

    def measure(self, fn: Callable[..., Any], *args: Any, flops: Any = None, reads: Any = 0,
                writes: Any = 0, bytes: Mapping[str, Any] | None = None,
                dtype: str | None = None, precision: str | None = None,
                name: str | None = None, reference: Any = None, output: Any = None,
                tolerance: float | None = None,
                size: Sequence[int] | None = None, counts: str | None = None,
                **kwargs: Any) -> CaseResult:
        """Measure ``fn(*args, **kwargs)`` (see ``roofbench.measure``) and add it to this
        session."""
        return self.measure_call(declare(
            fn, args, kwargs, flops=flops, reads=reads, writes=writes, bytes=bytes, dtype=dtype,
            precision=precision, name=name, reference=reference, output=output,
            tolerance=tolerance, size=size, counts=counts))

    def measure_call(self, call: Call) -> CaseResult:
        """Measure a declared call (``declared.declare``) and add it to this session; the
        caller's settings (threads, dtype, grad mode, RNG, flags, environment) as found
        when it returns, raises or is interrupted (``caller_settings.kept``)."""
        from .caller_settings import kept

        with kept():
            return self._measure_call(call)

    def _measure_call(self, call: Call) -> CaseResult:
        if self.closed:
            raise MeasureError("this session is closed")
        refuse_interpreters()
        clock = clock_for(call.args)
        device = clock.device_name()
        if self.run is not None and self.run.device != device:
            raise MeasureError(f"this session measures on {self.run.device}; a case on "
                               f"{device} needs a Session of its own")
        roofs, note = ((self.run.roofs, None) if self.run is not None
                       else device_roofs(clock, self.roofs_arg, self.roofs_cache))
        cfg = timer_for(clock.kind, self.timer, self.quick)
        if self.run is None:
            self.run = RunResult(backend=clock.backend_name, device=device, roofs=roofs,
                                 cases=[], environment=environment(clock.info()),
                                 command=process_command(),
                                 created=utc_stamp(), git_commit=git_commit(Path.cwd()),
                                 timer=asdict(cfg))
            if note:
                self.run.notes.append(note)
        try:
            rec = measure_callable(call, clock=clock, cfg=cfg, roofs=roofs)
        except Exception as e:  # the caller's function raised: recorded, then raised again
            self._add(_failed(call, clock, e))
            raise
        self._above_roof(rec, roofs)
        line = placement_line(rec)
        if line:
            _say(line)  # one line: the data is in a cache, and so is its roof
        paired = paired_text(rec)
        if paired:
            _say(f"{rec.key}: {paired}")  # the roof as it was beside the machine's best
        self._add(rec)
        return rec

    def _above_roof(self, rec: CaseResult, roofs: RoofSet | None) -> None:
        """Profile's rule (``measure.above_roof.flag_above_roof``): above 105% of roofs measured
        on this machine (its calibration) a point is not valid, its error naming the likely
        cause; no report or plot draws it. Under roofs the caller gave (``roofs=``, a file:
        the machine a kernel is tuned for, a hand-written set) it is said and recorded
        (``evidence.extra["above_roof"]``), its status kept: those roofs need not be this
        machine's, and a faster machine's point above them is no fault of the measurement."""
        eff = rec.roofline.efficiency
        if roofs is None or eff is None or eff <= ABOVE or not rec.valid:
            return
        if self.roofs_arg is None:
            flag_above_roof(rec, roofs)
            _say(f"{rec.key}: not valid: {rec.outcome.error}")
            return
        why = (f"{eff:.0%} of {rec.roofline.limiting_roof}, above the roofs given "
               f"({above_roof_cause(rec, roofs)}, or they are not this machine's)")
        rec.evidence.extra["above_roof"] = why
        _say(f"{rec.key}: {why}")

    def _add(self, rec: CaseResult) -> None:
        assert self.run is not None
        why = case_problem(rec)
        if why:  # never a case written, then left out by the run's own reader
            raise MeasureError(f"{rec.key}: {why}: not a case a run can hold")
        if any(
            c.key == rec.key and c.identity.backend == rec.identity.backend for c in self.run.cases
        ):
            raise MeasureError(f"{rec.key} was measured already in this session: give each "
                               "case its own name=")
        self.run.cases.append(rec)
        self.save()

    def save(self) -> Path | None:
        """Rewrite results.json (and results.csv) atomically; None without ``out``."""
        if self.out is None or self.run is None:
            return None
        return save_run(self.run, self.out)

    def close(self, interrupted: bool = False, reports: bool = True) -> list[Path]:
        """Save, then write report.md, report.html and the roofline (``reports``); returns
        their paths."""
        if self.closed:
            return []
        self.closed = True
        if self.run is None or self.out is None:
            return []
        if interrupted:
            self.run.interrupted = True
            self.run.notes.append(f"interrupted: {len(self.run.cases)} cases measured")
        from ..present.outputs import write_outputs

        path = self.save()
        assert path is not None
        if not reports:
            return [path]
        try:
            return [path, *write_outputs(self.run, self.out)]
        except KeyboardInterrupt:  # stopped while drawing: the report once more, no plot
            self.run.interrupted = True
            self.run.notes.append("interrupted while the report was written")
            self.save()
            report_after_stop(self.run, self.out)
            raise

    def __enter__(self) -> Session:
        _ACTIVE.append(self)
        return self

    def __exit__(self, kind: Any, exc: Any, tb: Any) -> None:
        with contextlib.suppress(ValueError):
            _ACTIVE.remove(self)
        self.close(interrupted=kind is not None and issubclass(kind, KeyboardInterrupt))


def _failed(call: Call, clock: Clock, e: BaseException) -> CaseResult:
    workload, _, variant = call.name.partition("/")
    n = call.counts
    return CaseResult(
        Identity(workload=workload, variant=variant or "default", backend=clock.backend_name,
                 dtype=n.dtype, size=list(n.size), precision=n.precision, cores=n.cores),
        Declaration(flops=n.flops, bytes=dict(n.bytes), ai=n.ai),
        Outcome(status="error", error=first_line(e)),
        evidence=Evidence(extra={"measured_by": "roofbench.measure"}))


def measure(fn: Callable[..., Any], *args: Any, flops: Any = None, reads: Any = 0,
            writes: Any = 0, bytes: Mapping[str, Any] | None = None, dtype: str | None = None,
            precision: str | None = None, name: str | None = None, reference: Any = None,
            output: Any = None, tolerance: float | None = None,
            size: Sequence[int] | None = None, session: Session | None = None,
            roofs: RoofSet | str | Path | None = None, counts: str | None = None,
            **kwargs: Any) -> CaseResult:
    """Time ``fn(*args, **kwargs)`` and place it on this device's roofline.

    Keyword arguments other than those below are the function's own, passed through on every
    call (``measure(np.sum, x, axis=0, flops=..., reads=x)``); a malformed argument is a
    ``MeasureError``, one line naming it.

    ``flops``: floating-point operations of one call (0 for a copy or a layout change: placed
    by bandwidth, its efficiency bytes/s over the memory roof). ``reads`` / ``writes``: the
    DRAM bytes it moves, as byte counts or the arrays themselves (their ``nbytes``);
    ``bytes``: bytes per memory level ({"dram": ..., "l2": ...}). ``dtype``: fp64, fp32,
    fp16, bf16 or fp8 (default: the first floating array argument's); ``precision``: the
    compute roof it meets (default: fp64/fp32 as the dtype, fp32 for lower-precision
    storage; "fp16_tc" etc. for tensor cores). ``name``: "workload" or "workload/variant"
    (default: the function's name). ``counts="kernel"`` (``fn`` a Triton ``kernel[grid]``):
    FLOPs and bytes read from the kernel itself, run once under Triton's interpreter
    (kernels/triton_counts.py).

    Validation, when ``reference`` is given (an array, a tuple/dict of them, or a callable
    taking ``*args``): one call before timing; what it returned, or the arrays ``output``
    names (poisoned with NaN first: the function must write every element), must have the
    reference's shape, be finite everywhere, and be within ``tolerance`` in relative norm
    error ||out - ref|| / ||ref|| computed in float64, the rule of a run. A case that fails
    is returned with status "invalid", untimed. Without a reference nothing is checked (the
    record's ``extra["validation"]`` says so).

    Timing: CUDA events on the current stream when an argument is a CuPy array or a torch
    CUDA tensor, else the host clock; warm-up, then samples until the noise stops them (the
    timer of a run), raw samples kept in ``record.timing``. Inside ``with Session(...)`` (or
    with ``session=``) the case is added to that session's results.json.
    """
    if session is not None and not isinstance(session, Session):
        raise MeasureError(f"session= must be a roofbench.Session, got {type(session).__name__}")
    sess = session or (_ACTIVE[-1] if _ACTIVE else None)
    if sess is not None and roofs is not None:
        raise MeasureError("roofs= belongs to the Session when one collects the case")
    from .caller_settings import kept

    with kept():  # the Session's set-up too
        target = sess if sess is not None else Session(roofs=roofs)
        return target.measure_call(declare(
            fn, args, kwargs, flops=flops, reads=reads, writes=writes, bytes=bytes,
            dtype=dtype, precision=precision, name=name, reference=reference, output=output,
            tolerance=tolerance, size=size, counts=counts))


def _claim(out: Path) -> Path:
    """The folder a session writes (``results.claim_folder``), said when it is a sibling."""
    from ..results import claim_folder

    try:
        got = claim_folder(out)
    except UserError as e:
        raise MeasureError(f"out=: {e}") from None
    except OSError as e:
        raise MeasureError(f"out=: {e.strerror or e}: {out}") from None
    if got != out:
        _say(f"{out} holds a run already: this session writes {got}")
    return got


def refuse_interpreters() -> None:
    """A kernel run by an interpreter or a simulator has no time worth placing on a roof
    (looked at once the module that reads the variable is loaded)."""
    import os

    for var, module in (("TRITON_INTERPRET", "triton"), ("NUMBA_ENABLE_CUDASIM", "numba.cuda")):
        if module in sys.modules and os.environ.get(var, "").strip() not in ("", "0"):
            raise MeasureError(f"{var}={os.environ[var]}: kernels run by an interpreter or a "
                               "simulator, whose time is not the device's; unset it to measure")


def report_after_stop(run: RunResult, folder: Path) -> list[Path]:
    """The report written once more after a stop cut the first write short: report.md and
    report.html; when the stop left a plotting library half imported (Bokeh refuses to
    define its models twice), report.md alone, and a line says why."""
    from ..present.outputs import write_report

    try:
        return write_report(run, folder / "report.md")
    except Exception as e:  # an import cut in half by the stop: the page cannot be drawn
        from roofbench.fileio import atomic_write_text

        from ..present.report import render

        path = folder / "report.md"
        atomic_write_text(path, render(run))
        _say(f"report.html not rewritten after the stop ({first_line(e)})")
        return [path]
