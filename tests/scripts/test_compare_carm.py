"""scripts/compare_carm.py's reading of carm-roofline's output (a real file: carm-roofline
1.5.1's benchmarks.jsonl from `compare_carm.py` on the Xeon VM) and its table of rounds."""

from __future__ import annotations

import sys

import pytest
from testpaths import FIXTURES, ROOT

sys.path.insert(0, str(ROOT / "scripts"))
import compare_carm as cc  # noqa: E402

CARM = FIXTURES / "carm-1.5.1"


def ours(scale: float) -> dict:
    fig = {"GBps": 100.0 * scale, "median_GBps": 90.0 * scale, "working_set": 24576, "threads": 2}
    return {key: dict(fig) for key, _ in cc.PAIRS}


def test_reads_every_record_of_a_real_carm_output():
    rows = cc.read_carm(CARM)
    assert len(rows) == 12
    figs = cc.carm_figures(rows)
    assert set(figs) == {(lv, r) for lv in ("l1", "l2", "l3", "dram")
                         for r in ("1:0", "1:1", "2:1")}
    assert figs[("l1", "1:0")]["bandwidth_gbps"] == pytest.approx(962.0349799034717)
    assert all(f["num_threads"] == 2 for f in figs.values())


def test_each_row_is_the_median_of_the_rounds_ratios():
    carm = cc.read_carm(CARM)
    figs = cc.carm_figures(carm)
    rounds = [{"roofbench": ours(s), "carm": carm} for s in (1.0, 3.0, 2.0)]
    rows = cc.table(rounds)
    assert [(r["level"], r["carm_ratio"]) for r in rows] == [
        (lv, ratio) for (lv, _), ratio in cc.PAIRS]
    for row, ((lv, _), ratio) in zip(rows, cc.PAIRS, strict=True):
        theirs = figs[(lv, ratio)]["bandwidth_gbps"]
        assert row["roofbench_GBps"] == 200.0 and row["carm_GBps"] == theirs
        assert row["ratios"] == pytest.approx([100 / theirs, 300 / theirs, 200 / theirs])
        assert row["ratio"] == pytest.approx(200 / theirs)
    assert rows[-1]["access"] == "STREAM triad" and rows[0]["access"] == "read"
    text = cc.markdown(rows)
    assert text.count("\n") == len(rows) + 1 and "| l2 | read+write | 2:1 |" in text


def test_a_level_carm_did_not_measure_shows_a_dash():
    carm = [r for r in cc.read_carm(CARM) if r["cache_level"] != "L3"]
    rows = cc.table([{"roofbench": ours(1.0), "carm": carm}])
    l3 = [r for r in rows if r["level"] == "l3"]
    assert l3 and all(r["carm_GBps"] is None and r["ratio"] is None for r in l3)
    assert "| - | - |" in cc.markdown(rows)
