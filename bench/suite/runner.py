"""Run cases: prepare, validate against the float64 reference, time, and derive the metrics.

A case's time counts only after it validated (fresh random inputs, outputs poisoned first,
every element checked). A case that fails validation, or cannot run, is recorded with its
reason and is never a valid point. On a backend with a device array module (``Backend.arrays``:
CuPy) the inputs are drawn, the float64 reference computed and the outputs checked on the
device; only scalars (norms, counts) come to the host.
"""

from __future__ import annotations

import traceback
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np
from roofbench.bench.backends.base import Backend
from roofbench.bench.measure import core
from roofbench.bench.suite.case_record import case_record
from roofbench.bench.suite.isolation import IsolatedCases
from roofbench.kernels.arrays import HOST, Arrays
from roofbench.kernels.spec import Array, Case

from roofbench.errors_text import first_line
from roofbench.records import CaseResult
from roofbench.roof_records import RoofSet
from roofbench.timing import TimerConfig


def validate(case: Case, outputs: dict[str, Array], reference: dict[str, Array],
             arrays: Arrays = HOST) -> tuple[bool, float, str | None]:
    """Relative norm error of every output against the float64 reference (``core.
    check_outputs``, the rule of every measurement); every element must have been written
    (outputs were poisoned with NaN) and be finite. ``outputs`` are stored as ``arrays``
    stores them and everything is computed in its module: on a device only the norms and
    counts (scalars) come to the host."""
    return core.check_outputs(case_outputs(case, outputs, reference, arrays),
                              case.workload.tolerance[case.dtype])


def case_outputs(case: Case, outputs: dict[str, Array], reference: dict[str, Array],
                 arrays: Arrays = HOST) -> Iterator[core.Output]:
    """A case's outputs as float64 values of ``arrays``' module, each beside its reference,
    one at a time (a missing one: ``core.Unchecked``)."""
    xp = arrays.xp
    bufs = case.buffers()
    for name, ref in reference.items():
        if name not in outputs:
            raise core.Unchecked(f"output {name!r} missing")
        yield name, arrays.values(xp.asarray(outputs[name]), bufs[name].dtype), ref, xp


class InputCache:
    """The inputs and float64 reference of the last (workload, dtype, size), shared by the
    variants that follow it, made where the backend's array module keeps them (``arrays``:
    on a device, drawn by its own generator seeded from ``rng``). On a CPU the inputs are the
    kernels' own arrays, so they are shared only by variants whose launches write no input;
    the peak memory is a case's either way (its validation holds inputs and reference)."""

    def __init__(self, enabled: bool, arrays: Arrays = HOST) -> None:
        self.enabled = enabled
        self.arrays = arrays
        self._key: tuple[Any, ...] | None = None
        self._value: tuple[dict[str, Array], dict[str, Array]] | None = None

    def get(self, case: Case, rng: np.random.Generator
            ) -> tuple[dict[str, Array], dict[str, Array]]:
        key = (case.workload.name, case.dtype, case.size)  # every occupancy level shares them
        keep = self.enabled and (self.arrays.device or not writes_an_input(case))
        if keep and key == self._key and self._value is not None:
            return self._value
        self._key, self._value = None, None  # free the previous arrays first
        a = self.arrays
        gen = a.generator(int(rng.integers(2**63))) if a.device else rng
        inputs = case.workload.make_inputs(case.size, case.dtype, gen, a)
        value = (inputs, case.workload.expected(inputs, case.size, case.dtype, a))
        if keep:
            self._key, self._value = key, value
        return value


def writes_an_input(case: Case) -> bool:
    """Whether a launch of ``case`` writes one of the workload's inputs (declared)."""
    inputs = case.workload.inputs(case.size, case.dtype)
    return any(w in inputs for la in case.launches() for w in la.writes)


def run_case(case: Case, backend: Backend, roofs: RoofSet | None, cfg: TimerConfig,
             rng: np.random.Generator, per_launch: bool = True,
             cache: InputCache | None = None,
             launch_cfg: TimerConfig | None = None) -> CaseResult:
    arrays = backend.arrays() or HOST
    prepared = None
    phases: dict[str, float] = {}
    device: dict[str, float] = {}
    clock = core.PhaseClock(phases, device,
                            backend.device_timer() if arrays.device else None)
    try:
        with backend.device_context():
            with clock("inputs"):
                inputs, reference = (cache or InputCache(False, arrays)).get(case, rng)
            with clock("compile", device=False):  # host only: NVRTC, module load
                backend.warm(case)
            with clock("prepare"):  # allocate, copy the inputs in
                prepared = backend.prepare(case, inputs)
            del inputs
            with clock("validate"):
                fetch = prepared.device_outputs if arrays.device else prepared.outputs

                def outputs(_: Any, ref: dict[str, Array] = reference
                            ) -> Iterator[core.Output]:
                    return case_outputs(case, fetch(), ref, arrays)

                ok, err, why = core.validate(prepared.poison, prepared.run, outputs,
                                             case.workload.tolerance[case.dtype])
                del outputs
            del reference
            if not ok:
                return case_record(case, backend, prepared.launch_facts(), status="invalid",
                                   error=f"validation failed: {why}", rel_error=err,
                                   extra=prepared.extra(), phases=phases, device_phases=device)
            rec = case_record(case, backend, prepared.launch_facts(), status="ok",
                              rel_error=err, phases=phases, device_phases=device)
            timing = core.paired_time(backend, prepared.run, cfg, rec, roofs, phases=clock)
            if arrays.device:
                device["time"] = float(sum(timing.samples))
            rec.evidence.extra = prepared.extra()
            if case.variant.tuned:  # a stored tuned configuration ran (bench/suite/tuned.py)
                rec.evidence.extra["tuned"] = case.variant.tuned
            core.fill_metrics(rec, timing, roofs)
            fns = prepared.launch_fns()
            if per_launch and len(fns) > 1:
                for lr, fn in zip(rec.measurement.launches, fns, strict=True):
                    lr.timing = core.time_call(backend, fn, launch_cfg or cfg, clock,
                                               "time_launches")
                if arrays.device:
                    device["time_launches"] = float(sum(sum(lr.timing.samples)
                                                        for lr in rec.measurement.launches
                                                        if lr.timing is not None))
            return rec
    except MemoryError:
        return case_record(case, backend, status="error", error="out of memory", phases=phases,
                           device_phases=device)
    except Exception as e:  # a kernel that fails to compile or launch must not stop the run
        tb = traceback.extract_tb(e.__traceback__)
        where = f" at {tb[-1].filename.rsplit('/', 1)[-1]}:{tb[-1].lineno}" if tb else ""
        return case_record(case, backend, status="error",
                           error=f"{first_line(e)}{where}", phases=phases, device_phases=device)
    finally:
        if prepared is not None:
            prepared.close()


def run_cases(cases: list[Case], backend: Backend, roofs: RoofSet | None, cfg: TimerConfig,
              seed: int | None = None,
              progress: Callable[[str], None] | None = None,
              done: Callable[[CaseResult], None] | None = None,
              launch_cfg: TimerConfig | None = None) -> list[CaseResult]:
    """Run every case; ``progress`` hears a case's key before it starts and ``done`` its
    result as soon as it ends (a caller saves and prints there)."""
    rng = np.random.default_rng(seed)
    cache = InputCache(enabled=True, arrays=backend.arrays() or HOST)
    out = []
    isolated: IsolatedCases | None = None
    try:
        for case in order_for_sharing(cases):
            if progress is not None:
                progress(case.key)
            if backend.isolated(case):  # in a process of its own: a fault costs this case
                isolated = isolated or IsolatedCases(backend.name)
                rec = isolated.run(case, cfg, launch_cfg, True, int(rng.integers(2**63)))
                if rec.outcome.status == "ok" and roofs is not None:
                    core.place_case(rec, roofs)
            else:
                rec = run_case(case, backend, roofs, cfg, rng, cache=cache,
                               launch_cfg=launch_cfg)
            out.append(rec)
            if done is not None:
                done(rec)
    finally:
        if isolated is not None:
            isolated.close()
    return out


def order_for_sharing(cases: list[Case]) -> list[Case]:
    """Cases grouped by (workload, dtype, size), keeping the first-seen order of groups and
    of variants inside a group, so variants sharing inputs run back to back."""
    groups: dict[tuple[Any, ...], list[Case]] = {}
    for c in cases:
        groups.setdefault((c.workload.name, c.dtype, c.size), []).append(c)
    return [c for g in groups.values() for c in g]
