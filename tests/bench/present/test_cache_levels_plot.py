"""A CPU run with cache roofs draws one diagonal per level (L1, L2, L3 and DRAM), as a GPU's
L2 and shared memory are drawn, and a case placed on L2 is bound by the L2 diagonal."""

from __future__ import annotations

from cache_layouts import cache_roofset
from roofbench.bench.present.figure_data import LEVEL_STYLES, select_roofs, valid_points
from roofbench.bench.present.plot import build_figure

from roofbench.records import (
    BufferFacts,
    CaseResult,
    Declaration,
    Identity,
    Measurement,
    Outcome,
    RooflinePlace,
)
from roofbench.roofline import apply_roofs

MiB = 1 << 20


def l2_case() -> CaseResult:
    n = MiB // 8
    c = CaseResult(
        Identity(workload="vector_add", variant="plain", backend="cpu", dtype="fp64", size=[n],
                 precision="fp64", cores="simt"),
        Declaration(flops=n, bytes={"dram": 3 * MiB}, ai={"dram": 1 / 24},
                    buffers={k: BufferFacts("input", MiB) for k in "abc"}),
        Outcome(status="ok"),
        measurement=Measurement(median_s=3 * MiB / 200e9),
        roofline=RooflinePlace(flop_per_s=n / (3 * MiB / 200e9)))
    return c


def test_one_diagonal_per_cache_level_and_the_point_on_l2() -> None:
    rs = cache_roofset()
    c = l2_case()
    apply_roofs(c, rs)
    pts = valid_points([c], roofs=rs)
    assert [p.level for p in pts] == ["l2"]
    _, memory = select_roofs(rs, pts)
    assert sorted(r.level for r in memory) == ["dram", "l1", "l2", "l3"]
    fig = build_figure([rs], [[c]], "cpu with caches")
    drawn = sorted(r.level for r, _ in fig.drawn_roofs if r.kind == "memory")
    assert drawn == ["dram", "l1", "l2", "l3"]  # the highest roof of each level, once
    # told apart by line style (matplotlib names every dash pattern '--': compare the styles)
    assert len({repr(LEVEL_STYLES[lv]) for lv in drawn}) == 4
    labels = " ".join(t.get_text() for t in fig.labels) + " ".join(fig.legend_roofs)
    assert "L3" in labels and "L1" in labels
