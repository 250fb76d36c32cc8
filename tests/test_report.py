"""report.md pieces that the CPU end-to-end run does not reach: GPU occupancy, fusion rows."""

from __future__ import annotations

from roofbench.bench.present.fusion import fusion_bound, fusion_rows
from roofbench.bench.present.sections import occupancy_text

from roofbench.readers import read_case
from roofbench.records import BufferFacts, CaseResult, LaunchFacts, LaunchResult, Occupancy


def rec(variant: str, median: float | None, dram: int, valid: bool = True, **kw) -> CaseResult:
    return CaseResult(workload="l2norm", variant=variant, backend="cuda", dtype="fp32",
                      size=[1000], precision="fp32", cores="simt", flops=3000,
                      bytes={"dram": dram}, ai={"dram": 3000 / dram},
                      status="ok" if valid else "invalid", valid=valid, median_s=median, **kw)


OCC = Occupancy(threads_per_block=256, registers_per_thread=40, smem_per_block=0,
                blocks_per_sm=6, warps_per_sm=48, max_warps_per_sm=64, occupancy=0.75,
                limiter="registers")


def test_occupancy_is_shown_per_launch_with_its_registers():
    c = rec("fused", 1e-3, 12000, launches=[
        LaunchResult("fused", "", 3000, {"dram": 12000}, facts=LaunchFacts(
            function="l2norm_fused_fp32", registers=40, occupancy=OCC)),
        LaunchResult("lib", "", 0, {"dram": 0})])  # a library launch: no occupancy known
    assert occupancy_text(c) == "75% (40 regs)"
    assert occupancy_text(rec("fused", 1e-3, 12000)) == "-"


def test_launch_facts_of_an_older_file_move_from_extra_to_the_launch():
    """Files before results version 3 kept each launch's backend facts, occupancy included,
    in ``extra["launches"]``: they are read onto the typed LaunchResult.facts."""
    from roofbench.readers import fill_v2_case

    d = rec("fused", 1e-3, 12000, launches=[
        LaunchResult("fused", "", 3000, {"dram": 12000})]).to_dict()
    d["extra"] = {"arch": "sm_90", "launches": [
        {"kernel": "fused", "function": "gemv_warp_fp32", "registers": 40,
         "occupancy": OCC.to_dict()}]}
    c = read_case(d)
    fill_v2_case(c)
    assert c.launches[0].occupancy == OCC and occupancy_text(c) == "75% (40 regs)"
    facts = c.launches[0].facts
    assert (facts.function, facts.registers, facts.arch) == ("gemv_warp_fp32", 40, "sm_90")
    assert not facts.validated_on_hardware  # gemv_warp: in the frozen table of its time
    assert c.extra == {"arch": "sm_90"}
    assert "occupancy" in d["extra"]["launches"][0]  # the caller's dict is left as it was
    again = c.to_dict()
    assert again["launches"][0]["facts"]["occupancy"] == OCC.to_dict()
    assert read_case(again).to_dict() == again


def test_fusion_row_gives_speedup_and_bytes_ratio():
    rows = fusion_rows([rec("naive", 3e-3, 36000), rec("fused", 1e-3, 12000)])
    (r,) = rows
    assert (r.src, r.dst, r.size) == ("naive", "fused", "1000")
    assert r.speedup == 3.0 and r.bytes_ratio == 3.0 and r.valid
    assert (r.ai_src, r.ai_dst, r.time_src, r.time_dst) == (3000 / 36000, 0.25, 3e-3, 1e-3)


def test_fusion_table_text_is_read_from_the_typed_rows():
    """The report's table (and run's summary caption) read FusionRow fields, same text."""
    from roofbench.bench.cli.run import summary_table
    from roofbench.bench.present.fusion import fusion_table

    from roofbench.records import RunResult

    cases = [rec("naive", 3e-3, 36000), rec("fused", 1e-3, 12000)]
    assert fusion_table(cases) == [{
        "workload": "l2norm", "dtype": "fp32", "size": "1000", "from -> to": "naive -> fused",
        "AI": "0.0833 -> 0.25", "time": "3 ms -> 1 ms", "speedup": "3.00x",
        "bytes ratio": "3.00x"}]
    t = summary_table(RunResult(backend="cuda", device="d", roofs=None, cases=cases))
    assert t.caption == ("fusion l2norm fp32: naive -> fused, AI 0.0833 -> 0.25 FLOP/B, "
                         "3.00x faster (bytes ratio 3.00x)")


def test_fusion_row_with_an_invalid_side_has_no_speedup():
    rows = fusion_rows([rec("naive", None, 36000, valid=False), rec("fused", 1e-3, 12000)])
    assert rows[0].speedup is None and not rows[0].valid
    from roofbench.bench.present.fusion import fusion_table

    assert fusion_table([rec("naive", None, 36000, valid=False),
                         rec("fused", 1e-3, 12000)])[0]["speedup"] == "- (not valid)"


def test_fusion_bound_is_pipeline_bytes_over_input_output_bytes():
    bufs = {"a": BufferFacts("input", 4000), "b": BufferFacts("input", 4000),
            "out": BufferFacts("output", 4000), "t": BufferFacts("temp", 4000)}
    assert fusion_bound(rec("naive", 3e-3, 36000, buffers=bufs)) == 3.0
    assert fusion_bound(rec("naive", 3e-3, 36000)) is None  # no buffers known: no bound
