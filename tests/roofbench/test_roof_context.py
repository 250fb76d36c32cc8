"""The roof set's context (probe environment, a run's states), Roof.median and the case's
roof_states: written when present, absent otherwise, and files written before them still read
exactly as they did."""

from __future__ import annotations

import json

import pytest

from roofbench.calibrated import CalibratedRoofs
from roofbench.readers import read_calibrated, read_case, read_roofset
from roofbench.records import CaseResult, Declaration, Identity, Outcome
from roofbench.roof_context import (
    ROOF_RULE,
    ProbeEnvironment,
    RoofContext,
    RoofState,
    cpu_list,
    parse_cpu_list,
)
from roofbench.roof_records import Roof, RoofSet


@pytest.mark.parametrize("cores,text", [([0], "0"), ([0, 1, 2, 5], "0-2,5"),
                                        ([3, 1, 2, 8, 9, 11], "1-3,8-9,11")])
def test_cpu_lists_round_trip(cores, text):
    assert cpu_list(cores) == text and parse_cpu_list(text) == sorted(cores)


@pytest.mark.parametrize("bad", ["", "a", "3-1", "-1", ","])
def test_a_bad_cpu_list_is_refused(bad):
    with pytest.raises(ValueError):
        parse_cpu_list(bad)


OLD_ROOFSET = {"schema_version": 2, "device": "Some CPU", "datasheet": None,
               "failed_probes": [], "notes": [], "elapsed_s": 3.0, "info": {},
               "roofs": [{"name": "dram stream-add", "kind": "memory", "value": 2e10,
                          "source": "measured", "level": "dram", "precision": None,
                          "evidence": {"median_bytes_per_s": 1.8e10}, "unit": "B/s"}]}


def test_a_roof_set_written_before_the_context_reads_as_before():
    rs = read_roofset(json.loads(json.dumps(OLD_ROOFSET)))
    assert rs.context is None and rs.roofs[0].median is None
    assert rs.to_dict() == OLD_ROOFSET  # written back byte for byte: nothing added


def test_context_median_and_states_round_trip():
    env = ProbeEnvironment(cores=[0], machine_cores=[0, 1], cores_from="affinity",
                           variables={"OMP_NUM_THREADS": "1"},
                           threads={"numba": 1, "blas": 1, "openmp": None},
                           fingerprint={"cpu": "Some CPU", "numpy": "2.0"})
    states = [RoofState("stream-add-nt", 2e10, 1.9e10, 0.5),
              RoofState("stream-add-nt", 3e10, 2.8e10, 9.0)]
    rs = RoofSet("Some CPU", [Roof("dram", "memory", 3e10, "measured", level="dram",
                                   median=2.5e10)], context=RoofContext(env, states))
    back = read_roofset(json.loads(json.dumps(rs.to_dict())))
    assert back.context == rs.context and back.roofs[0].median == 2.5e10
    assert back.context.environment.restricted and back.context.environment.cores_text == "0"
    assert back.context.drift() == pytest.approx(0.5)
    cal = read_calibrated(json.loads(json.dumps(CalibratedRoofs(rs).to_dict())))
    assert cal.roofs.context == rs.context  # the calibration cache keeps it too


def test_a_cases_roof_states_are_optional():
    case = CaseResult(
        Identity(workload="w", variant="v", backend="cpu", dtype="fp64", size=[4],
                 precision="fp64", cores="simt"),
        Declaration(flops=4, bytes={"dram": 96}, ai={"dram": 4 / 96}),
        Outcome(status="ok"))
    d = case.to_dict()
    assert "roof_states" not in d and read_case(d).roofline.roof_states == []
    case.roofline.roof_states = [RoofState("stream-add-nt", 2e10, 1.9e10, 0.5)]
    assert (
        read_case(json.loads(json.dumps(case.to_dict()))).roofline.roof_states
        == case.roofline.roof_states
    )


def test_the_rule_says_which_figure_a_roof_is():
    assert "best sustained figure" in ROOF_RULE and "ceiling" in ROOF_RULE
    assert "median" in ROOF_RULE
