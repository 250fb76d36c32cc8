"""Numerics judged by the accumulator (issue 58): the tolerance of a kernel's check follows
what its arithmetic should reach, and cases long or adversarial enough that a 16-bit
accumulator fails them run under the host emulation (tests/standins/cuda_emu).

The kernels accumulate in FP32 (FP64 for fp64) whatever the storage type (kernels/cuda/
common.cuh), and the reference is computed in float64 from the stored inputs: what is left
is the rounding of the output to its storage type (at most u = 2^-p relative per element, p
the significand bits) and the FP32 sum's own error, growing as sqrt(K) 2^-24 over a
reduction of K (8e-6 at K = 16384). A tolerance looser than a few u would pass a 16-bit
accumulator: gemv's fp16 check at 2e-3 passed one at K = 4096 (error 1.97e-3).

Adversarial cases: same-sign inputs of large magnitude over long reductions. Their partial
sums grow past where a 16-bit type can still add one more term (fp16's step is 2 at 2048,
bf16's 16), and an unnormalized flash accumulator of 512 keys of V ~ 150 passes fp16's
largest value: a 16-bit accumulator is off by percent or overflows, FP32 is exact to u.
That they fail such an accumulator is shown by scripts/mutate_cuda.py's gemv_act_dtype_acc
(gemv summing in its activation's type: 0.112 against 7.5e-3 at bf16, K = 16384).
"""

from __future__ import annotations

import ctypes
import math

import cuda_tools as ct
import numpy as np
import pytest
from emu_run import emulation_libs, run_emulated
from roofbench.bench.suite.runner import validate
from roofbench.kernels.registry import workloads
from roofbench.kernels.spec import Case

pytestmark = ct.needs_emulation()

# Significand bits of each storage type's output (fp8's gemv writes its fp16 activation).
BITS = {"fp64": 53, "fp32": 24, "fp16": 11, "bf16": 8, "fp8": 4}
OUT = {("gemv", "fp8"): "fp16"}
# Roundings of storage-typed intermediates between the inputs and the output, in u: the
# naive attention stores S (its absolute error becomes P's relative error after the exp,
# times |S| of up to ~3 here) and P; flash rounds P to the mma's 16-bit type.
ROUNDINGS = {"attention": 5, "attention_causal": 5}
# The longest reduction each workload's validation meets in the tests (K, hidden, N).
LONGEST = 1 << 16


def accumulator_bound(workload: str, dtype: str, k: int = LONGEST) -> float:
    """What an FP32 (FP64) accumulation reaches, as a relative norm error: two output
    roundings' worth of u (one per element, and the reference's distance to the nearest
    representable result), one per rounded intermediate, and the sum's sqrt(k) growth."""
    u = 2.0 ** -BITS[OUT.get((workload, dtype), dtype)]
    acc = 2.0 ** -(53 if dtype == "fp64" else 24)
    return (2 + ROUNDINGS.get(workload, 0)) * u + 4 * math.sqrt(k) * acc


@pytest.mark.parametrize("name", ["gemv", "gemm", "rownorm", "attention", "attention_causal"])
def test_tolerance_follows_the_accumulator(name):
    """Each 16- and 8-bit dtype's tolerance is within what an FP32 accumulation reaches
    (with its output rounding): a 16-bit accumulator's error, several times that, cannot
    pass it. (fp32's and fp64's own tolerances are orders below any narrower sum's.)"""
    w = workloads()[name]
    loose = {d: (t, accumulator_bound(name, d)) for d, t in w.tolerance.items()
             if d in ("fp16", "bf16", "fp8") and t > accumulator_bound(name, d)}
    assert not loose, f"{name}: tolerance above the accumulator's bound: {loose}"


@pytest.fixture(scope="module")
def libs() -> dict[str, ctypes.CDLL]:
    return emulation_libs(("gemv.cu", "gemm.cu", "rownorm.cu", "attention.cu"))


def same_sign(case: Case, rng: np.random.Generator) -> dict[str, np.ndarray]:
    """The workload's inputs made positive (magnitudes 0.25-1): every partial sum grows."""
    return {n: np.abs(a) for n, a in case.workload.make_inputs(case.size, case.dtype,
                                                                 rng).items()}


def large_v(case: Case, rng: np.random.Generator) -> dict[str, np.ndarray]:
    """Q and K small (the scores nearly equal: every key's weight near 1 before the
    normalization), V of 100-200: the unnormalized output sum of N keys reaches 150 N."""
    x = same_sign(case, rng)
    return {"Q": x["Q"] * 0.05, "K": x["K"] * 0.05, "V": 100 + 100 * x["V"]}


ADVERSARIAL = (
    [("gemv", "rows", d, (5, 16384)) for d in ("fp16", "bf16", "fp8")]
    + [("gemm", v, d, (3, 5, 16384)) for v in ("naive", "tiled") for d in ("fp16", "bf16")]
    + [("gemm", "regblock", "fp16", (3, 5, 4096)), ("gemm", "tensor_mma", "fp16", (3, 5, 512))]
    + [("rownorm", v, d, (2, 16384)) for v in ("naive", "fused", "onepass")
       for d in ("fp16", "bf16")]
    # flash only: its output sum is unnormalized until the end (naive's P is normalized)
    + [(w, "flash", "fp16", (1, 1, 512, 64)) for w in ("attention", "attention_causal")]
)


@pytest.mark.parametrize("name,variant,dtype,size", ADVERSARIAL,
                         ids=[f"{w}-{v}-{d}-{'x'.join(map(str, s))}"
                              for w, v, d, s in ADVERSARIAL])
def test_long_same_sign_reductions_stay_within_the_accumulator(libs, name, variant, dtype,
                                                               size):
    w = workloads()[name]
    case = Case(w, w.variants[variant], dtype, size)
    rng = np.random.default_rng(58)
    inputs = (large_v if name.startswith("attention") else same_sign)(case, rng)
    got, outs = run_emulated(libs, case, rng, inputs=inputs)
    ok, err, why = validate(case, outs, w.expected(got, size, dtype))
    assert ok, f"{case.key}: {why}"
