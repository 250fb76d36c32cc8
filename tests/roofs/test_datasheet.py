"""Datasheet lookup and theoretical peaks: SXM and PCIe kept apart, unknown parts refused."""

from __future__ import annotations

import json
import re

import pytest
from roofbench.roofs import datasheet as ds

from roofbench.roof_records import RoofSet


@pytest.mark.parametrize("name,sms,mem,key", [
    ("NVIDIA H100 80GB HBM3", 132, 85_520_809_984, "h100-sxm"),
    ("NVIDIA H100 80GB HBM3", None, None, "h100-sxm"),
    ("NVIDIA H100 PCIe", None, None, "h100-pcie"),
    ("NVIDIA H100 PCIe", 114, None, "h100-pcie"),
    ("NVIDIA H100", 114, None, "h100-pcie"),
    ("NVIDIA H100", 132, None, "h100-sxm"),
    ("NVIDIA H200", 132, 150_754_820_096, "h200-sxm"),
    ("NVIDIA A100-SXM4-80GB", 108, None, "a100-sxm-80gb"),
    ("NVIDIA B200", 148, None, "b200"),
    ("NVIDIA L4", 58, None, "l4"),
    ("NVIDIA L40S", 142, None, "l40s"),
    ("NVIDIA GeForce RTX 4090", 128, None, "rtx-4090"),
    ("AMD Instinct MI300X", None, None, "mi300x"),
])
def test_match(name, sms, mem, key):
    m = ds.match(name, sms, mem)
    assert m.spec is not None, m.reason
    assert m.spec.key == key


@pytest.mark.parametrize("name,sms,mem", [
    ("NVIDIA H100 NVL", 132, None),  # NVL figures differ from SXM and PCIe
    ("NVIDIA H100 PCIe", 132, None),  # PCIe form factor with 132 SMs is not in the table
    ("NVIDIA H100", None, None),  # ambiguous without the SM count
    ("NVIDIA H200 NVL", 132, None),
    ("NVIDIA GH200 480GB", 132, None),  # a token, not a substring: GH200 is not H200
    ("NVIDIA A100-SXM4-40GB", 108, 42_505_273_344),
    ("NVIDIA A100 80GB PCIe", 108, None),
    ("NVIDIA L40", 142, None),  # L40 is not L40S, nor L4
    ("Tesla V100-SXM2-16GB", 80, None),
    ("", None, None),
])
def test_no_match(name, sms, mem):
    m = ds.match(name, sms, mem)
    assert m.spec is None
    assert m.reason


def test_unknown_lists_known():
    m = ds.match("Tesla V100-SXM2-16GB")
    assert "H100 SXM" in m.reason and "MI300X" in m.reason


def test_figures_as_in_roofline_md():
    h = ds.SPECS["h100-sxm"]
    assert (h.hbm_tbs, h.fp64, h.fp64_tc, h.fp32, h.bf16_tc, h.fp8_tc) == \
        (3.35, 33.5, 66.9, 66.9, 989, 1979)
    p = ds.SPECS["h100-pcie"]
    assert (p.hbm_tbs, p.fp32, p.bf16_tc, p.fp8_tc, p.sms) == (2.0, 51, 756, 1513, 114)
    assert ds.SPECS["h200-sxm"].hbm_tbs == 4.8
    assert ds.SPECS["a100-sxm-80gb"].fp8_tc is None  # "-" in the table: never invented
    assert ds.SPECS["l4"].fp64 is None


def test_roofs_are_datasheet_and_dense():
    roofs = ds.SPECS["h200-sxm"].roofs()
    assert all(r.source == "datasheet" for r in roofs)
    rs = RoofSet("NVIDIA H200", roofs)
    assert rs.memory("dram").value == pytest.approx(4.8e12)
    assert rs.compute("bf16_tc").value == pytest.approx(989e12)
    assert rs.compute("fp8_tc").value == pytest.approx(1979e12)
    assert rs.compute("fp64_tc").value == pytest.approx(66.9e12)
    assert rs.ridge("fp32") == pytest.approx(66.9 / 4.8)
    assert rs.compute("fp16") is None  # CUDA-core FP16 is not a column of the table


def test_find_spec():
    assert ds.find_spec("h100-pcie").key == "h100-pcie"
    assert ds.find_spec("H100 PCIe").key == "h100-pcie"
    assert ds.find_spec("h100 sxm").key == "h100-sxm"
    assert ds.find_spec("4090").key == "rtx-4090"
    assert ds.find_spec("NVIDIA H200").key == "h200-sxm"
    assert ds.find_spec("l4").key == "l4"
    assert ds.find_spec("v100") is None


def test_theoretical_matches_roofline_md_formulas():
    # H100 SXM FP32 = 132 x 128 x 2 x 1.98 GHz = 66.9 TFLOP/s (the H100 datasheet's 67).
    assert ds.fma_peak("fp32", 132, "9.0", 1980) == pytest.approx(66.9e12, rel=1e-3)
    assert ds.fma_peak("fp64", 132, "9.0", 1980) == pytest.approx(33.45e12, rel=1e-3)
    assert ds.fma_peak("fp32", 108, "8.0", 1410) == pytest.approx(19.5e12, rel=2e-3)
    assert ds.fma_peak("fp64", 108, "8.0", 1410) == pytest.approx(9.7e12, rel=5e-3)
    assert ds.fma_peak("fp32", 128, "8.9", 2520) == pytest.approx(82.6e12, rel=1e-3)
    assert ds.fma_peak("fp32", 10, "1.0", 1000) is None
    # HBM = memory clock x bus width (bytes) x 2.
    assert ds.hbm_peak(2619, 5120) == pytest.approx(3.35e12, rel=1e-3)
    roofs = ds.theoretical_roofs({"max_mem_clock_mhz": 2619, "bus_width_bits": 5120,
                                  "sm_count": 132, "compute_capability": "9.0",
                                  "max_sm_clock_mhz": 1980})
    rs = RoofSet("x", roofs)
    assert rs.sources() == ["theoretical"]
    assert rs.memory().value == pytest.approx(3.352e12, rel=1e-3)
    assert {r.precision for r in roofs if r.kind == "compute"} == {"fp64", "fp32", "fp16", "bf16"}
    assert ds.theoretical_roofs({}) == []


# ---- where each figure comes from -----------------------------------------------------------


def test_every_entry_cites_a_public_document_with_its_year():
    for s in ds.SPECS.values():
        assert re.search(r"(Datasheet|datasheet|whitepaper) \((19|20)\d\d", s.source), s.key
        assert ".md" not in s.source, s.key  # a document, never a file outside the tree
    assert ".md" not in ds.TABLE_SOURCE


def test_a_datasheet_roof_carries_the_document_of_its_entry():
    for r in ds.SPECS["h200-sxm"].roofs():
        assert r.evidence["table"] == ds.TABLE_SOURCE
        assert r.evidence["source"].startswith("NVIDIA H200 Tensor Core GPU Datasheet (2024")
        assert r.evidence["dense"] is True


def test_a_stored_run_keeps_the_label_it_was_written_with():
    """The H200's first contact was written with the table of its commit: read back, its
    datasheet roofs keep that label, a file name from outside the repo included (stored runs
    are evidence: never edited, no source added after the fact); today's runs carry the
    entry's document (above)."""
    from testpaths import H200_RUNS

    from roofbench.readers import read_run

    run = read_run(json.loads(H200_RUNS["gemm-4096"].read_text()))
    sheet = [r for r in run.roofs.roofs if r.source == "datasheet"]
    assert sheet
    assert {r.evidence["table"] for r in sheet} == {"ROOFLINE.md, datasheet peaks (dense)"}
    assert all("source" not in r.evidence for r in sheet)


def test_the_report_names_the_document_of_todays_datasheet_roofs():
    from roofbench.bench.present.sections import evidence_html

    page = evidence_html(ds.SPECS["h200-sxm"].roofs()[0].evidence)
    assert "NVIDIA H200 Tensor Core GPU Datasheet (2024" in page.split("</summary>")[0]
