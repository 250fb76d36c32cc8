"""Every stored results file migrates to the nested case record (results.json version 4) with
its reports unchanged: report.md and results.csv rendered from the file as stored (flat,
versions 1 to 3) and from the nested file it is rewritten as are byte-identical."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from roofbench.bench.present.report import render
from roofbench.bench.results import cases_frame, declared_buffers, load_run
from testpaths import ROOT

from roofbench import legacy
from roofbench.readers import read_run
from roofbench.records import RESULTS_SCHEMA_VERSION

STORED = sorted((ROOT / "results").rglob("results.json"))
FLAT = [p for p in STORED if json.loads(p.read_text())["schema_version"] < 4]  # 4 nested them


def test_there_are_stored_results_files():
    assert len(FLAT) >= 10 and len(STORED) > len(FLAT)  # flat ones, and nested since 4


@pytest.mark.parametrize("path", FLAT, ids=lambda p: str(p.relative_to(ROOT)))
def test_a_stored_file_migrates_to_the_nested_record_with_the_same_reports(path: Path):
    raw = json.loads(path.read_text())
    assert raw["schema_version"] < 4  # stored flat
    flat = load_run(path)
    nested = json.loads(json.dumps(flat.to_dict(), allow_nan=True))
    assert nested["schema_version"] == RESULTS_SCHEMA_VERSION
    for c in nested["cases"]:
        assert set(c) == set(legacy.FLAT_CASE_GROUPS)  # nothing left flat
    again = read_run(nested, declared_buffers)
    assert render(again) == render(flat)
    assert cases_frame(again).to_csv(index=False) == cases_frame(flat).to_csv(index=False)
    assert again.to_dict() == flat.to_dict()


def test_valid_is_folded_into_the_status():
    """A flat case stored "ok" but not valid reads "invalid"; a valid that is not a boolean
    is named; ``unit``, the name of ``cores`` before version 3, is renamed."""
    base = {"workload": "w", "variant": "v", "backend": "cpu", "dtype": "fp32", "size": [4],
            "precision": "fp32", "cores": "simt", "flops": 4, "bytes": {"dram": 48},
            "ai": {"dram": 1 / 12}, "status": "ok"}
    assert legacy.nest_flat_case({**base, "valid": False})["outcome"]["status"] == "invalid"
    assert legacy.nest_flat_case({**base, "valid": True})["outcome"]["status"] == "ok"
    old = {k: v for k, v in base.items() if k != "cores"} | {"unit": "tensor"}  # before 3
    assert legacy.nest_flat_case(old)["identity"]["cores"] == "tensor"
    with pytest.raises(ValueError, match="valid is 'yes'"):
        legacy.nest_flat_case({**base, "valid": "yes"})
