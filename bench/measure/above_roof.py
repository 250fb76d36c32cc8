"""The validity rule every door shares: a point above 105% of its roof is not valid.

Profile, trace and measure all hold a point to it, so it lives with the measurement core
that they all import, not with one of the doors."""

from __future__ import annotations

from roofbench.bench.present.sections import above_roof_cause

from roofbench.records import CaseResult
from roofbench.roof_records import RoofSet

ABOVE = 1.05  # over this fraction of its roof a point is not valid


def flag_above_roof(rec: CaseResult, rs: RoofSet | None) -> None:
    """A point over ``ABOVE`` of its roof is not valid: its status says so, with the cause."""
    eff = rec.roofline.efficiency
    if rs is None or eff is None or eff <= ABOVE:
        return
    pl = rec.roofline.placement
    where = (f"placed on {pl.level} by its data's reuse distance "
             f"({pl.working_set_bytes} B); " if pl else "")
    rec.outcome.status = "invalid"
    rec.outcome.error = (f"{eff:.0%} of {rec.roofline.limiting_roof}, above its roof: "
                         f"{where}likely cause: {above_roof_cause(rec, rs)}")
