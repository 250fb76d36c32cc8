"""Numba CUDA twins in the CUDA simulator, through the real runner (poisoned outputs, float64
reference, every element checked). Run only by tests/kernels/test_cudasim.py, in a process started
with NUMBA_ENABLE_CUDASIM=1 (the simulator must be chosen before numba.cuda is imported).
Sizes are small and odd, a few blocks each: every simulated thread is a Python thread."""

from __future__ import annotations

import os

import numpy as np
import pytest

assert os.environ.get("NUMBA_ENABLE_CUDASIM") == "1", "run through tests/kernels/test_cudasim.py"

from numba import cuda  # noqa: E402  (module global: the simulator swaps it in kernels)
from roofbench.bench.backends.base import open_backend  # noqa: E402
from roofbench.bench.suite.runner import run_case  # noqa: E402
from roofbench.kernels import numba_compat  # noqa: E402, F401  (numpy 2.5 vs numba-cuda 0.30)
from roofbench.kernels.numba_cuda_twins import NumbaTwin, build  # noqa: E402
from roofbench.kernels.registry import workloads  # noqa: E402
from roofbench.kernels.spec import Case  # noqa: E402

from roofbench.timing import TimerConfig  # noqa: E402

# The simulator's times mean nothing: each case is launched for its validation (the runner's
# own launch, poisoned outputs) and once timed, with no warm-up launch (a third of the file's
# simulated launches: 88.6 -> 60.6 s wall, 54.8 -> 34.7 CPU s for the file, loaded machine).
CFG = TimerConfig(warmup_s=0.0, warmup_min_runs=0, min_samples=1, max_samples=1, budget_s=0.0)

CASES = [
    ("vector_add", "scalar", "fp32", (1001,)),
    ("vector_add", "scalar", "fp16", (777,)),
    ("vector_add", "scalar", "fp64", (513,)),
    ("l2norm", "naive", "fp32", (999,)),
    ("l2norm", "naive", "fp16", (517,)),
    ("l2norm", "fused", "fp32", (1003,)),
    ("l2norm", "fused", "fp16", (515,)),
    ("rownorm", "naive", "fp32", (3, 301)),
    ("rownorm", "naive", "fp16", (2, 257)),
    ("rownorm", "fused", "fp32", (3, 517)),
    ("rownorm", "fused", "fp64", (2, 77)),
    ("gemm", "tiled", "fp32", (19, 23, 17)),
    ("gemm", "tiled", "fp16", (33, 17, 21)),
]


@pytest.fixture(scope="module")
def sim():
    b = open_backend("sim")
    assert b.device_name() == "numba-cuda-simulator"
    return b


@pytest.mark.parametrize("kernel,variant,dtype,size", CASES,
                         ids=[f"{k}-{v}-{d}-{'x'.join(map(str, s))}" for k, v, d, s in CASES])
def test_twin_validates(sim, kernel, variant, dtype, size):
    w = workloads()[kernel]
    case = Case(w, w.variants[variant], dtype, size)
    assert sim.supports(case) is None
    rec = run_case(case, sim, None, CFG, np.random.default_rng(7), per_launch=False)
    assert rec.outcome.status == "ok" and rec.valid, rec.outcome.error
    assert rec.outcome.rel_error <= w.tolerance[dtype]
    assert any("simulator" in f for f in rec.measurement.timing.flags)
    assert (rec.measurement.timing.warmup_runs, len(rec.measurement.timing.samples)) == (0, 1)


def test_every_twin_launch_has_a_kernel():
    for w in workloads().values():
        for v in w.variants.values():
            for twin in (v.impls.get("numba_cuda") or {}).values():
                assert isinstance(twin, NumbaTwin)
                for d in ("fp32", "fp16"):
                    assert build(twin.name, d) is not None


@cuda.jit
def short_add(a, b, c, n):  # wrong on purpose: skips the last element
    for i in range(cuda.grid(1), n - 1, cuda.gridsize(1)):
        c[i] = a[i] + b[i]


def test_planted_wrong_twin_is_caught(sim, monkeypatch):
    """A twin that skips the tail leaves poisoned NaNs: the runner records it invalid."""
    import roofbench.bench.backends.numba_cuda as mod

    real = mod.build
    monkeypatch.setattr(mod, "build", lambda name, d: short_add if name == "vadd" else
                        real(name, d))
    w = workloads()["vector_add"]
    rec = run_case(Case(w, w.variants["scalar"], "fp32", (300,)), sim, None, CFG,
                   np.random.default_rng(1), per_launch=False)
    assert rec.outcome.status == "invalid" and not rec.valid, rec.outcome.error
    assert "not written" in rec.outcome.error
