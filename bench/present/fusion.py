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
    idx = {
        (
            c.identity.backend,
            c.identity.workload,
            c.identity.variant,
            c.identity.dtype,
            tuple(c.identity.size),
        ): c
        for c in cases
    }
    rows = []
    for c, arrow_from in fused_from(cases):
        src = idx.get(
            (
                c.identity.backend,
                c.identity.workload,
                arrow_from,
                c.identity.dtype,
                tuple(c.identity.size),
            )
        )
        if src is None or "unsupported" in (src.outcome.status, c.outcome.status):
            continue  # a variant this backend cannot run is no fusion result
        speedup = (
            src.measurement.median_s / c.measurement.median_s
            if src.valid and c.valid and src.measurement.median_s and c.measurement.median_s
            else None
        )
        rows.append(
            FusionRow(
                workload=c.identity.workload,
                dtype=c.identity.dtype,
                size="x".join(map(str, c.identity.size)),
                src=src.identity.variant,
                dst=c.identity.variant,
                ai_src=src.declaration.ai.get("dram"),
                ai_dst=c.declaration.ai.get("dram"),
                time_src=src.measurement.median_s,
                time_dst=c.measurement.median_s,
                speedup=speedup,
                bytes_ratio=src.declaration.bytes["dram"] / c.declaration.bytes["dram"],
                valid=speedup is not None,
            )
        )
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
