"""Which launch first: the Amdahl ranking on a real stored run (the README's CPU run), its
numbers recomputed here from the file's raw samples and roofs."""

from __future__ import annotations

import json
import statistics
from pathlib import Path

import pytest
from roofbench.bench.present.amdahl import Share, amdahl_section, case_shares, ranked, run_shares
from roofbench.bench.present.report import render
from roofbench.bench.results import load_run

ROOT = Path(__file__).resolve().parents[3]
RUN = ROOT / "results/intel-r-xeon-r-processor/20261130T222305Z/results.json"


def raw() -> dict:
    return json.loads(RUN.read_text())


def best_roof(d: dict, kind: str, key: str) -> float:
    """The highest measured roof of a level or precision, read from the file itself."""
    attr = "level" if kind == "memory" else "precision"
    return max(r["value"] for r in d["roofs"]["roofs"] if r["kind"] == kind
               and r.get(attr) == key and r["source"] == "measured")


def expected(launches: list[dict], precision: str, d: dict) -> list[tuple[str, float, float]]:
    """(name, share, gain) of each launch from its samples: s = median / sum of medians,
    r = max(1, t / max(FLOPs / compute roof, bytes / DRAM roof)), gain = 1/((1-s)+s/r)."""
    t = [statistics.median(la["samples_s"]) for la in launches]
    out = []
    for la, ti in zip(launches, t, strict=True):
        s = ti / sum(t)
        at_roof = max(la["flops"] / best_roof(d, "compute", precision),
                      la["dram"] / best_roof(d, "memory", "dram"))
        r = max(1.0, ti / at_roof)
        out.append((la["name"], s, 1 / ((1 - s) + s / r)))
    return sorted(out, key=lambda x: -x[2])


@pytest.mark.parametrize("key", ["l2norm/naive/fp64/44739242", "rownorm/naive/fp32/43683x4096"])
def test_each_launch_of_a_stored_pipeline_is_ranked_by_its_amdahl_bound(key):
    d = raw()
    (c_raw,) = [c for c in d["cases"] if c["workload"] + "/" + c["variant"] + "/" + c["dtype"]
                + "/" + "x".join(map(str, c["size"])) == key]
    launches = [{"name": la["kernel"] + (f" ({la['note']})" if la["note"] else ""),
                 "samples_s": la["timing"]["samples_s"], "flops": la["flops"],
                 "dram": la["bytes"]["dram"]} for la in c_raw["launches"]]
    want = expected(launches, c_raw["precision"], d)

    run = load_run(RUN)
    (c,) = [c for c in run.cases if c.key == key]
    got = ranked(case_shares(c, run.roofs))
    assert [s.name for s in got] == [w[0] for w in want]
    for s, (_, share, gain) in zip(got, want, strict=True):
        assert s.share == pytest.approx(share, rel=1e-12)
        assert s.gain == pytest.approx(gain, rel=1e-12)
    assert sum(s.share for s in got) == pytest.approx(1.0, rel=1e-12)
    # The bound never exceeds what removing the launch entirely would give.
    assert all(1.0 <= s.gain <= 1 / (1 - s.share) for s in got)


def test_the_whole_run_ranks_every_valid_case_by_its_median_time():
    d = raw()
    ok = [c for c in d["cases"] if c["status"] == "ok" and c["timing"]]
    cases = [{"name": c["workload"] + "/" + c["variant"] + "/" + c["dtype"] + "/"
              + "x".join(map(str, c["size"])), "samples_s": c["timing"]["samples_s"],
              "flops": c["flops"], "dram": c["bytes"]["dram"], "precision": c["precision"]}
             for c in ok]
    t = [statistics.median(c["samples_s"]) for c in cases]
    run = load_run(RUN)
    got = {s.name: s for s in run_shares(run)}
    assert set(got) == {c["name"] for c in cases}
    for c, ti in zip(cases, t, strict=True):
        s = got[c["name"]]
        assert s.share == pytest.approx(ti / sum(t), rel=1e-12)
        at_roof = max(c["flops"] / best_roof(d, "compute", c["precision"]),
                      c["dram"] / best_roof(d, "memory", "dram"))
        assert s.roof_time_s == pytest.approx(at_roof, rel=1e-12)
    order = ranked(list(got.values()))
    assert [s.gain for s in order] == sorted((s.gain for s in order), reverse=True)


def test_the_section_is_in_both_reports_with_the_first_launch_to_optimise():
    from roofbench.bench.present.report_html import render_html

    run = load_run(RUN)
    assert amdahl_section(run) is not None
    md = render(run)
    whole = md.split("## Which launch first (Amdahl)")[1].split("### Whole run")[1]
    first_row = [ln for ln in whole.splitlines() if ln.startswith("|")][2]  # header, rule
    top = ranked(run_shares(run))[0]
    assert first_row.split("|")[1].strip() == "1" and top.name in first_row
    for c in run.cases:  # every pipeline has its own ranking
        if case_shares(c, run.roofs):
            assert f"### {c.key}: {len(c.measurement.launches)} launches" in md
    assert "Which launch first (Amdahl)" in render_html(run)


def test_a_launch_at_or_above_its_roof_has_nothing_to_gain():
    assert Share("x", 1.0, 0.5, 2.0).gain == 1.0  # above its roof: r is clamped to 1
    assert Share("x", 1.0, 0.5, None).gain is None  # no roof: unknown, ranked last
    assert Share("x", 4.0, 0.5, 1.0).gain == pytest.approx(1 / (0.5 + 0.5 / 4))
    assert [s.name for s in ranked([Share("a", 1, 0.5, None), Share("b", 4, 0.5, 1)])] == \
        ["b", "a"]
