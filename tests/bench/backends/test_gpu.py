"""Every CUDA kernel through CuPy and the runner on small, odd sizes (fresh random inputs,
outputs poisoned, float64 reference). GPU-only: the `gpu` marker skips these with a reason
when no device is present (tests/conftest.py)."""

from __future__ import annotations

import numpy as np
import pytest
from roofbench.bench.suite.runner import run_case
from roofbench.kernels.registry import workloads
from roofbench.kernels.spec import Case
from workload_cases import case_id, gpu_cases

from roofbench.timing import TimerConfig

pytestmark = pytest.mark.gpu

CFG = TimerConfig(warmup_s=0.0, warmup_min_runs=1, min_samples=3, max_samples=5,
                  budget_s=0.05)
# The sizes are each workload's own (Workload.test_sizes.gpu: small, not multiples of any tile
# or pack; rownorm also at a row that takes the scalar path and one that fills onepass's
# registers), the cases derived from the registry: tests/standins/workload_cases.py.
_cases, _id = gpu_cases, case_id


@pytest.fixture(scope="module")
def cupy_backend():
    from roofbench.bench.backends.cupy import CupyBackend

    be = CupyBackend()
    yield be
    be.close()


@pytest.fixture(scope="module")
def numba_backend():
    from roofbench.bench.backends.base import unavailable_reason

    why = unavailable_reason("numba")
    if why:
        pytest.skip(why)
    from roofbench.bench.backends.numba_cuda import NumbaCudaBackend

    return NumbaCudaBackend()


def _validated(backend, case: tuple, seed: int, **kw):
    """Run one (workload, variant, dtype, size) through the runner; skip what the backend or
    the device refuses; assert it validated within tolerance."""
    name, variant, dtype, size = case
    w = workloads()[name]
    c = Case(w, w.variants[variant], dtype, size)
    why = backend.supports(c)
    if why:
        pytest.skip(why)
    rec = run_case(c, backend, None, CFG, np.random.default_rng(seed), **kw)
    if rec.outcome.status == "unsupported" or (
        rec.outcome.status == "error" and "compute capability" in (rec.outcome.error or "")
    ):
        pytest.skip(rec.outcome.error)
    assert rec.outcome.status == "ok" and rec.valid, (
        f"{c.key}: {rec.outcome.status}: {rec.outcome.error}"
    )
    assert rec.outcome.rel_error <= w.tolerance[dtype]
    assert rec.measurement.median_s and rec.measurement.median_s > 0
    return c, rec


@pytest.mark.parametrize("case", _cases("cuda"), ids=_id)
def test_cuda_kernel_validates(cupy_backend, case):
    c, rec = _validated(cupy_backend, case, 11)
    assert (
        len(rec.measurement.launches) == len(c.launches()) and "launches" not in rec.evidence.extra
    )
    for lr in rec.measurement.launches:
        la = lr.facts
        if la.function:
            assert la.registers > 0 and la.local_bytes == 0, la
            assert 0 < la.occupancy.occupancy <= 1
            assert la.occupancy.registers_per_thread == la.registers
    if len(c.launches()) > 1:  # per-launch timings of a pipeline
        assert all(lr.timing and lr.timing.median > 0 for lr in rec.measurement.launches)


@pytest.mark.parametrize("case", _cases("numba_cuda"), ids=_id)
def test_numba_twin_validates(numba_backend, case):
    _validated(numba_backend, case, 12, per_launch=False)


def test_cold_timing_and_clocks(cupy_backend):
    w = workloads()["vector_add"]
    c = Case(w, w.variants["vec4"], "fp32", (1 << 22,))
    rng = np.random.default_rng(3)
    p = cupy_backend.prepare(c, w.make_inputs(c.size, c.dtype, rng))
    try:
        warm = cupy_backend.time(p.run, CFG)
        cold = cupy_backend.time(p.run, TimerConfig(**{**CFG.__dict__, "cold": True}))
    finally:
        p.close()
    assert warm.n >= 3 and cold.n >= 3
    assert warm.config["timer"] == "cuda_events"
    assert "clocks" in cold.config


def test_backend_facts(cupy_backend):
    info = cupy_backend.info()
    assert info["sm_count"] > 0 and info["l2_bytes"] > 0
    assert cupy_backend.memory_budget() > 0
    assert cupy_backend.last_level_cache() == info["l2_bytes"]


def test_onepass_refusal_is_recorded(cupy_backend):
    w = workloads()["rownorm"]
    c = Case(w, w.variants["onepass"], "fp32", (2, 40000))
    why = cupy_backend.supports(c)
    assert why and "fused" in why


def test_pycuda_matches_when_installed():
    from roofbench.bench.backends.base import unavailable_reason

    why = unavailable_reason("pycuda")
    if why:
        pytest.skip(why)
    from roofbench.bench.backends.pycuda import PycudaBackend

    be = PycudaBackend()
    try:
        _validated(be, ("l2norm", "fused", "fp32", ((1 << 20) + 5,)), 5)
    finally:
        be.close()
