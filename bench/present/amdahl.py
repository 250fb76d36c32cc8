"""Which launch first: the roofline says how far each launch is from its roof, Amdahl's law how
much the whole can gain from closing that distance.

For a launch with share ``s`` of the whole's time and distance ``r`` to its own roof (its time
over the time it would take at its roof: the most it can speed up), the whole gains at most
``1 / ((1 - s) + s / r)`` when that launch alone reaches its roof. "The whole" is a multi-launch
case (its launches, each timed alone) or the run (every valid case, by its median time). A
launch's roof time is max(FLOPs / compute roof, bytes / bandwidth roof of every level it
moves), under the run's roofs: the same roofs the case is placed under. A launch at or above
its roof has nothing to gain (r = 1).
"""

from __future__ import annotations

from dataclasses import dataclass

from roofbench.records import CaseResult, RunResult
from roofbench.roof_records import RoofSet
from roofbench.roofline import roof_precision
from roofbench.units import duration

from .blocks import Block, Section, Sub, Table, Text

SHOWN = 10  # rows of the whole run's ranking shown (the rest gain less)


@dataclass(frozen=True)
class Share:
    """One launch of a whole: its time, its share of the whole, its time at its roof."""

    name: str
    time_s: float
    share: float
    roof_time_s: float | None

    @property
    def distance(self) -> float | None:
        """How many times faster it would be at its roof (never below 1)."""
        if self.roof_time_s is None or self.roof_time_s <= 0:
            return None
        return max(1.0, self.time_s / self.roof_time_s)

    @property
    def gain(self) -> float | None:
        """Amdahl's bound on the whole's speedup if this launch alone reached its roof."""
        r = self.distance
        return None if r is None else 1.0 / ((1.0 - self.share) + self.share / r)


def roof_time(flops: int, nbytes: dict[str, int], precision: str,
              roofs: RoofSet | None) -> float | None:
    """Seconds ``flops`` and ``nbytes`` (per memory level) take at the roofs, None without
    any roof that bounds them."""
    if roofs is None:
        return None
    terms = []
    compute = roofs.compute(roof_precision(precision, roofs))
    if compute is not None and flops:
        terms.append(flops / compute.value)
    for level, b in nbytes.items():
        m = roofs.memory(level)
        if m is not None and b:
            terms.append(b / m.value)
    return max(terms) if terms else None


def ranked(shares: list[Share]) -> list[Share]:
    """Largest possible gain first (unknown gains last), ties by share."""
    return sorted(shares, key=lambda s: (s.gain is None, -(s.gain or 0.0), -s.share))


def case_shares(c: CaseResult, roofs: RoofSet | None) -> list[Share] | None:
    """The launches of a multi-launch case, each timed alone; None unless every one was."""
    if c.outcome.status != "ok" or len(c.measurement.launches) < 2 or not all(
            la.timing and la.timing.median > 0 for la in c.measurement.launches):
        return None
    times = [la.timing.median for la in c.measurement.launches if la.timing]
    total = sum(times)
    return [Share(la.kernel + (f" ({la.note})" if la.note else ""), t, t / total,
                  roof_time(la.flops, la.bytes, c.identity.precision, roofs))
            for la, t in zip(c.measurement.launches, times, strict=True)]


def _profile_whole(c: CaseResult) -> bool:
    """A profile's program (and its fusion groups' replays): the sum of its ops again, never
    one launch beside them (the whole run would count the program twice)."""
    return c.evidence.extra.get("measured_by") == "roofbench.profile" and (
        c.identity.workload == "program" or c.identity.workload.startswith("group"))


def run_shares(run: RunResult) -> list[Share]:
    """Every valid case of the run as a launch of the whole run."""
    ok = [c for c in run.cases if c.outcome.status == "ok" and c.measurement.median_s
          and not _profile_whole(c)]
    total = sum(c.measurement.median_s or 0.0 for c in ok)
    return [
        Share(
            c.key,
            c.measurement.median_s or 0.0,
            (c.measurement.median_s or 0.0) / total,
            roof_time(c.declaration.flops, c.declaration.bytes, c.identity.precision, run.roofs),
        )
        for c in ok
    ]


def _x(v: float | None) -> str:
    return f"{v:.3g}x" if v is not None else "-"


def rows(shares: list[Share]) -> list[dict[str, str]]:
    return [{"rank": str(i), "launch": s.name, "time": duration(s.time_s),
             "share": f"{s.share:.1%}", "at its roof": duration(s.roof_time_s),
             "distance to roof": _x(s.distance), "whole gains at most": _x(s.gain)}
            for i, s in enumerate(ranked(shares), 1)]


def amdahl_section(run: RunResult) -> Section | None:
    whole = run_shares(run)
    pipes = [(c, s) for c in run.cases if (s := case_shares(c, run.roofs))]
    if len(whole) < 2 and not pipes:
        return None
    out: list[Block] = [Text(
        "Ranked by the most the whole can gain if that launch alone reached its roof: "
        "1 / ((1 - s) + s / r), s its share of the whole's time, r its distance to its own "
        "roof (its time over its time at the roof). Within a pipeline each launch is timed "
        "alone; the whole run is the sum of every valid case's median time.")]
    if len(whole) >= 2:
        total = sum(s.time_s for s in whole)
        table = rows(whole)
        out += [Sub(f"Whole run: {len(whole)} cases, {duration(total)}"),
                Table(table[:SHOWN])]
        if len(table) > SHOWN:
            out.append(Text(f"{len(table) - SHOWN} more cases, each gaining less."))
    for c, shares in pipes:
        out += [Sub(f"{c.key}: {len(shares)} launches"), Table(rows(shares))]
    return Section("Which launch first (Amdahl)", out)
