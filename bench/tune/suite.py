"""`roofbench tune --workload W [--variant V] [--dtype D] [--size N]`: a suite kernel's
declared space (``Variant.tune``, kernels/spec.py: ``TuneSpace``) searched by ``tune`` with the
same stop rules as a script's, every configuration run on the case's own arrays, validated
against the workload's float64 reference and counted by its own plan (a configuration that
moves more declares it). The chosen configuration is stored for this device
(bench/suite/tuned.py), and a tune starts from the best the nearest known device chose."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from roofbench.kernels.spec import Case, TuneSpace, covers_once

from roofbench.roof_records import RoofSet

from ..errors import UserError
from ..results import utc_stamp
from ..suite import tuned as store
from .record import TuneRecord
from .space import Constraint, Param, Space, label

FAMILY = "cpu"  # the backend family the suite tunes here: the CPU's (Numba/C) kernels

__all__ = ["covers_once", "tunable_cases", "space_of", "tune_case", "Tuned", "CaseCall",
           "case_call"]


def space_of(ts: TuneSpace, case: Case) -> Space:
    """The search's ``Space`` of a kernel's declared one at the case's size and dtype: its
    parameters, and its rules as constraints (named as declared)."""
    def rule(ok: Callable[..., bool]) -> Callable[[Mapping[str, Any]], bool]:
        return lambda c: bool(ok(c, case.size, case.dtype))

    return Space(tuple(Param(p.name, p.values) for p in ts.params),
                 tuple(Constraint(rule(r.ok), r.text) for r in ts.rules))


def tunable_cases(workload: str, variant: str | None, dtype: str | None, size: str | None,
                  quick: bool = False) -> list[Case]:
    """The CPU cases of the selection whose variant declares a CPU space (the run's own
    selection rules and errors: bench/suite/session.py)."""
    from roofbench.kernels import registry

    from ..backends.cpu import CpuBackend
    from ..suite.session import parse_size, select_cases

    ws = registry.workloads()
    if workload not in ws:
        raise UserError(f"unknown workload {workload!r}; choose from: {', '.join(ws)}")
    w = ws[workload]
    spaced = sorted(v.name for v in w.variants.values() if FAMILY in v.tune)
    if not spaced:
        raise UserError(f"{workload} declares no tunable variant on the CPU")
    if variant is not None and variant not in spaced:
        raise UserError(f"{workload}/{variant} declares no CPU space; the tunable variants "
                        f"are: {', '.join(spaced)}")
    cases, skipped = select_cases(CpuBackend(), workloads=[workload], variant=variant,
                                  dtypes=[dtype or "fp32"],
                                  size=parse_size(size) if size else None, quick=quick)
    cases = [c for c in cases if FAMILY in c.variant.tune]
    if not cases:
        why = skipped[0].outcome.error if skipped else "no case matches the selection"
        raise UserError(f"nothing to tune: {why}")
    return cases


@dataclass(frozen=True)
class Tuned:
    """One case's tune: its record, and where its choice was stored (None: not stored) and
    the configuration it started from (another device's best, else the variant's default
    where its space holds it at this size; None: the declared order from its start)."""

    case: Case
    record: TuneRecord
    stored: Path | None
    started_from: str | None


@dataclass(frozen=True)
class CaseCall:
    """A suite case as the tuner runs it: its arrays (the inputs of a seeded draw, every other
    buffer empty, in the buffers' order), the float64 reference and the outputs it checks; a
    configuration's callable (``build``), counts and ``measure`` keywords from these. The
    search and scripts/tune_ab.py (two chosen configurations timed against each other) run
    the same calls."""

    case: Case
    names: tuple[str, ...]
    args: tuple[Any, ...]
    expected: Any
    outputs: Mapping[str, Any]

    def configured(self, config: Mapping[str, Any]) -> Case:
        c = self.case
        return Case(c.workload, c.variant.configured(FAMILY, config), c.dtype, c.size)

    def build(self, **config: Any) -> Callable[..., None]:
        """The configuration's launches as one callable of the case's arrays."""
        c = self.configured(config)
        table = c.variant.impls[FAMILY]
        steps = [(table[launch.kernel], launch.args) for launch in c.launches()]
        names = self.names

        def run(*given: Any) -> None:
            named = dict(zip(names, given, strict=True))
            for fn, args in steps:
                fn(*(named[a] if isinstance(a, str) else a for a in args))

        return run

    def keywords(self) -> dict[str, Any]:
        """``measure``'s keywords every configuration shares (not its counts)."""
        c = self.case
        return dict(dtype=c.dtype, precision=c.precision_on("cpu"),
                    name=f"{c.workload.name}.{c.variant.name}", reference=self.expected,
                    output=dict(self.outputs), tolerance=c.workload.tolerance[c.dtype],
                    size=list(c.size))


def case_call(case: Case, seed: int = 0) -> CaseCall:
    """``case``'s arrays drawn from ``seed``, its reference and outputs (``CaseCall``)."""
    w, dtype, size = case.workload, case.dtype, case.size
    inputs = w.make_inputs(size, dtype, np.random.default_rng(seed))
    arrays = _arrays(case, inputs)
    outputs = {n: arrays[n] for n, b in case.buffers().items() if b.role == "output"}
    return CaseCall(case, tuple(arrays), tuple(arrays.values()),
                    w.expected(inputs, size, dtype), outputs)


def tune_case(case: Case, *, out: Path | None, roofs: RoofSet | str | Path | None = None,
              save: bool = True, store_root: Path | None = None, seed: int = 0,
              **kw: Any) -> Tuned:
    """Search ``case``'s CPU space with ``tune`` (``kw``: its target, budget, exhaustive, drop,
    order, quick, clock/now); store the chosen configuration for this device unless
    ``save`` is false (or nothing was valid)."""
    from .search import tune

    ts = case.variant.tune[FAMILY]
    sp = space_of(ts, case)
    w, dtype, size = case.workload, case.dtype, case.size
    cc = case_call(case, seed)

    from ..measure.callables import Clock
    from ..measure.door import roofs_arg
    from ..measure.roof_source import device_roofs

    clock = kw.get("clock") or Clock()
    rs = roofs if isinstance(roofs, RoofSet) else device_roofs(clock, roofs_arg(roofs))[0]
    device = clock.device_name()
    pair = store.roof_pair(rs, case.precision_on("cpu"))
    key = store.entry_key(w.name, case.variant.name, FAMILY, dtype, size)
    start = store.nearest(device, "cpu", key, pair, store_root)
    first, started = None, None
    if start is not None and store.usable(ts, case, start[0].config) is None:
        first = dict(start[0].config)
        started = (f"{start[0].label} (chosen on {start[0].device}; {start[1]})")
    elif ts.default() in sp.configs():
        # No device's choice: the variant's own configuration first (the one it runs
        # untuned, chosen by its author), so a configuration far behind it is dropped early
        # rather than setting a slow best that nothing after it is judged against.
        first = ts.default()
        started = f"{label(first)} (the variant's default)"
    rec = tune(cc.build, sp, *cc.args,
               flops=lambda c: cc.configured(c).flops,
               bytes=lambda c: cc.configured(c).bytes(),
               **cc.keywords(), roofs=rs or roofs, out=out, first=first, **kw)
    stored = None
    best = rec.best
    if save and best is not None:
        stored = store.save(device, key, best.config, best.label, str(rec.out or ""),
                            utc_stamp(), kind="cpu", roofs=pair, root=store_root)
    return Tuned(case, rec, stored, started)


def _arrays(case: Case, inputs: Mapping[str, Any]) -> dict[str, Any]:
    """The case's buffers as the CPU backend holds them: its inputs, every other buffer an
    empty array of its dtype."""
    from roofbench.kernels.arrays import np_dtype

    out: dict[str, Any] = {}
    for name, buf in case.buffers().items():
        out[name] = np.ascontiguousarray(inputs[name]) if buf.role == "input" else \
            np.empty(buf.shape, dtype=np_dtype(buf.dtype))
    return out
