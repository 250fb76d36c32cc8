"""An occupancy scan's cases: every level of a case with the case's counts, the cases a backend
cannot scan recorded with the reason, and the CPU's thread count held for a case only."""

from __future__ import annotations

import numba
import numpy as np
import pytest
from roofbench.bench.backends.base import CaseUnsupported
from roofbench.bench.backends.cpu import CpuBackend
from roofbench.bench.suite.runner import run_case
from roofbench.bench.suite.scan import occupancy_cases
from roofbench.kernels import registry
from roofbench.kernels.spec import Case

from roofbench.records import OccupancyLevel
from roofbench.timing import TimerConfig


def gemv(variant: str, size=(67, 33)) -> Case:
    w = registry.workloads()["gemv"]
    return Case(w, w.variants[variant], "fp64", size)


def test_every_level_keeps_the_case_counts_and_the_unscannable_say_why():
    be = CpuBackend()
    cases, skipped = occupancy_cases([gemv("rows"), gemv("library")], be)
    n = numba.config.NUMBA_NUM_THREADS
    assert [c.occupancy_level for c in cases] == [OccupancyLevel("threads", t, n)
                                            for t in range(1, n + 1)]
    assert {(c.flops, tuple(c.bytes().items())) for c in cases} == {
        (gemv("rows").flops, tuple(gemv("rows").bytes().items()))}
    (lib,) = skipped
    assert lib.outcome.status == "unsupported" and "thread pool of its own" in lib.outcome.error
    assert lib.identity.occupancy_level is None


def test_a_backend_without_a_way_to_limit_occupancy_refuses():
    from roofbench.bench.backends.base import Backend

    class Plain(CpuBackend):
        occupancy_levels = Backend.occupancy_levels

    _, skipped = occupancy_cases([gemv("rows")], Plain())
    assert skipped[0].outcome.error == "the cpu backend cannot limit its occupancy"


def test_the_thread_count_holds_for_the_case_and_is_restored_after(monkeypatch):
    be = CpuBackend()
    before = numba.get_num_threads()
    seen: list[int] = []
    case = gemv("rows", (1001, 17))
    w = case.workload
    kernel = case.variant.impls["cpu"]["rows"]

    def spy(*args):  # runs where the prepared case calls its kernel
        seen.append(numba.get_num_threads())
        kernel(*args)

    level = OccupancyLevel("threads", 1, before)
    monkeypatch.setitem(case.variant.impls["cpu"], "rows", spy)
    at = Case(w, case.variant, case.dtype, case.size, occupancy_level=level)
    rec = run_case(at, be, None, TimerConfig.quick(), np.random.default_rng(1))
    assert rec.outcome.status == "ok" and rec.valid and rec.identity.occupancy_level == level
    assert seen and set(seen) == {1}  # validation and every timed sample at 1 thread
    assert rec.evidence.extra["numba_threads"] == 1
    assert numba.get_num_threads() == before


def test_a_case_whose_kernel_is_not_numba_cannot_be_scanned():
    with pytest.raises(CaseUnsupported, match="thread pool of its own"):
        CpuBackend().occupancy_levels(gemv("library"))


# The CPU variants that call numpy's BLAS (a thread pool of its own); every other CPU kernel
# runs on Numba's threads.
BLAS = {("gemm", "library"), ("gemv", "library"), ("attention", "library"),
        ("attention_causal", "library")}


def test_every_numba_cpu_variant_can_be_scanned_and_only_the_blas_ones_cannot():
    be = CpuBackend()
    for w in registry.workloads().values():
        for v in w.variants.values():
            if "cpu" not in v.impls:
                continue
            case = Case(w, v, "fp64", w.quick_size)
            if (w.name, v.name) in BLAS:
                with pytest.raises(CaseUnsupported):
                    be.occupancy_levels(case)
            else:
                assert len(be.occupancy_levels(case)) == numba.config.NUMBA_NUM_THREADS
