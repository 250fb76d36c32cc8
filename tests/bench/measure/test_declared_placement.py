"""A call declared by byte counts (a closure: no array among its arguments) is placed as the
same call declared by its arrays: the declared traffic bounds its working set, so traffic
that fits a cache level is placed there and said so (issue 57 item 4)."""

from __future__ import annotations

import numpy as np
from cache_layouts import cache_roofset

import roofbench

N = 1 << 17  # 1 MiB per fp64 array: 3 MiB in all, the stand-in's two L2s hold 4 MiB


def _arrays() -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    return np.ones(N), np.ones(N), np.empty(N)


def test_a_closure_with_byte_counts_is_placed_where_its_arrays_would_be(capsys) -> None:
    a, b, c = _arrays()
    by_arrays = roofbench.measure(np.add, a, b, c, flops=N, reads=[a, b], writes=c,
                                  name="add/arrays", roofs=cache_roofset())
    by_counts = roofbench.measure(lambda: np.add(a, b, out=c), flops=N,
                                  reads=2 * a.nbytes, writes=a.nbytes, dtype="fp64",
                                  name="add/counts", roofs=cache_roofset())
    for rec in (by_arrays, by_counts):
        assert rec.roofline.placement is not None
        assert rec.roofline.placement.level == "l2", rec.key
        assert rec.roofline.limiting_roof.startswith("l2 sweep")
    assert by_counts.roofline.placement.working_set_bytes == 3 * a.nbytes
    err = capsys.readouterr().err
    said = [ln for ln in err.splitlines() if "add/counts" in ln and "fits in" in ln]
    assert len(said) == 1 and "declared" in said[0], err


def test_declared_traffic_past_every_cache_stays_on_dram() -> None:
    a = np.ones(8)
    rec = roofbench.measure(lambda: float(a.sum()), flops=1 << 26, reads=1 << 32,
                            dtype="fp64", name="sum/dram", roofs=cache_roofset())
    assert rec.roofline.placement is not None and rec.roofline.placement.level == "dram"


def test_bytes_declared_per_cache_level_are_not_moved() -> None:
    a = np.ones(1 << 14)
    rec = roofbench.measure(lambda: float(a.sum()), flops=a.size, bytes={"l2": a.nbytes},
                            dtype="fp64", name="sum/l2", roofs=cache_roofset())
    assert rec.roofline.placement is None  # the caller said where its bytes go

