"""The one measurement core: validate, time, place.

Every path that measures goes through these functions and no other: the suite's runner
(``runner.run_case``: the kernels/ workloads), ``roofbench.measure`` and the pytest
``roofline`` fixture (``callables.measure_callable``) and ``roofbench.profile`` (each op and
the whole program). What differs between them is only what they hand in: how outputs are
poisoned and fetched, which clock times them (a Backend or a ``callables.Clock``, chosen once
before the loop), and how the working set is known.

- ``validate``: poison the outputs, one call, then every output against its float64
  reference (``check_outputs``, ``check_output``: the same shape, every element written and
  finite, the relative norm error within the tolerance).
- ``time_call``: the timer's sample loop (``roofbench.timing.sample_loop``, behind
  ``clock.time``), the phase's wall seconds recorded; ``paired_time`` with each sample
  followed by a sample of the roof that bounds the case (``pairs.py``).
- ``fill_metrics``: the record's time and rates from the samples, then its placement under
  the roofs (``roofline.apply_roofs``; a case of 0 FLOPs by bandwidth).
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from typing import Any, Protocol

import numpy as np

from roofbench.records import CaseResult
from roofbench.roof_records import RoofSet
from roofbench.roofline import apply_roofs, place
from roofbench.timing import RoofPair, TimerConfig, Timing

from .pairs import pair_for

# (ok, worst relative error, why not ok)
Verdict = tuple[bool, float, str | None]
# One output to check: (its name, a float64 copy of what was written (overwritten by the
# check), its float64 reference, the array module both belong to: numpy or CuPy)
Output = tuple[str, Any, Any, Any]


class Unchecked(Exception):
    """An output that cannot be compared at all (missing, None, one too many): its reason."""


def check_output(name: str, out: Any, ref: Any, tol: float, xp: Any) -> Verdict:
    """One output (float64, overwritten) against its float64 reference, both arrays of
    ``xp``: the same shape, every element finite (a NaN left by the poison is an element
    never written), and the relative norm error ||out - ref|| / ||ref|| within ``tol``."""
    if out.shape != ref.shape:
        return False, float("inf"), f"output {name!r} has shape {out.shape}, " \
                                    f"expected {ref.shape}"
    bad = ~xp.isfinite(out)
    if bool(bad.any()):
        at = int(xp.flatnonzero(bad)[0])
        first = tuple(int(i) for i in np.unravel_index(at, out.shape))
        return False, float("inf"), (f"{int(bad.sum())} element(s) of {name!r} not "
                                     f"written or not finite (first at {first})")
    del bad
    denom = float(xp.linalg.norm(ref)) or 1.0
    out -= ref  # in place on the float64 copy: no third full-size array
    err = float(xp.linalg.norm(out)) / denom
    if err > tol:
        return False, err, f"{name!r}: relative error {err:.3g} > tolerance {tol:.3g}"
    return True, err, None


def check_outputs(outputs: Iterable[Output], tolerance: float) -> Verdict:
    """Every output against its reference (``check_output``), the first failure returned;
    ``outputs`` may raise ``Unchecked`` (an output missing). Taken one at a time, so that a
    device holds one float64 copy at once."""
    worst = 0.0
    try:
        for name, out, ref, xp in outputs:
            ok, err, why = check_output(name, out, ref, tolerance, xp)
            if not ok:
                return False, err, why
            worst = max(worst, err)
    except Unchecked as e:
        return False, float("inf"), str(e)
    return True, worst, None


def validate(poison: Callable[[], None], call: Callable[[], Any],
             outputs: Callable[[Any], Iterable[Output]], tolerance: float) -> Verdict:
    """Poison the outputs with NaN, call once (``call`` waits for the work it queued), then
    check what it produced (``outputs(result)``: the outputs paired with their references)."""
    poison()
    produced = call()
    return check_outputs(outputs(produced), tolerance)


class Timer(Protocol):
    """What times: a Backend, or the clock of a callable (``callables.Clock``)."""

    def time(self, fn: Callable[[], None], cfg: TimerConfig) -> Timing: ...


class PhaseClock:
    """``with clock("name"):`` adds the block's wall seconds to ``phases[name]`` and, with a
    device timer, the device seconds between CUDA events around it to ``device[name]``."""

    def __init__(self, phases: dict[str, float], device: dict[str, float] | None = None,
                 timer: Any = None) -> None:
        self.phases, self.timer = phases, timer
        self.device = device if device is not None else {}

    @contextlib.contextmanager
    def __call__(self, name: str, device: bool = True) -> Iterator[None]:
        timed = self.timer is not None and device
        if timed:
            self.timer.start()
        t0 = time.perf_counter()
        try:
            yield
        finally:
            if timed:
                with contextlib.suppress(Exception):  # a failed phase keeps its wall time
                    self.device[name] = self.device.get(name, 0.0) + self.timer.stop()
            self.phases[name] = self.phases.get(name, 0.0) + time.perf_counter() - t0


def time_call(clock: Timer, fn: Callable[[], Any], cfg: TimerConfig,
              phases: PhaseClock | None = None, phase: str = "time",
              pair: RoofPair | None = None) -> Timing:
    """``fn`` timed by ``clock`` (its warm-up and sample loop), the wall seconds it took
    added to ``phase`` of ``phases``; ``pair``: the roof sampled beside each sample."""
    with phases(phase, device=False) if phases is not None else contextlib.nullcontext():
        if pair is None:
            return clock.time(fn, cfg)
        return clock.time(fn, cfg, pair=pair)  # type: ignore[call-arg]


def paired_time(clock: Timer, fn: Callable[[], Any], cfg: TimerConfig, rec: CaseResult,
                roofs: RoofSet | None, working_set: int | None = None,
                phases: PhaseClock | None = None, phase: str = "time",
                arrays: Sequence[int] = (),
                shares: Mapping[int, float] | None = None) -> Timing:
    """``time_call`` with the roof that bounds ``rec`` sampled beside each sample, where this
    clock and these roofs have one (``pairs.pair_for``: ``arrays`` a callable's declared
    arrays, ``shares`` the streams of a program's calls; else plain ``time_call``)."""
    return time_call(clock, fn, cfg, phases, phase,
                     pair_for(rec, roofs, clock, working_set, arrays, shares))


def fill_metrics(rec: CaseResult, timing: Timing, roofs: RoofSet | None,
                 working_set: int | None = None) -> None:
    """The record's time and rates from ``timing``, then its place under ``roofs``: on the
    cache level ``working_set`` bytes fit in when given (``roofline.place``; else from the
    record's buffers), attainable, efficiency and bound by ``roofline.apply_roofs``. A case
    of 0 FLOPs that moves bytes is placed by bandwidth; one that moves nothing either (a
    view) has no rate and no place."""
    rec.measurement.timing = timing
    rec.measurement.median_s = timing.median
    moves = bool(rec.declaration.flops or any(rec.declaration.bytes.values()))
    rec.roofline.flop_per_s = (
        rec.declaration.flops / timing.median if timing.median > 0 and moves else None
    )
    rec.roofline.bytes_per_s = {lvl: b / timing.median for lvl, b in rec.declaration.bytes.items()}
    if roofs is not None:
        place_case(rec, roofs, working_set)


def place_case(rec: CaseResult, roofs: RoofSet, working_set: int | None = None) -> None:
    """A timed record placed under ``roofs`` (the second half of ``fill_metrics``; alone for
    a record timed elsewhere: an isolated case's, timed in its own process)."""
    if working_set is not None:
        rec.roofline.placement = place(working_set, roofs)
    apply_roofs(rec, roofs)
