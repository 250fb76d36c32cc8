"""What the profile modules share, below all of them: the dtype names (``DTYPES``), the
compute roof an op meets (``precision_of``), one op placed (``OpPlace``), one op's record
(``op_case``, profile's and trace's), the whole program as one case (``program_case``), the
profile's timer (``profile_timer``) and where its roofs came from (``roofs_from``), and the
ridge an op is judged memory-bound against (``ridge_of``).
``torch_program`` (the entry), ``jax_program``, ``fusion``, ``compiled`` and
``report`` (the ``Profile`` and its report) import it; it imports none of them.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from roofbench.bench.measure.callables import Clock
from roofbench.bench.measure.pairs import mixed_shares
from roofbench.bench.present.amdahl import Share
from roofbench.bench.profile.recording import Distinct, Recording

from roofbench.records import CaseResult, Declaration, Evidence, Identity, Outcome
from roofbench.roof_records import RoofSet
from roofbench.roofline import roof_precision
from roofbench.timing import TimerConfig

DTYPES = {"float64": "fp64", "float32": "fp32", "float16": "fp16", "bfloat16": "bf16"}


def precision_of(dtype: str, fam: str, gpu: bool) -> str:
    """The compute roof an op meets: its dtype's, low precision computing in fp32 (as a
    run's cases), on a GPU a bf16/fp16 matmul on the tensor cores."""
    p = DTYPES.get(dtype, "fp32")
    if p in ("fp16", "bf16"):
        return f"{p}_tc" if gpu and fam == "matmul/conv/attention" else "fp32"
    return p


def compute_dtype(ops: list[Distinct]) -> str:
    """The dtype ops compute in: the floating dtype carrying most of their FLOPs (else most
    of their bytes), never the int64 of token ids or positions."""
    weight: dict[str, int] = {}
    for d in ops:
        if d.dtype in DTYPES:
            weight[d.dtype] = weight.get(d.dtype, 0) + (d.flops * 10**6 + d.bytes) * d.calls
    if weight:
        return max(weight, key=lambda k: weight[k])
    return ops[0].dtype if ops else "float32"


@dataclass
class OpPlace:
    """One distinct op placed: its record (one call), how often it ran, its Amdahl share."""

    op: Distinct
    case: CaseResult
    share: Share | None = None

    @property
    def total_s(self) -> float:
        return (self.case.measurement.median_s or 0.0) * self.op.calls

    @property
    def bandwidth_efficiency(self) -> float | None:
        """A 0-FLOP op's attained bytes/s over its memory roof (its efficiency)."""
        return self.case.roofline.efficiency if self.case.declaration.flops == 0 else None


def profile_timer(clock: Clock, timer: TimerConfig | None) -> TimerConfig:
    """The timer a profile times each op and the program with: ``timer`` if given, else the
    quick one (``timing.timer_for``)."""
    from roofbench.timing import timer_for

    return timer_for(clock.kind, timer, quick=True)


def op_case(op: Distinct, gpu: bool, backend: str, variant: str, measured_by: str,
            timed: dict[str, str]) -> CaseResult:
    """The record of one distinct op (one call), before its time is placed: ``profile``'s
    (``variant`` op<index>, replayed) and ``trace``'s (``variant`` from its inputs, timed
    in the trace); ``timed`` says how its samples were taken."""
    prec = precision_of(op.dtype, op.family, gpu)
    by = {"dram": op.bytes} if op.bytes else {}
    return CaseResult(
        Identity(workload=op.name, variant=variant, backend=backend,
                 dtype=DTYPES.get(op.dtype, op.dtype), size=[op.calls], precision=prec,
                 cores="tensor" if prec.endswith("_tc") else "simt"),
        Declaration(flops=op.flops, bytes=by, ai={"dram": op.flops / op.bytes} if op.bytes else {},
                    flop_convention=op.flops_by),
        Outcome(status="ok", checked=False),
        evidence=Evidence(extra={"measured_by": measured_by, "family": op.family,
                                 "calls": op.calls, "signature": op.signature,
                                 "outputs": op.outputs, "device": op.device,
                                 "read_bytes": op.reads, "written_bytes": op.writes, **timed}))


def program_case(recording: Recording, clock: Clock, gpu: bool, variant: str,
                 bytes_total: int | None = None) -> CaseResult:
    """The whole program as one case: every call's FLOPs, and its bytes (each op's own, the
    eager program's traffic) unless ``bytes_total`` says otherwise (a fused program)."""
    calls = recording.distinct
    flops = sum(d.flops * d.calls for d in calls)
    nbytes = bytes_total if bytes_total is not None else sum(d.bytes * d.calls for d in calls)
    by_prec: dict[str, int] = {}
    for d in calls:
        p = precision_of(d.dtype, d.family, gpu)
        by_prec[p] = by_prec.get(p, 0) + d.flops * d.calls
    prec = max(by_prec, key=lambda k: by_prec[k]) if by_prec else "fp32"
    dt = compute_dtype(calls)
    return CaseResult(
        Identity(workload="program", variant=variant, backend=clock.backend_name,
                 dtype=DTYPES.get(dt, dt), size=[len(recording.calls)], precision=prec,
                 cores="tensor" if prec.endswith("_tc") else "simt"),
        Declaration(flops=flops, bytes={"dram": nbytes} if nbytes else {},
                    ai={"dram": flops / nbytes} if nbytes else {}, marker="*",
                    arrow_from="eager" if variant != "eager" else None),
        Outcome(status="ok", checked=False),
        evidence=Evidence(extra={"measured_by": "roofbench.profile",
                                 "calls": len(recording.calls), "distinct_ops": len(calls)}))


def program_shares(recording: Recording) -> dict[int, float]:
    """The program's bytes by the streams of the ops that move them (``pairs.mixed_shares``
    of each op's arrays, weighted by its bytes over all its calls): the DRAM probe its eager
    runs are paired with."""
    return mixed_shares([(d.arrays, d.bytes * d.calls) for d in recording.distinct])


def roofs_from(roofs: RoofSet | str | Path | None) -> str:
    """Where the roofs came from, said in the report."""
    if roofs is None:
        return "this device's calibration cache (roofs/<device>.json)"
    return "a RoofSet given" if isinstance(roofs, RoofSet) else f"`{roofs}`"


def ridge_of(rs: RoofSet | None, precision: str) -> float | None:
    if rs is None:
        return None
    c, m = rs.compute(roof_precision(precision, rs)), rs.memory("dram")
    return c.value / m.value if c and m else None
