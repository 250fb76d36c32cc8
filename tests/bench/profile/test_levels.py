"""The level each op's data comes from (bench/profile/levels.py): reuse distances
by hand on a small program, a weight's the program's whole working set."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

from roofbench.bench.profile.levels import program_working_set, reuse_distances  # noqa: E402
from roofbench.bench.profile.recording import record_program  # noqa: E402


def test_a_weight_comes_from_the_whole_program_and_an_intermediate_from_the_last_op():
    w, x = torch.randn(256, 256), torch.randn(4, 256)

    def prog(a):
        h = a @ w  # reads x and w (pre-existing), writes h
        return h + 1.0  # reads h, written by the op just before

    with torch.no_grad():
        rec, _ = record_program(prog, (x,), {}, clone=False)
    mm, add = rec.distinct
    # storages: w 256 KiB, x 4 KiB, h 4 KiB, the sum 4 KiB
    whole = 256 * 256 * 4 + 3 * 4 * 256 * 4
    assert program_working_set(rec) == whole
    dist = reuse_distances(rec)
    assert dist[mm.index] == whole  # w was last touched one whole run before
    # h was written by the op just before: nothing touched since, so the add's own bytes
    assert dist[add.index] == add.bytes == 2 * 4 * 256 * 4


def test_distances_count_the_bytes_between_two_uses():
    x = torch.randn(1024)

    def prog(a):
        b = a * 2.0  # 8 KiB moved
        c = b * 3.0  # 8 KiB moved
        return a + c  # reads a again: the second op's 8 KiB since, and its own 12 KiB

    with torch.no_grad():
        rec, _ = record_program(prog, (x,), {}, clone=False)
    dist = reuse_distances(rec)
    add = next(d for d in rec.distinct if d.packet == "add")
    # its largest read: a and c are the same size; max() keeps the first (a)
    # 8 KiB since + its own 12 KiB, no more than the program's 16 KiB (a, b, c, the sum)
    assert program_working_set(rec) == 16 * 1024 and dist[add.index] == 16 * 1024


def test_a_weight_is_on_dram_in_the_program_and_in_l3_alone():
    import roofbench
    from roofbench.cache_records import CacheSweep
    from roofbench.roof_records import Roof, RoofSet
    from roofbench.timing import TimerConfig

    l3 = CacheSweep("l3", "read", 2 << 20, 1, 1, 1, "sysfs")  # a 2 MiB L3
    roofs = RoofSet(device="t", roofs=[
        Roof("dram", "memory", 10e9, "measured", level="dram"),
        Roof("l3 sweep", "memory", 100e9, "measured", level="l3", cache=l3),
        Roof("fp32 fma", "compute", 100e9, "measured", precision="fp32")])
    ws = [torch.randn(512, 512) for _ in range(4)]  # 1 MiB each: 4 MiB in all

    def prog(a):
        for w in ws:
            a = a @ w
        return a

    with torch.no_grad():
        prof = roofbench.profile(prog, torch.randn(1, 512), roofs=roofs, timer=TimerConfig(
            warmup_s=0.0, min_samples=2, max_samples=2, budget_s=0.0))
    (mm,) = [p for p in prof.ops if p.op.packet == "mm"]
    assert mm.op.calls == 4
    # in the program the weight was last touched a whole run ago: past the L3
    assert mm.case.roofline.placement.level == "dram"
    assert mm.case.roofline.limiting_roof == "dram"
    # alone, its own 1 MiB + 4 KiB fits
    assert mm.case.evidence.extra["alone"]["level"] == "l3"
