"""What the report says of a roof set's rule and context, and the plot's band of a run whose
DRAM bandwidth moved: the roof rule (roofbench/roof_context.ROOF_RULE), the environment the
CPU probes ran in, and the states a run tracked (bench/suite/drift.py). Pure functions of
the stored roof set."""

from __future__ import annotations

from typing import Any

from roofbench.records import CaseResult
from roofbench.roof_context import DRIFT_LIMIT, ROOF_RULE, PairedRoof, cpu_list
from roofbench.roof_records import RoofSet
from roofbench.units import si


def roof_context_lines(rs: RoofSet) -> list[str]:
    """The report's lines under the roofs table: the rule every roof follows (and each
    measured roof's median beside its best), the probes' cores and threads, the run's
    brackets."""
    lines = [f"The rule: {ROOF_RULE}."]
    medians = [f"{r.name} {si(r.value, r.unit)} (median {si(r.median, r.unit)})"
               for r in rs.roofs if r.median is not None]
    if medians:
        lines.append("Best and median of each probe: " + "; ".join(medians) + ".")
    env = rs.context.environment if rs.context else None
    if env is not None:
        threads = ", ".join(f"{k} {v}" for k, v in env.threads.items() if v is not None)
        found = ", ".join(f"{k}={v}" for k, v in env.variables.items())
        lines.append(
            f"Probes ran on cores {env.cores_text} of {cpu_list(env.machine_cores)} "
            f"({'restricted: ' + env.cores_from if env.restricted else 'every core allowed'})"
            + (f", threads: {threads}" if threads else "")
            + (f"; left out of them: {found}" if found else "") + ".")
    band = drift_band(rs)
    states = rs.context.states if rs.context else []
    if states:
        lo, hi = min(s.bytes_per_s for s in states), max(s.bytes_per_s for s in states)
        moved = hi / lo - 1
        lines.append(
            f"DRAM bandwidth tracked through the run by {len(states)} brackets "
            f"({states[0].probe}): {si(lo, 'B/s')} to {si(hi, 'B/s')}, moved by {moved:.0%}"
            + (f" (> {DRIFT_LIMIT:.0%}: shown as a band on the DRAM diagonal)" if band
               else "") + "; the run's DRAM roof is the best state seen.")
    return lines


def paired_text(c: CaseResult) -> str | None:
    """A case timed beside its roof's samples, in words: its efficiency against the roof as
    it was while it ran, with the interval, the probe sampled and its range, then the
    machine's best state and the case's share of it (None: not paired)."""
    p = c.roofline.paired
    if p is None:
        return None
    kind, _, rest = p.probe.partition(":")
    key, _, name = rest.partition(":")
    what = f"{key.upper()} roof" if kind == "memory" else f"{key} compute roof ({name})"
    best = (f"; the machine's best state {si(p.ceiling, p.unit)}"
            + (f" ({p.of_ceiling:.0%} of it)" if p.of_ceiling is not None else ""))
    # the memory probe by name: a case's bytes may be timed against a probe of their streams
    # ("read", "stream-square-nt 80% + read 20%"), not the roof's own STREAM kernel
    sampled = f"{name}: " if kind == "memory" and name else ""
    return (f"{p.efficiency:.0%} [{p.lo:.0%}, {p.hi:.0%}] of the {what} as it was while it ran "
            f"({sampled}{si(p.roof_low, p.unit)} to {si(p.roof_high, p.unit)}, {p.pairs} pairs)"
            f"{best}{by_state(p)}")


# States whose efficiencies differ by less than this are one figure, within the pairs' own
# scatter (a stream that follows its roof: 0.01-0.04 on the Zen 4 VM)
STATE_APART = 0.05


def by_state(p: PairedRoof) -> str:
    """"; by the roof's state: 94% at 32 GB/s (40 pairs), 75% at 56 GB/s (20 pairs): ...",
    where the pairs fell in two states of the roof and the case's efficiency differs between
    them (it does not follow its roof all the way: its figure depends on the state it met)."""
    if len(p.states) != 2 or abs(p.states[0].efficiency - p.states[1].efficiency) < STATE_APART:
        return ""
    each = ", ".join(f"{s.efficiency:.0%} at {si(s.roof_median, p.unit)} ({s.pairs} pairs)"
                     for s in p.states)
    return (f"; by the roof's state: {each}: the case does not follow its roof all the way, "
            "so its efficiency depends on the state it ran in")


def drift_band(rs: RoofSet | None) -> tuple[float, float] | None:
    """(lowest, highest) bracketed DRAM bandwidth of a run that moved by more than
    DRIFT_LIMIT; None otherwise."""
    ctx = rs.context if rs is not None else None
    drift = ctx.drift() if ctx is not None else None
    if ctx is None or drift is None or drift <= DRIFT_LIMIT:
        return None
    values = [s.bytes_per_s for s in ctx.states]
    return min(values), max(values)


def draw_drift_band(ax: Any, rs: RoofSet, xlim: tuple[float, float],
                    ylim: tuple[float, float]) -> None:
    """The range of a drifting run's DRAM bandwidth: a band between the lowest and highest
    bracket's diagonals, up to the highest compute roof (matplotlib axes)."""
    band = drift_band(rs)
    if band is None:
        return
    import numpy as np

    lo, hi = band
    top = max((r.value for r in rs.roofs if r.kind == "compute"), default=ylim[1])
    xs = np.geomspace(xlim[0], xlim[1], 128)
    ax.fill_between(xs, np.minimum(lo * xs, top), np.minimum(hi * xs, top), color="tab:orange",
                    alpha=0.18, lw=0, zorder=1,
                    label=f"DRAM during the run {si(lo, 'B/s')}-{si(hi, 'B/s')}")
