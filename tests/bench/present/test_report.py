"""report.md pieces that the CPU end-to-end run does not reach: GPU occupancy, fusion rows."""

from __future__ import annotations

from pathlib import Path

import pytest
from roofbench.bench.cli import main
from roofbench.bench.present import report as report_mod
from roofbench.bench.present.fusion import fusion_bound, fusion_rows
from roofbench.bench.present.sections import occupancy_text
from roofbench.bench.results import load_run
from testpaths import H200_RUNS

from roofbench.readers import read_case
from roofbench.records import (
    BufferFacts,
    CaseResult,
    Declaration,
    Identity,
    LaunchFacts,
    LaunchResult,
    Measurement,
    Occupancy,
    Outcome,
    RunResult,
)


def rec(variant: str, median: float | None, dram: int, valid: bool = True, **kw) -> CaseResult:
    kw.setdefault("arrow_from", "naive" if variant == "fused" else None)  # as stored at run time
    c = CaseResult(Identity(workload="l2norm", variant=variant, backend="cuda", dtype="fp32",
                            size=[1000], precision="fp32", cores="simt"),
                   Declaration(flops=3000, bytes={"dram": dram}, ai={"dram": 3000 / dram}),
                   Outcome(status="ok" if valid else "invalid"), Measurement(median_s=median))
    for k, v in kw.items():  # each further field into its group
        group = next(g for g in (c.identity, c.declaration, c.outcome, c.measurement,
                                 c.roofline, c.evidence) if k in type(g).__dataclass_fields__)
        setattr(group, k, v)
    return c


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
    d["evidence"]["extra"] = {"arch": "sm_90", "launches": [
        {"kernel": "fused", "function": "gemv_warp_fp32", "registers": 40,
         "occupancy": OCC.to_dict()}]}
    c = read_case(d)
    fill_v2_case(c)
    assert c.measurement.launches[0].occupancy == OCC and occupancy_text(c) == "75% (40 regs)"
    facts = c.measurement.launches[0].facts
    assert (facts.function, facts.registers, facts.arch) == ("gemv_warp_fp32", 40, "sm_90")
    assert not facts.validated_on_hardware  # gemv_warp: in the frozen table of its time
    assert c.evidence.extra == {"arch": "sm_90"}
    assert "occupancy" in d["evidence"]["extra"]["launches"][0]  # the caller's dict as it was
    again = c.to_dict()
    assert again["measurement"]["launches"][0]["facts"]["occupancy"] == OCC.to_dict()
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


@pytest.mark.parametrize("path", H200_RUNS.values(), ids=lambda p: p.parent.name)
def test_report_and_plot_succeed_on_every_real_file(path: Path, tmp_path: Path, capsys):
    assert main(["report", str(path), "--out", str(tmp_path / "report.md")]) == 0
    text = (tmp_path / "report.md").read_text()
    for section in ("## Roofs", "## Cases", "## Environment"):
        assert section in text
    assert "could not be rendered" not in text
    assert "Datasheet: `h200-sxm`" in text  # the GPU path's datasheet line is no longer lost
    assert "Probes that failed: mma_fp8_tc" in text
    assert main(["plot", str(path), "--out", str(tmp_path / "roofline")]) == 0
    assert (tmp_path / "roofline.png").stat().st_size > 0


def test_a_section_that_fails_is_named_and_the_others_are_written(monkeypatch):
    def broken(run):
        raise KeyError("planted")

    sections = [(t, broken if t == "Fusion" else f) for t, f in report_mod.SECTIONS]
    monkeypatch.setattr(report_mod, "SECTIONS", sections)
    text = report_mod.render(load_run(H200_RUNS["rownorm-default"]))
    assert "## Fusion\n\n_This section could not be rendered: KeyError: 'planted'_" in text
    assert "## Cases" in text and "## Environment" in text and "## Roofs" in text


def test_a_point_above_its_roof_is_flagged_with_its_likely_cause():
    run = load_run(H200_RUNS["rownorm-default"])
    fused = next(c for c in run.cases if c.identity.variant == "fused")
    assert fused.roofline.efficiency > 1  # the re-read of x hits the 60 MiB L2 on the H200
    text = report_mod.render(run)
    line = next(x for x in text.splitlines() if x.startswith(f"- {fused.key}"))
    assert "likely cause" in line and "cache" in line


def test_kernels_not_yet_validated_on_hardware_are_marked_in_the_report():
    from roofbench.kernels.cuda_impl import NOT_VALIDATED_ON_HARDWARE

    assert "gemm_wgmma" in NOT_VALIDATED_ON_HARDWARE
    run = load_run(H200_RUNS["gemm-4096"])  # mma.sync at ea800a6: validated
    assert "not yet validated" not in report_mod.render(run)
    tensor = next(c for c in run.cases if c.identity.variant == "tensor")
    facts = tensor.measurement.launches[0].facts
    facts.function, facts.validated_on_hardware = "gemm_wgmma_fp16", False  # as on sm_90
    text = report_mod.render(run)
    assert ("gemm/tensor/fp16/4096x4096x4096 (gemm_wgmma_fp16 on sm_90): not yet validated on "
            "hardware before this run; here it is `ok`") in text


def test_hand_written_variants_are_given_as_a_fraction_of_the_library():
    text = report_mod.render(load_run(H200_RUNS["gemm-4096"]))
    line = next(x for x in text.splitlines() if x.startswith("Hand-written vs library"))
    # regblock fp32 39.4 vs cuBLAS 49.1 TFLOP/s, mma.sync fp16 142.8 vs HGEMM 500.7 (README)
    assert "regblock fp32 4096x4096x4096 0.80" in line
    assert "tensor fp16 4096x4096x4096 0.29" in line


def test_a_known_limit_is_printed_only_for_a_case_below_the_line():
    """A variant's declared reason to stay below its roof (stored on the case at run time)
    shows under the cases table when the case is under 75% of its roof, not above it."""
    low = rec("onepass", 1e-3, 12000, efficiency=0.52, limiting_roof="dram",
              limit_note="the two phases do not overlap")
    high = rec("fused", 1e-3, 12000, efficiency=0.80, limiting_roof="dram",
               limit_note="the two phases do not overlap")
    plain = rec("naive", 1e-3, 36000, efficiency=0.40, limiting_roof="dram")
    md = report_mod.render(RunResult(backend="cuda", device="d", roofs=None,
                                     cases=[low, high, plain]))
    assert "Below 75% of their roof, for a known reason:" in md
    lines = [ln for ln in md.splitlines() if "the two phases do not overlap" in ln]
    assert lines == [f"- {low.key}: 52% of dram; the two phases do not overlap"]
    assert read_case(low.to_dict()).declaration.limit_note == "the two phases do not overlap"


def test_rownorm_row_kernels_carry_their_cpu_limit_into_the_record():
    from roofbench.bench.backends.cpu import CpuBackend
    from roofbench.bench.suite.case_record import case_record
    from roofbench.kernels import registry
    from roofbench.kernels.spec import Case

    w = registry.workloads()["rownorm"]
    be = CpuBackend()
    for v in ("onepass", "fused"):  # the same loop on a CPU
        one = case_record(Case(w, w.variants[v], "fp32", (4, 64)), be, status="ok")
        note = one.declaration.limit_note
        assert "do not overlap" in note and "docs/cpu-roofs.md" in note
    naive = case_record(Case(w, w.variants["naive"], "fp32", (4, 64)), be, status="ok")
    assert naive.declaration.limit_note == ""
