"""roofbench.profile on small programs: distinct ops timed once and counted, the program
timed whole and the overhead stated, 0-FLOP ops placed by bandwidth, decode's linear
layers memory-bound and prefill's compute-bound, the files written
(bench/profile/torch_program.py, bench/profile/report.py)."""

from __future__ import annotations

import json

import pytest

torch = pytest.importorskip("torch")

from flat_cases import flat_cases  # noqa: E402
from tiny_zoo import zoo  # noqa: E402

import roofbench  # noqa: E402
from roofbench.roof_records import Roof, RoofSet  # noqa: E402
from roofbench.timing import TimerConfig  # noqa: E402

# Ridge 10 FLOP/B in fp32: 200 GFLOP/s over 20 GB/s.
ROOFS = RoofSet(device="test roofs", roofs=[
    Roof("dram stream", "memory", 20e9, "measured", level="dram"),
    Roof("fp32 fma", "compute", 200e9, "measured", precision="fp32"),
    Roof("fp64 fma", "compute", 100e9, "measured", precision="fp64")])
FAST = TimerConfig(warmup_s=0.0, warmup_min_runs=1, min_samples=2, max_samples=3,
                   budget_s=0.0)


def run(fn, *args, **kw):
    with torch.no_grad():
        return roofbench.profile(fn, *args, roofs=ROOFS, timer=FAST, **kw)


def test_identical_ops_are_timed_once_and_counted():
    a, b = torch.randn(256), torch.randn(256)
    prof = run(lambda x, y: torch.sqrt(x * x + y * y), a, b)
    assert [(p.op.packet, p.op.calls) for p in prof.ops] == [("mul", 2), ("add", 1),
                                                            ("sqrt", 1)]
    mul = prof.ops[0]
    assert mul.case.measurement.timing is not None and mul.total_s == pytest.approx(
        2 * mul.case.measurement.median_s)
    assert prof.program.declaration.flops == 3 * 256 and prof.program.declaration.bytes == {
        "dram": 36 * 256
    }
    assert prof.program.declaration.ai["dram"] == pytest.approx(1 / 12)
    # the ops' time in one run: the median run's calls summed (in-program timing)
    runs = prof.extra["ops_run_s"]
    assert len(runs) == prof.extra["in_program_runs"] == 2
    assert prof.ops_s == pytest.approx(sum(runs) / 2)
    assert prof.overhead_s == pytest.approx(prof.program_s - prof.ops_s)
    assert prof.program.roofline.bound == "memory" and prof.program.roofline.efficiency is not None
    assert [p.share for p in prof.ops if p.share]  # every op ranked


def test_zero_flop_ops_are_placed_by_bandwidth_and_views_not_at_all():
    x = torch.randn(64, 32)
    prof = run(lambda t: t.t().contiguous(), x)
    by = {p.op.family: p for p in prof.ops}
    copy = by["copies/layout"].case
    assert (
        copy.declaration.flops == 0
        and copy.roofline.bound == "memory"
        and copy.roofline.limiting_roof == "dram stream"
    )
    assert copy.roofline.efficiency == pytest.approx(
        copy.declaration.bytes["dram"] / copy.measurement.median_s / 20e9
    )
    assert (
        copy.roofline.attainable is None
        and by["copies/layout"].bandwidth_efficiency == copy.roofline.efficiency
    )
    view = by["views"].case
    assert view.roofline.bound is None and view.declaration.bytes == {}


def test_decode_linear_layers_are_memory_bound_prefill_compute_bound(monkeypatch):
    def linear_bounds(entry):
        layer, args = zoo(monkeypatch, entry)
        prof = run(layer, *args)
        mms = [p for p in prof.ops if p.op.packet in ("mm", "addmm", "bmm")]
        assert mms
        return {p.case.roofline.bound for p in mms}, prof

    decode, dprof = linear_bounds("decode")
    prefill, pprof = linear_bounds("prefill")
    assert decode == {"memory"}
    assert prefill == {"compute"}
    fams = {f["family"] for f in pprof.families()}
    assert {"matmul/conv/attention", "normalisation", "element-wise"} <= fams or \
        {"matmul/conv/attention", "element-wise", "reductions"} <= fams


def test_the_profile_is_written_as_a_run_a_report_and_a_plot(tmp_path):
    x = torch.randn(8, 16)
    prof = run(lambda t: torch.softmax(t @ t.T, -1), x, name="attn-ish")
    paths = prof.write(tmp_path)
    names = sorted(p.name for p in paths)
    assert names == ["profile.json", "profile.md", "report.html", "results.json",
                     "roofline.png", "roofline.svg"]
    data = json.loads((tmp_path / "results.json").read_text())
    keys = [c["workload"] for c in flat_cases(data)]
    assert keys[-1] == "program" and "aten.mm.default" in keys
    md = (tmp_path / "profile.md").read_text()
    for heading in ("## Program: attn-ish", "## By op family", "## Ops (Amdahl ranking)",
                    "## Fusion opportunities", "## Counting conventions"):
        assert heading in md
    from roofbench.bench.results import load_run

    run_back = load_run(tmp_path)  # the project's reader takes it as any run
    assert len(run_back.cases) == len(prof.ops) + 1


def test_roofbench_profile_is_handed_out_lazily():
    from roofbench.bench.profile import torch_program as module

    assert roofbench.profile is module.profile
