"""Which cases are fusion results: the report's fusion table and the plot's arrows both pair
each fused variant with the naive one it declares (Variant.arrow_from)."""

from __future__ import annotations

from collections.abc import Iterable, Iterator

from roofbench.kernels.registry import workloads

from roofbench.records import CaseResult


def fused_from(cases: Iterable[CaseResult]) -> Iterator[tuple[CaseResult, str]]:
    """(case, the variant it is fused from) for each case whose variant declares one."""
    ws = workloads()
    for c in cases:
        w = ws.get(c.workload)
        v = w.variants.get(c.variant) if w else None
        if v is not None and v.arrow_from:
            yield c, v.arrow_from
