"""Roof math: attainable, ridge, bound, source preference, JSON round trip."""

from __future__ import annotations

import json

import pytest
from roofbench.kernels.registry import workloads
from roofbench.kernels.spec import Case

from roofbench.readers import read_roofset
from roofbench.records import CaseResult, Declaration, Identity, Measurement, Outcome, RooflinePlace
from roofbench.roof_records import Roof, RoofSet
from roofbench.roofline import apply_roofs, device_slug, roof_precision


def roofset() -> RoofSet:
    return RoofSet("gpu", [
        Roof("hbm", "memory", 4e12, "measured", level="dram"),
        Roof("hbm ds", "memory", 4.8e12, "datasheet", level="dram"),
        Roof("l2", "memory", 1.2e13, "measured", level="l2"),
        Roof("fp32", "compute", 6e13, "measured", precision="fp32"),
        Roof("fp32 ds", "compute", 6.69e13, "datasheet", precision="fp32"),
        Roof("nvlink", "interconnect", 6e11, "user", level="link"),
    ])


def test_attainable_is_min_of_compute_and_bandwidth_times_ai():
    rs = roofset()
    assert rs.attainable(1 / 12, "fp32") == pytest.approx(4e12 / 12)
    assert rs.attainable(1000, "fp32") == pytest.approx(6e13)
    assert rs.attainable(1000, "fp32", source="datasheet") == pytest.approx(6.69e13)


def test_ridge_point():
    rs = roofset()
    assert rs.ridge("fp32") == pytest.approx(15.0)
    assert rs.ridge("fp32", source="datasheet") == pytest.approx(6.69e13 / 4.8e12)
    with pytest.raises(KeyError):
        rs.ridge("fp8")


def test_bound_names_the_limiting_roof_per_level_and_link():
    rs = roofset()
    b = rs.bound({"dram": 0.25}, "fp32")
    assert (b.limiter, b.roof) == ("memory", "hbm")
    b = rs.bound({"dram": 100.0, "l2": 1.0}, "fp32")
    assert (b.limiter, b.roof) == ("memory", "l2")
    assert b.attainable == pytest.approx(1.2e13)
    b = rs.bound({"dram": 100.0}, "fp32")
    assert b.limiter == "compute"
    b = rs.bound({"dram": 100.0}, "fp32", link_intensities={"link": 10.0})
    assert (b.limiter, b.attainable) == ("interconnect", pytest.approx(6e12))


def test_measured_beats_datasheet_and_highest_wins_within_a_source():
    rs = roofset()
    rs.add(Roof("hbm copy", "memory", 3.9e12, "measured", level="dram"))
    assert rs.memory("dram").name == "hbm"
    assert rs.memory("dram", "datasheet").name == "hbm ds"


def test_invalid_roofs_are_refused():
    with pytest.raises(ValueError):
        Roof("x", "memory", -1, "measured", level="dram")
    with pytest.raises(ValueError):
        Roof("x", "compute", 1e12, "measured")
    with pytest.raises(ValueError):
        Roof("x", "memory", float("nan"), "measured", level="dram")


def test_json_round_trip():
    rs = roofset()
    rs.roofs[0].evidence = {"probe": "triad", "samples": [1e-3, 1.1e-3]}
    back = read_roofset(json.loads(json.dumps(rs.to_dict())))
    assert back.to_dict() == rs.to_dict()
    assert back.roofs[0].evidence["samples"] == [1e-3, 1.1e-3]


def test_device_slug():
    assert device_slug("NVIDIA H200") == "nvidia-h200"
    assert device_slug("AMD EPYC 9654 96-Core Processor") == "amd-epyc-9654-96-core-processor"
    assert device_slug("???") == "unknown-device"


def _gemm_case(variant: str, dtype: str) -> Case:
    w = workloads()["gemm"]
    return Case(w, w.variants[variant], dtype, (64, 64, 64))


@pytest.mark.parametrize("dtype,gpu,cpu", [("fp16", "fp16_tc", "fp32"),
                                           ("bf16", "bf16_tc", "fp32"),
                                           ("fp64", "fp64_tc", "fp64"),
                                           ("fp32", "fp32", "fp32")])
def test_library_gemm_meets_the_roof_of_the_unit_that_runs_it(dtype, gpu, cpu):
    case = _gemm_case("library", dtype)
    assert case.precision_on("gpu") == gpu
    if dtype != "bf16":  # numpy has no bf16 BLAS
        assert case.precision_on("cpu") == cpu
    assert _gemm_case("regblock", dtype).precision_on("gpu") in ("fp32", "fp64")
    assert _gemm_case("tensor", "fp16").precision_on("gpu") == "fp16_tc"


def test_a_device_without_the_tensor_roof_falls_back_to_its_cuda_core_roof():
    rs = RoofSet("sm_89", [Roof("fp64", "compute", 1e12, "measured", precision="fp64"),
                           Roof("hbm", "memory", 1e12, "measured", level="dram")])
    assert roof_precision("fp64_tc", rs) == "fp64"
    assert roof_precision("fp16_tc", rs) == "fp16_tc"  # no fp16 roof either: stays, unbounded
    rec = CaseResult(
        Identity(workload="gemm", variant="library", backend="cuda", dtype="fp64", size=[1024] * 3,
                 precision="fp64_tc", cores="tensor"),
        Declaration(flops=2 * 1024**3, bytes={"dram": 3 * 8 * 1024**2},
                    ai={"dram": 2 * 1024**3 / (3 * 8 * 1024**2)}),
        Outcome(status="ok"),
        measurement=Measurement(median_s=0.01),
        roofline=RooflinePlace(flop_per_s=2 * 1024**3 / 0.01))
    apply_roofs(rec, rs)
    assert rec.roofline.limiting_roof == "fp64" and rec.roofline.efficiency == pytest.approx(
        0.2147, rel=1e-3
    )
