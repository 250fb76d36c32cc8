"""The cache sweep (roofs/probes/cpu_cache_sweep.py): planned from real topologies
(tests/standins/cache_layouts.py), then run for real on a small planted topology."""

from __future__ import annotations

import json
import platform

import numpy as np
import pytest
from cache_layouts import INTEL_VM, SKX_2S, ZEN3_VM, ZEN4, write_sysfs
from roofbench.roofs.probes import cpu_cache_sweep as sw
from roofbench.roofs.probes.cache_topology import (
    CacheInstance,
    CacheLevel,
    CacheTopology,
    from_sysfs,
)

from roofbench.readers import read_roof
from roofbench.roof_records import RoofSet
from roofbench.roofline import place

KiB, MiB, GiB = 1 << 10, 1 << 20, 1 << 30


def topo_of(tmp_path, layout) -> CacheTopology:
    t = from_sysfs(write_sysfs(tmp_path, layout))
    assert t is not None
    return t


def bands(plans) -> dict[str, tuple[int, int]]:
    return {p.level: (p.sizes[0], p.sizes[-1]) for p in plans}


def test_intel_vm_plan_between_levels_and_its_480_mib_l3_within_the_budget(tmp_path) -> None:
    topo = topo_of(tmp_path, INTEL_VM)
    plans = sw.plan_sweep(topo, frozenset({0, 1}), budget_bytes=2 * GiB)
    b = bands(plans)
    assert [p.level for p in plans] == ["l1", "l2", "l3"]
    assert b["l1"] == (24 * KiB, 72 * KiB)  # 1/4 and 3/4 of 2 x 48 KiB
    assert b["l2"] == (192 * KiB, 3 * MiB)  # 2x L1 .. 3/4 of 2 x 2 MiB
    assert b["l3"] == (8 * MiB, 360 * MiB)  # 2x L2 .. 3/4 of 480 MiB
    assert [len(p.sizes) for p in plans] == [sw.L1_POINTS, sw.POINTS, sw.POINTS]
    # the budget caps the reported L3: never more than the memory the probe may take
    small = bands(sw.plan_sweep(topo, frozenset({0, 1}), budget_bytes=64 * MiB))
    assert small["l3"][1] <= 64 * MiB and small["l2"] == b["l2"]


def test_zen3_vm_smt_siblings_share_one_core_of_cache(tmp_path) -> None:
    plans = sw.plan_sweep(topo_of(tmp_path, ZEN3_VM), frozenset({0, 1}), 2 * GiB)
    b = bands(plans)
    assert b["l1"] == (8 * KiB, 24 * KiB)  # one 32 KiB L1d for both vCPUs
    assert b["l2"] == (64 * KiB, 384 * KiB)
    assert b["l3"] == (1 * MiB, 24 * MiB)
    l3 = plans[2]
    assert (l3.instances, l3.cpus_per_instance, l3.capacity) == (1, 2, 32 * MiB)


def test_zen4_per_ccx_l3_follows_the_allowed_cores(tmp_path) -> None:
    topo = topo_of(tmp_path, ZEN4)
    one_core = sw.plan_sweep(topo, frozenset({0, 16}), 2 * GiB)  # taskset -c 0,16
    assert bands(one_core)["l3"] == (2 * MiB, 24 * MiB)  # one CCX's 32 MiB
    whole = sw.plan_sweep(topo, None, 2 * GiB)
    l3 = whole[2]
    assert (l3.instances, l3.capacity) == (2, 64 * MiB)
    # 16 MiB of L2 below 64 MiB of L3: a victim cache's band, past the L2s
    assert bands(whole)["l3"] == (20 * MiB, 64 * MiB)


def test_two_socket_skylake_l3_smaller_than_its_l2s_gets_a_victim_band(tmp_path) -> None:
    plans = sw.plan_sweep(topo_of(tmp_path, SKX_2S), None, 2 * GiB)
    lo, hi = bands(plans)["l3"]
    l2_total, l3_total = 56 * MiB, 2 * 39424 * KiB  # 56 cores x 1 MiB; 2 sockets
    assert lo >= 1.25 * l2_total - 64 * 112 and hi <= l2_total + 0.75 * l3_total
    assert lo > l2_total and plans[2].instances == 2
    for p in plans:  # ascending, aligned to one cache line per thread
        assert p.sizes == sorted(p.sizes) and all(s % (64 * 112) == 0 for s in p.sizes)


def test_no_cache_reported_plans_nothing_and_measures_nothing() -> None:
    empty = CacheTopology((), "none")
    assert sw.plan_sweep(empty, None, GiB) == []
    assert sw.measure_sweep([], "none") == []


x86_only = pytest.mark.skipif(platform.machine().lower() not in sw.TICKS_MACHINES,
                              reason="the sweep times its bursts with rdtsc (x86-64 only)")


@x86_only
def test_a_real_sweep_on_a_planted_topology_gives_typed_roofs(monkeypatch) -> None:
    # Small caches, few bursts: the kernels, the burst timing and the records, in seconds.
    monkeypatch.setattr(sw, "POINT_S", 0.004)
    cpus = frozenset(range(sw.threads()))
    topo = CacheTopology((CacheLevel(1, tuple(CacheInstance(32 * KiB, frozenset({c}))
                                              for c in cpus)),
                          CacheLevel(2, tuple(CacheInstance(256 * KiB, frozenset({c}))
                                              for c in cpus))), "sysfs", cpus)
    roofs = sw.measure_sweep(sw.plan_sweep(topo, cpus, 64 * MiB), "sysfs", quick=True)
    assert [(r.level, r.cache.access) for r in roofs] == [
        ("l1", "read"), ("l1", "read+write"), ("l2", "read"), ("l2", "read+write")]
    for r in roofs:
        assert r.kind == "memory" and r.source == "measured" and np.isfinite(r.value)
        assert r.value == max(p.bytes_per_s for p in r.cache.points)
        for p in r.cache.points:  # the sustained rate: no lucky burst, no slow one
            assert p.best_bytes_per_s >= p.bytes_per_s >= p.median_bytes_per_s > 0, p
            assert p.mean_bytes_per_s > 0
        best = max(r.cache.points, key=lambda p: p.bytes_per_s)
        assert r.median == best.median_bytes_per_s
        assert r.cache.cores == len(cpus) and r.cache.topology_source == "sysfs"
        back = read_roof(json.loads(json.dumps(r.to_dict())))
        assert back.cache == r.cache and back.value == r.value
    # what the sweep measured places a case: 16 KiB fits the L1s (32 KiB per core), 100 KiB
    # only the L2s
    rs = RoofSet("planted", roofs)
    assert place(100 * KiB, rs).level == "l2"
    assert place(16 * KiB, rs).level == "l1"


@x86_only
def test_the_kernels_are_checked_against_numpy(monkeypatch) -> None:
    buf = sw.SweepBuffer(64 * KiB, 2)
    before = buf.view(32 * KiB).copy()
    buf.check(32 * KiB)  # passes: the values agree, read+write stores what it should
    assert np.array_equal(buf.view(32 * KiB), before)  # and the data is put back
    real = sw.sweep_bursts
    monkeypatch.setattr(sw, "sweep_bursts", lambda *a: a[6].fill(0))  # a kernel that lies
    with pytest.raises(RuntimeError, match="read kernel"):
        buf.check(32 * KiB)
    # a read+write pass whose stores are lost (the loads alone are cheaper)
    monkeypatch.setattr(sw, "sweep_bursts", lambda *a: None if a[2] else real(*a))
    with pytest.raises(RuntimeError, match="read\\+write kernel"):
        buf.check(32 * KiB)


@x86_only
def test_a_point_is_timed_after_untimed_bursts(monkeypatch) -> None:
    # The core's start state (the first ms of a point ran 17% fast at L2 on the Xeon VM) is
    # run off before the timed bursts; the rates come from the timed ones only.
    buf = sw.SweepBuffer(64 * KiB, 2)
    runs: list[int] = []
    real = buf.run
    monkeypatch.setattr(buf, "run",
                        lambda acc, ws, reps, n: (runs.append(n), real(acc, ws, reps, n)))
    rates, ev = sw.measure_point(buf, "read", 32 * KiB, sw.ticks_per_second(), 0.004)
    assert runs[1:] == [ev["warmup_bursts"], ev["bursts"]] and ev["warmup_bursts"] >= 1
    assert buf.burst_ticks().shape == (2, ev["bursts"]) and rates.best >= rates.sustained > 0


def test_a_lucky_burst_is_not_the_roof_and_a_slow_one_not_the_median() -> None:
    # Two threads, 20 bursts each, 100 bytes a burst at 1 tick/s: thread 0 ran 19 bursts in
    # 10 ticks and one in 5 (a lucky one: twice as fast); thread 1 ran 19 in 20 ticks and one
    # preempted for 2000.
    ticks = np.array([[10] * 19 + [5], [20] * 19 + [2000]], dtype=np.uint64)
    r = sw.rates_of(ticks, 100.0, 1.0)
    assert r.best == 20.0 + 5.0  # each thread's best burst: the lucky one counts
    assert r.sustained == 10.0 + 5.0  # a tenth of the bursts reach it: the lucky one does not
    assert r.median == 10.0 + 5.0
    assert r.mean == 100 * 20 / 195 + 100 * 20 / 2380  # all bytes over all time: slowed


def test_no_cycle_counter_or_a_failed_child_means_no_cache_roofs(monkeypatch) -> None:
    said: list[str] = []
    monkeypatch.setattr(sw.platform, "machine", lambda: "aarch64")
    assert sw.cache_roofs(True, said.append) == [] and "no cache sweep on aarch64" in said[0]
    monkeypatch.setattr(sw.platform, "machine", lambda: "x86_64")

    def fails(quick: bool) -> list:
        raise RuntimeError("cache sweep child failed (exit -4): no output")

    monkeypatch.setattr(sw, "isolated_cache_roofs", fails)
    said.clear()
    assert sw.cache_roofs(True, said.append) == []
    assert said[-1] == "cpu roofs: no cache roofs: cache sweep child failed (exit -4): no output"
