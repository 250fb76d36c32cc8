"""Which cases are fusion results: the report's fusion table and the plot's arrows both pair
each fused variant with the naive one it is fused from (CaseResult.arrow_from, stored at run
time from Variant.arrow_from)."""

from __future__ import annotations

from collections.abc import Iterable, Iterator

from roofbench.records import CaseResult


def fused_from(cases: Iterable[CaseResult]) -> Iterator[tuple[CaseResult, str]]:
    """(case, the variant it is fused from) for each case that declares one."""
    for c in cases:
        if c.arrow_from:
            yield c, c.arrow_from
