"""Cache roofs on disk (Roof.cache, CaseResult.placement) and the level placement rule
(roofline.place, apply_roofs): a case whose working set fits a cache is held against that
cache's roof, one that does not against DRAM, and a wrong placement is caught."""

from __future__ import annotations

import json

from cache_layouts import cache_roofset

from roofbench.cache_records import Placement
from roofbench.readers import read_case, read_roof, read_roofset
from roofbench.records import (
    BufferFacts,
    CaseResult,
    Declaration,
    Identity,
    Measurement,
    OccupancyLevel,
    Outcome,
    RooflinePlace,
)
from roofbench.roofline import apply_roofs, place, placement_problem

KiB, MiB, GiB = 1 << 10, 1 << 20, 1 << 30


def add_case(nbytes_per_array: int, median_s: float, **kw) -> CaseResult:
    """A vector_add-like fp64 case: a, b in, c out (1 FLOP per 24 B), timed."""
    n = nbytes_per_array // 8
    c = CaseResult(
        Identity(workload="vector_add", variant="plain", backend="cpu", dtype="fp64", size=[n],
                 precision="fp64", cores="simt"),
        Declaration(flops=n, bytes={"dram": 3 * nbytes_per_array}, ai={"dram": 1 / 24},
                    buffers={k: BufferFacts("input" if k != "c" else "output",
                                            nbytes_per_array) for k in "abc"}),
        Outcome(status="ok"), Measurement(median_s=median_s),
        RooflinePlace(flop_per_s=n / median_s))
    for k, v in kw.items():  # each further field into its group
        group = next(g for g in (c.identity, c.declaration, c.outcome, c.measurement,
                                 c.roofline, c.evidence) if k in type(g).__dataclass_fields__)
        setattr(group, k, v)
    return c


def test_a_case_that_fits_l2_is_placed_on_l2_and_held_against_its_roof() -> None:
    rs = cache_roofset()
    # 3 x 1 MiB = 3 MiB < 2 x 2 MiB of L2 (both cores), > 96 KiB of L1: L2.
    c = add_case(1 * MiB, median_s=3 * MiB / 200e9)  # moved at 200 GB/s
    apply_roofs(c, rs)
    assert c.roofline.placement is not None and c.roofline.placement.level == "l2"
    assert (
        c.roofline.placement.working_set_bytes == 3 * MiB
        and c.roofline.placement.capacity_bytes == 4 * MiB
    )
    assert c.roofline.limiting_roof == "l2 sweep-read" and c.roofline.bound == "memory"
    assert c.roofline.attainable == rs.memory("l2").value / 24
    assert 0.6 < c.roofline.efficiency < 0.7  # 200 of 300 GB/s: not 13x the DRAM roof


def test_a_dram_sized_case_is_placed_on_dram() -> None:
    rs = cache_roofset()
    c = add_case(1 * GiB, median_s=3 * GiB / 10e9)
    apply_roofs(c, rs)
    assert c.roofline.placement is not None and c.roofline.placement.level == "dram"
    assert c.roofline.placement.capacity_bytes is None
    assert c.roofline.limiting_roof == "dram stream-add-nt"
    assert abs(c.roofline.efficiency - 10 / 15) < 1e-9


def test_l1_l3_and_the_l3_the_sweep_saw_fall_to_dram_speed() -> None:
    rs = cache_roofset()
    assert place(60 * KiB, rs).level == "l1"  # 60 KiB < 2 x 48 KiB
    assert place(100 * MiB, rs).level == "l3"
    # 400 MiB < the 480 MiB the OS reports, but the sweep measured 360 MiB no faster than
    # DRAM: that part of the host's L3 is not this VM's.
    far = place(400 * MiB, rs)
    assert far.level == "dram"
    assert place(359 * MiB, rs).capacity_bytes == 360 * MiB
    # without that point the reported size stands
    assert place(400 * MiB, cache_roofset(slow_l3_at=None)).level == "l3"


def test_fewer_cores_hold_less_of_a_private_level() -> None:
    rs = cache_roofset()
    # an occupancy scan's 1-thread case of 3 MiB: one core's L2 is 2 MiB: L3
    c = add_case(1 * MiB, median_s=1e-3,
                 occupancy_level=OccupancyLevel("threads", 1, 2))
    apply_roofs(c, rs)
    assert c.roofline.placement.level == "l3" and c.roofline.placement.cores == 1
    assert place(3 * MiB, rs, cores=2).level == "l2"


def test_a_planted_wrong_placement_is_caught() -> None:
    rs = cache_roofset()
    c = add_case(1 * MiB, median_s=3 * MiB / 200e9)
    c.roofline.placement = Placement("dram", 3 * MiB, None, None)  # planted: it fits L2
    apply_roofs(c, rs)
    assert (
        c.roofline.limiting_roof == "dram stream-add-nt" and c.roofline.efficiency > 10
    )  # "above its roof"
    why = placement_problem(c, rs)
    assert why is not None and "placed on dram" in why and "belongs on l2" in why
    right = add_case(1 * MiB, median_s=3 * MiB / 200e9)
    apply_roofs(right, rs)
    assert placement_problem(right, rs) is None


def test_gpu_roofs_without_sweeps_place_nothing() -> None:
    from roofbench.roof_records import Roof, RoofSet

    rs = RoofSet("gpu", [Roof("hbm", "memory", 4e12, "measured", level="dram"),
                         Roof("l2", "memory", 1e13, "measured", level="l2"),
                         Roof("fp64", "compute", 6e13, "measured", precision="fp64")])
    c = add_case(1 * MiB, median_s=1e-5)
    apply_roofs(c, rs)
    assert c.roofline.placement is None and c.roofline.limiting_roof == "hbm"


def test_cache_roofs_and_placements_round_trip_and_old_files_read_without_them() -> None:
    rs = cache_roofset()
    d = json.loads(json.dumps(rs.to_dict()))
    back = read_roofset(d)
    l2 = back.memory("l2")
    assert l2 is not None and l2.cache is not None and l2.cache == rs.memory("l2").cache
    assert d["roofs"][3]["cache"]["capacity_bytes"] == 96 * KiB
    assert "cache" not in d["roofs"][0]  # absent on every roof but a cache level's
    old = {"name": "dram", "kind": "memory", "value": 1e10, "source": "measured",
           "level": "dram", "evidence": {}}
    assert read_roof(old).cache is None and read_roof(old).to_dict().keys() == \
        {*old, "precision", "unit"}
    c = add_case(1 * MiB, median_s=1e-4)
    apply_roofs(c, rs)
    cd = json.loads(json.dumps(c.to_dict()))
    assert cd["roofline"]["placement"]["level"] == "l2"
    assert read_case(cd).roofline.placement == c.roofline.placement
    bare = add_case(1 * MiB, median_s=1e-4)
    assert "placement" not in bare.to_dict()["roofline"]
    assert read_case(bare.to_dict()).roofline.placement is None
