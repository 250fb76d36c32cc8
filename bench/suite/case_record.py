"""The record of a case (``case_record``): a case's declaration written into a CaseResult,
with what the run says of it (status, error, timing fields as keywords). One builder for every
module that writes a case's record: the runner, the isolated case's parent and child, the
scan (unsupported cases) and the run session (cases skipped before they run)."""

from __future__ import annotations

from typing import Any, Protocol

from roofbench.kernels.spec import Case

from roofbench.records import (
    BufferFacts,
    CaseResult,
    Declaration,
    Evidence,
    Identity,
    LaunchFacts,
    LaunchResult,
    Measurement,
    Outcome,
)


class RecordedBackend(Protocol):
    """What a record needs of the backend that ran it (a Backend, or the isolated case's
    stand-in the parent writes a record with)."""

    @property
    def name(self) -> str: ...

    @property
    def kind(self) -> str: ...


def case_record(case: Case, backend: RecordedBackend, facts: list[LaunchFacts] | None = None,
                *, status: str, error: str | None = None, rel_error: float | None = None,
                extra: dict[str, Any] | None = None, phases: dict[str, float] | None = None,
                device_phases: dict[str, float] | None = None) -> CaseResult:
    """The record of a case, with everything a report needs of its declaration: a report is
    a function of the record alone."""
    launches = case.launches()
    by_launch: list[LaunchFacts | None] = (list(facts) if facts and len(facts) == len(launches)
                                           else [None] * len(launches))
    w, v = case.workload, case.variant
    return CaseResult(
        Identity(workload=w.name, variant=v.name, backend=backend.name, dtype=case.dtype,
                 size=list(case.size), precision=case.precision_on(backend.kind),
                 cores=case.cores(backend.kind), occupancy_level=case.occupancy_level),
        Declaration(
            flops=case.flops, bytes=case.bytes(), ai=case.intensity(),
            tolerance=w.tolerance.get(case.dtype), marker=w.marker,
            flop_convention=w.flop_convention, arrow_from=v.arrow_from,
            limit_note=v.limits.get(backend.kind, ""),
            buffers={n: BufferFacts(b.role, b.nbytes) for n, b in case.buffers().items()}),
        Outcome(status=status, error=error, rel_error=rel_error),
        Measurement(
            launches=[LaunchResult(la.kernel, la.note, la.flops, case.launch_bytes(la),
                                   facts=f, reads=list(la.reads), writes=list(la.writes))
                      for la, f in zip(launches, by_launch, strict=True)],
            phases=phases if phases is not None else {},
            device_phases=device_phases if device_phases is not None else {}),
        evidence=Evidence(extra=extra if extra is not None else {}))
