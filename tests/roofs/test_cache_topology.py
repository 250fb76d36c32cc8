"""The cache topology as the OS reports it (roofs/probes/cache_topology.py), from sysfs-like trees
and lscpu outputs of real machines (tests/standins/cache_layouts.py)."""

from __future__ import annotations

import pytest
from cache_layouts import (
    INTEL_VM,
    INTEL_VM_LSCPU_B,
    NO_SYSFS_LSCPU,
    SKX_2S,
    ZEN3_VM,
    ZEN4,
    write_sysfs,
)
from roofbench.roofs.probes import cache_topology as ct

KiB, MiB = 1 << 10, 1 << 20


def test_cpu_lists_parse_as_the_kernel_writes_them() -> None:
    assert ct.parse_cpu_list("0-3,8,10-11\n") == {0, 1, 2, 3, 8, 10, 11}
    assert ct.parse_cpu_list("5") == {5}
    assert ct.parse_cpu_list("") == frozenset()


# (layout, [(level, instance bytes, instances)], capacity of every level for all CPUs)
CASES = [
    (INTEL_VM, [(1, 48 * KiB, 2), (2, 2 * MiB, 2), (3, 480 * MiB, 1)]),
    (ZEN3_VM, [(1, 32 * KiB, 1), (2, 512 * KiB, 1), (3, 32 * MiB, 1)]),
    (ZEN4, [(1, 32 * KiB, 16), (2, 1 * MiB, 16), (3, 32 * MiB, 2)]),
    (SKX_2S, [(1, 32 * KiB, 56), (2, 1 * MiB, 56), (3, 39424 * KiB, 2)]),
]


@pytest.mark.parametrize(("layout", "want"), CASES, ids=[c[0].name for c in CASES])
def test_sysfs_levels_instances_and_sizes(tmp_path, layout, want) -> None:
    topo = ct.from_sysfs(write_sysfs(tmp_path, layout))
    assert topo is not None and topo.source == "sysfs"
    assert topo.cpus == frozenset(range(layout.cpus))
    got = [(lv.level, lv.instance_bytes(), len(lv.instances)) for lv in topo.levels]
    assert got == want  # instruction caches left out, SMT siblings' shared caches once


def test_capacity_counts_the_instances_the_cpus_touch(tmp_path) -> None:
    zen4 = ct.from_sysfs(write_sysfs(tmp_path / "zen4", ZEN4))
    assert zen4 is not None
    l2, l3 = zen4.level(2), zen4.level(3)
    assert l2 is not None and l3 is not None
    # CPU 0 and its SMT sibling 16: one core, one L2, one CCX's L3.
    assert l2.capacity(frozenset({0, 16})) == 1 * MiB
    assert l3.capacity(frozenset({0, 16})) == 32 * MiB
    # one CPU in each CCX: both L3 instances
    assert l3.capacity(frozenset({0, 8})) == 64 * MiB
    assert l2.capacity() == 16 * MiB and l3.capacity() == 64 * MiB


def test_lscpu_reads_the_same_topology_as_sysfs_on_the_intel_vm(tmp_path) -> None:
    from_fs = ct.from_sysfs(write_sysfs(tmp_path, INTEL_VM))
    from_ls = ct.from_lscpu(INTEL_VM_LSCPU_B)
    assert from_fs is not None and from_ls is not None and from_ls.source == "lscpu"
    assert [(lv.level, lv.capacity()) for lv in from_ls.levels] == \
        [(lv.level, lv.capacity()) for lv in from_fs.levels]
    assert [len(lv.instances) for lv in from_ls.levels] == [2, 2, 1]


def test_without_sysfs_cache_info_lscpu_is_the_fallback(tmp_path) -> None:
    root = write_sysfs(tmp_path, ZEN3_VM, with_cache=False)
    assert ct.from_sysfs(root) is None
    topo = ct.read_topology(root, lscpu=NO_SYSFS_LSCPU)
    assert topo.source == "lscpu" and topo.cpus == {0, 1, 2, 3}
    # the older format gives one instance's size: L1/L2 per core (2 cores), L3 per socket
    assert [(lv.level, lv.instance_bytes(), len(lv.instances)) for lv in topo.levels] == \
        [(1, 32 * KiB, 2), (2, 512 * KiB, 2), (3, 32 * MiB, 1)]


def test_no_source_at_all_is_an_empty_topology(tmp_path) -> None:
    root = write_sysfs(tmp_path, ZEN3_VM, with_cache=False)
    topo = ct.read_topology(root, lscpu="Architecture: x86_64\n")
    assert topo.source == "none" and topo.levels == () and topo.last_level() is None
