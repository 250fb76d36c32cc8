"""Fusion results: each fused variant paired with the naive one it is fused from
(CaseResult.arrow_from, stored at run time from Variant.arrow_from), for the report's fusion
table, the plot's arrows and the run's summary."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass

from roofbench.records import CaseResult
from roofbench.units import duration


def fused_from(cases: Iterable[CaseResult]) -> Iterator[tuple[CaseResult, str]]:
    """(case, the variant it is fused from) for each case that declares one."""
    for c in cases:
        if c.declaration.arrow_from:
            yield c, c.declaration.arrow_from


@dataclass(frozen=True)
class FusionRow:
    """A (naive -> fused) pair of one workload, dtype and size: what fusing bought."""

    workload: str
    dtype: str
    size: str  # "4096x1024"
    src: str  # the variant fused from (Variant.arrow_from)
    dst: str  # the fused variant
    ai_src: float | None  # DRAM intensity, FLOP/B
    ai_dst: float | None
    time_src: float | None  # median seconds
    time_dst: float | None
    speedup: float | None  # time_src / time_dst, None unless both are valid
    bytes_ratio: float  # DRAM bytes of src over dst: the most a memory-bound device can gain
    valid: bool


def fusion_rows(cases: list[CaseResult]) -> list[FusionRow]:
    """Every (naive -> fused) pair the workloads declare via Variant.arrow_from."""
    idx = {(i.backend, i.workload, i.variant, i.dtype, tuple(i.size)): c
           for c in cases if (i := c.identity)}
    rows = []
    for c, arrow_from in fused_from(cases):
        i = c.identity
        src = idx.get((i.backend, i.workload, arrow_from, i.dtype, tuple(i.size)))
        if src is None or "unsupported" in (src.outcome.status, c.outcome.status):
            continue  # a variant this backend cannot run is no fusion result
        ts, td = src.measurement.median_s, c.measurement.median_s
        speedup = ts / td if src.valid and c.valid and ts and td else None
        ds, dd = src.declaration, c.declaration
        rows.append(FusionRow(
            workload=i.workload, dtype=i.dtype, size="x".join(map(str, i.size)),
            src=src.identity.variant, dst=i.variant, ai_src=ds.ai.get("dram"),
            ai_dst=dd.ai.get("dram"), time_src=ts, time_dst=td,
            speedup=speedup, bytes_ratio=ds.bytes["dram"] / dd.bytes["dram"],
            valid=speedup is not None))
    return rows


def fusion_bound(c: CaseResult) -> float | None:
    """The end-to-end speedup fusion can at most give a memory-bound pipeline: its bytes over
    the bytes of its inputs and outputs alone (what one fused launch must still move)."""
    io = c.io_bytes()
    return c.declaration.bytes["dram"] / io if io else None


def fusion_table(cases: list[CaseResult]) -> list[dict[str, str]]:
    """The fusion rows as displayed (report.md and report.html)."""
    return [{
        "workload": r.workload, "dtype": r.dtype, "size": r.size,
        "from -> to": f"{r.src} -> {r.dst}",
        "AI": f"{r.ai_src:.3g} -> {r.ai_dst:.3g}",
        "time": f"{duration(r.time_src)} -> {duration(r.time_dst)}",
        "speedup": f"{r.speedup:.2f}x" if r.speedup else "- (not valid)",
        "bytes ratio": f"{r.bytes_ratio:.2f}x",
    } for r in fusion_rows(cases)]
