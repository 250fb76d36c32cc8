"""The roof's state tracked through a CPU run: short bandwidth probes bracket its memory-bound
cases.

A machine's memory bandwidth can change state for minutes at a time (a VM's host, another
tenant): measured once at the start of a run, the DRAM roof may be a slow state's and a case
timed later in a fast one lands above it. So a CPU run brackets each memory-bound case with a
short STREAM probe (``StreamBracket``: the DRAM roof's own kernel and arrays, a fraction of a
second): one before the first of a stretch of memory-bound cases, one after each. Each case
records the brackets next to it (``CaseResult.roof_states``); the roof set keeps every state
(``RoofSet.context.states``). The run's DRAM roof is the best state seen: a bracket above the
measured roof adds a roof ``dram <probe> (best state of the run)`` (RoofSet.memory takes the
highest) and every case finished so far is placed again under it, so no case is called above
its roof because the roof was measured in a slow state. A run whose bracketed bandwidth moved
by more than ``DRIFT_LIMIT`` (10%) says so in its notes and report, and its plot shows the
range as a band on the DRAM diagonal.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from typing import Protocol

from roofbench.bench.backends.base import Backend
from roofbench.bench.measure.pairs import dram_bracket
from roofbench.kernels.spec import Case

from roofbench.records import CaseResult
from roofbench.roof_context import DRIFT_LIMIT, RoofContext, RoofState
from roofbench.roof_records import Roof, RoofSet, bound
from roofbench.roofline import apply_roofs, roof_precision
from roofbench.units import si

BRACKET_ROOF = "(best state of the run)"


class Bracket(Protocol):
    """A short bandwidth probe: a call returns (best, median) bytes/s."""

    @property
    def name(self) -> str: ...

    def __call__(self) -> tuple[float, float]: ...

    def close(self) -> None: ...


def memory_bound(case: Case, roofs: RoofSet, kind: str = "cpu") -> bool:
    """Whether ``roofs`` hold ``case`` to a memory roof (no compute roof of its precision:
    the memory roof alone, so yes)."""
    try:
        return bound(roofs, case.intensity(), roof_precision(case.precision_on(kind),
                                                             roofs)).limiter == "memory"
    except KeyError:
        return True


class RoofTracker:
    """The brackets of one run (module doc). ``before(case)`` ahead of each case, ``after(rec)``
    once it is recorded, ``finish()`` at the end (notes, the probe's arrays freed)."""

    def __init__(self, roofs: RoofSet, bracket: Bracket, kind: str = "cpu",
                 clock: Callable[[], float] = time.perf_counter) -> None:
        self.roofs, self.bracket, self.kind, self.clock = roofs, bracket, kind, clock
        self.t0 = clock()
        self.placed: list[CaseResult] = []
        self._last: RoofState | None = None  # the bracket right before the next case
        self._case_before: RoofState | None = None
        if roofs.context is None:
            roofs.context = RoofContext()
        self.context: RoofContext = roofs.context

    @classmethod
    def for_run(cls, be: Backend, roofs: RoofSet | None) -> RoofTracker | None:
        """A tracker for a CPU run under this CPU's measured DRAM roof; None otherwise (a GPU,
        a roofs file of another device, no DRAM roof)."""
        if be.kind != "cpu" or roofs is None or roofs.device != be.device_name():
            return None
        dram = roofs.memory("dram")
        if dram is None or dram.source != "measured":
            return None
        return cls(roofs, dram_bracket(roofs))

    def _measure(self) -> RoofState:
        best, median = self.bracket()
        state = RoofState(probe=self.bracket.name, bytes_per_s=best,
                          median_bytes_per_s=median, at_s=self.clock() - self.t0)
        self.context.states.append(state)
        self._raise_roof(state)
        return state

    def before(self, case: Case) -> None:
        self._case_before = None
        if not memory_bound(case, self.roofs, self.kind):
            self._last = None  # a stretch of memory-bound cases ends
            return
        if self._last is None:
            self._last = self._measure()
        self._case_before = self._last

    def after(self, rec: CaseResult) -> None:
        if self._case_before is None:
            return
        after = self._measure()
        rec.roofline.roof_states = [self._case_before, after]
        self._last = after
        self._raise_to_pairs(rec)
        if rec.outcome.status == "ok" and rec.roofline.flop_per_s:
            apply_roofs(rec, self.roofs)  # under the best state so far
            self.placed.append(rec)

    def _raise_to_pairs(self, rec: CaseResult) -> None:
        """The DRAM roof's samples taken beside the case's (its pairs) saw the state the case
        ran in: their median above the roof raises it, so a case timed in a fast state that
        the brackets missed is not drawn above a roof measured in a slower one (its paired
        efficiency does not depend on the roof's value)."""
        t = rec.measurement.timing
        if t is None or not t.paired or not t.roof_probe.startswith("memory:dram:"):
            return
        median = statistics.median(t.roof_rates)
        self._raise_roof(RoofState(probe=t.roof_probe.split(":", 2)[2], bytes_per_s=median,
                                   median_bytes_per_s=median, at_s=self.clock() - self.t0),
                         "median of the roof samples paired with a case's")

    def _raise_roof(self, state: RoofState,
                    value_from: str = "best time of a bracket between cases") -> None:
        """The run's DRAM roof is the best state seen: a bracket (or a case's paired roof
        samples) above it becomes the roof, and every case placed so far is placed again."""
        dram = self.roofs.memory("dram")
        if dram is not None and state.bytes_per_s <= dram.value:
            return
        self.roofs.roofs = [r for r in self.roofs.roofs if not r.name.endswith(BRACKET_ROOF)]
        self.roofs.add(Roof(f"dram {state.probe} {BRACKET_ROOF}", "memory", state.bytes_per_s,
                            "measured", level="dram", median=state.median_bytes_per_s,
                            evidence={"probe": state.probe, "bracket_at_s": state.at_s,
                                      "value_from": value_from,
                                      "above": dram.name if dram else None}))
        for rec in self.placed:
            apply_roofs(rec, self.roofs)

    def finish(self) -> list[str]:
        """The run's notes on its roof state (and the probe's arrays freed)."""
        self.bracket.close()
        return drift_notes(self.context)


def drift_notes(ctx: RoofContext) -> list[str]:
    """One line when the bracketed bandwidth moved by more than DRIFT_LIMIT."""
    drift = ctx.drift()
    if drift is None or drift <= DRIFT_LIMIT:
        return []
    values = [s.bytes_per_s for s in ctx.states]
    return [f"DRAM bandwidth moved by {drift:.0%} during the run (> {DRIFT_LIMIT:.0%}): "
            f"{len(values)} brackets measured {si(min(values), 'B/s')} to "
            f"{si(max(values), 'B/s')}; the run's DRAM roof is the best state seen"]
