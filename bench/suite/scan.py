"""An occupancy scan's cases: every selected case once per level its backend can set.

Occupancy and intensity are independent axes: the levels change how much of the device runs
a case (Numba threads on a CPU, resident blocks per SM on a GPU), never what it computes or
moves, so every level has the case's FLOPs and bytes (checked here before anything runs, and
on the stored records by the report).
"""

from __future__ import annotations

from dataclasses import replace

from roofbench.bench.backends.base import Backend, CaseUnsupported
from roofbench.bench.suite.case_record import case_record
from roofbench.kernels.spec import Case

from roofbench.records import CaseResult


def occupancy_cases(cases: list[Case], backend: Backend) -> tuple[list[Case], list[CaseResult]]:
    """(each case at every level, lowest first; records of the cases that cannot be scanned
    on ``backend``, with the reason)."""
    out: list[Case] = []
    skipped: list[CaseResult] = []
    for case in cases:
        try:
            levels = backend.occupancy_levels(case)
        except CaseUnsupported as e:
            skipped.append(case_record(case, backend, status="unsupported", error=str(e)))
            continue
        for level in levels:
            at = replace(case, occupancy_level=level)
            if at.flops != case.flops or at.bytes() != case.bytes():
                raise RuntimeError(f"{at.key}: the level changed the counted FLOPs or bytes "
                                   "(a workload's plan must not depend on its occupancy)")
            out.append(at)
    return out, skipped
