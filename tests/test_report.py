"""report.md pieces that the CPU end-to-end run does not reach: GPU occupancy, fusion rows."""

from __future__ import annotations

from roofbench.bench.measure.runner import CaseResult
from roofbench.bench.present.report import fusion_bound, fusion_rows, occupancy_text


def rec(variant: str, median: float | None, dram: int, valid: bool = True, **kw) -> CaseResult:
    return CaseResult(workload="l2norm", variant=variant, backend="cuda", dtype="fp32",
                      size=[1000], precision="fp32", unit="simt", flops=3000,
                      bytes={"dram": dram}, ai={"dram": 3000 / dram},
                      status="ok" if valid else "invalid", valid=valid, median_s=median, **kw)


def test_occupancy_is_shown_per_launch_with_its_registers():
    c = rec("fused", 1e-3, 12000, extra={"launches": [
        {"kernel": "fused", "registers": 40, "occupancy": {"occupancy": 0.75}}]})
    assert occupancy_text(c) == "75% (40 regs)"
    assert occupancy_text(rec("fused", 1e-3, 12000)) == "-"


def test_fusion_row_gives_speedup_and_bytes_ratio():
    rows = fusion_rows([rec("naive", 3e-3, 36000), rec("fused", 1e-3, 12000)])
    (r,) = rows
    assert (r["from"], r["to"]) == ("naive", "fused")
    assert r["speedup"] == 3.0 and r["bytes ratio"] == 3.0 and r["valid"]


def test_fusion_row_with_an_invalid_side_has_no_speedup():
    rows = fusion_rows([rec("naive", None, 36000, valid=False), rec("fused", 1e-3, 12000)])
    assert rows[0]["speedup"] is None and not rows[0]["valid"]


def test_fusion_bound_is_pipeline_bytes_over_input_output_bytes():
    assert fusion_bound(rec("naive", 3e-3, 36000)) == 3.0
