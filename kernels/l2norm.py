"""l2norm, the book's elementwise fusion example: out = sqrt(a^2 + b^2).

FLOP convention: a multiply or an add is 1 FLOP; sqrt is a special-function op and is NOT
counted (counting it would make the fused case 4/12 instead of 3/12 FLOP/byte).

- naive: 4 launches with real intermediates in memory: t1 = a*a, t2 = b*b, t3 = t1 + t2,
  out = sqrt(t3) -> 3 FLOPs / 36 B per element in FP32 = 0.0833 FLOP/byte.
- fused: 1 launch reading a and b, writing out -> 3 FLOPs / 12 B = 0.25 FLOP/byte.
The fused pipeline moves 3x fewer bytes; a memory-bound device should run it ~3x faster.
"""

from __future__ import annotations

import math
from typing import Any

from numba import njit, prange

from . import cuda_impl as cu
from . import nt_stores
from . import numba_cuda_twins as nb
from .spec import Buf, CpuCode, Launch, Size, SizeContext, SuiteSizes, Variant, Workload, ones
from .triton_impls import triton

FLOP_CONVENTION = "l2norm: mul and add = 1 FLOP each; sqrt not counted (special-function op)"


@njit(parallel=True, cache=True)
def _square_cached(x, y, n):
    for i in prange(n):
        y[i] = x[i] * x[i]


@njit(parallel=True, cache=True)
def _add_cached(x, y, z, n):
    for i in prange(n):
        z[i] = x[i] + y[i]


@njit(parallel=True, cache=True)
def _sqrt_cached(x, y, n):
    for i in prange(n):
        y[i] = math.sqrt(x[i])


@njit(parallel=True, cache=True)
def _fused_cached(a, b, out, n):
    for i in prange(n):
        out[i] = math.sqrt(a[i] * a[i] + b[i] * b[i])


# One rule for naive and fused alike: an output larger than the last-level cache is written
# with non-temporal stores (no read for ownership; kernels/nt_stores.py), a smaller one by the
# cached loops above.
_square = nt_stores.NtStoreKernel(_square_cached, nt_stores.square, out_arg=1)
_add = nt_stores.NtStoreKernel(_add_cached, nt_stores.add, out_arg=2)
_sqrt = nt_stores.NtStoreKernel(_sqrt_cached, nt_stores.sqrt, out_arg=1)
_fused = nt_stores.NtStoreKernel(_fused_cached, nt_stores.hypot, out_arg=2)


def _inputs(size: Size, dtype: str) -> dict[str, Buf]:
    return {"a": Buf(size, dtype, "input"), "b": Buf(size, dtype, "input")}


def _outputs(size: Size, dtype: str) -> dict[str, Buf]:
    return {"out": Buf(size, dtype, "output")}


def _naive_temps(size: Size, dtype: str) -> dict[str, Buf]:
    return {t: Buf(size, dtype) for t in ("t1", "t2", "t3")}


def _naive_plan(size: Size, dtype: str) -> list[Launch]:
    (n,) = size
    return [
        Launch("square", n, ("a",), ("t1",), ("a", "t1", n), note="t1 = a*a"),
        Launch("square", n, ("b",), ("t2",), ("b", "t2", n), note="t2 = b*b"),
        Launch("add", n, ("t1", "t2"), ("t3",), ("t1", "t2", "t3", n), note="t3 = t1 + t2"),
        Launch("sqrt", 0, ("t3",), ("out",), ("t3", "out", n), note="out = sqrt(t3)"),
    ]


def _fused_plan(size: Size, dtype: str) -> list[Launch]:
    (n,) = size
    return [Launch("fused", 3 * n, ("a", "b"), ("out",), ("a", "b", "out", n),
                   note="out = sqrt(a*a + b*b)")]


def _reference(x: dict[str, Any], size: Size, xp: Any) -> dict[str, Any]:
    # In place on the float64 copies: a 10^8-element case holds no extra temporaries.
    a, b = x.pop("a"), x.pop("b")
    a *= a
    b *= b
    a += b
    del b
    return {"out": xp.sqrt(a, out=a)}


def _default_size(ctx: SizeContext) -> Size:
    # naive holds 6 arrays of n (a, b, t1, t2, t3, out).
    return (ctx.elements(6),)


# GPU implementations: CUDA C (kernels/cuda/l2norm.cu) and Numba CUDA twins.
CUDA = {
    "naive": {"square": cu.elementwise("l2norm.cu", "l2_square"),
              "add": cu.elementwise("l2norm.cu", "l2_add"),
              "sqrt": cu.elementwise("l2norm.cu", "l2_sqrt")},
    "fused": {"fused": cu.elementwise("l2norm.cu", "l2_fused")},
}

cuda: Any = None  # numba.cuda, bound by nb.bind when a twin is first built


def _numba_twins(env: nb.TwinEnv) -> dict[str, Any]:
    nb.bind(__name__)  # sets the global `cuda` the kernels name
    acc = env.acc

    @cuda.jit
    def square(x, y, n):
        for i in range(cuda.grid(1), n, cuda.gridsize(1)):
            v = acc(x[i])
            y[i] = v * v

    @cuda.jit
    def add(x, y, z, n):
        for i in range(cuda.grid(1), n, cuda.gridsize(1)):
            z[i] = acc(x[i]) + acc(y[i])

    @cuda.jit
    def sqrt(x, y, n):
        for i in range(cuda.grid(1), n, cuda.gridsize(1)):
            y[i] = math.sqrt(acc(x[i]))

    @cuda.jit
    def l2_fused(a, b, out, n):
        for i in range(cuda.grid(1), n, cuda.gridsize(1)):
            va, vb = acc(a[i]), acc(b[i])
            out[i] = math.sqrt(va * va + vb * vb)

    return {"square": square, "add": add, "sqrt": sqrt, "l2_fused": l2_fused}


NUMBA_CUDA = {
    "naive": {"square": nb.NumbaTwin("square", _numba_twins),
              "add": nb.NumbaTwin("add", _numba_twins),
              "sqrt": nb.NumbaTwin("sqrt", _numba_twins)},
    "fused": {"fused": nb.NumbaTwin("l2_fused", _numba_twins)},
}

CPU = {"square": _square, "add": _add, "sqrt": _sqrt, "fused": _fused}

# Its parallel CPU kernels as the codegen matrix compiles them (spec.CpuCode).
_VEC = "an elementwise loop on packed vectors"
CPU_CODE = (
    CpuCode("_square_cached", lambda t: (*ones(1000, t, 2), 1000), 1, why=_VEC),
    CpuCode("_add_cached", lambda t: (*ones(1000, t, 3), 1000), 1, why=_VEC),
    CpuCode("_sqrt_cached", lambda t: (*ones(1000, t, 2), 1000), 1, why=_VEC),
    CpuCode("_fused_cached", lambda t: (*ones(1000, t, 3), 1000), 1, why=_VEC),
)

WORKLOAD = Workload(
    name="l2norm",
    description="out = sqrt(a^2 + b^2), elementwise: 4 launches (naive) vs 1 (fused)",
    size_names=("n",),
    inputs=_inputs,
    outputs=_outputs,
    reference=_reference,
    tolerance={"fp64": 1e-12, "fp32": 1e-6, "fp16": 2e-3, "bf16": 1.5e-2, "fp8": 0.1},
    variants={
        "naive": Variant(
            name="naive",
            description="4 launches, intermediates t1, t2, t3 round-trip through memory",
            plan=_naive_plan,
            temps=_naive_temps,
            impls={"cpu": {k: CPU[k] for k in ("square", "add", "sqrt")},
                   "cuda": CUDA["naive"], "numba_cuda": NUMBA_CUDA["naive"],
                   "triton": triton("triton_stream", square="square", add="add", sqrt="sqrt")},
        ),
        "fused": Variant(
            name="fused",
            description="1 launch: read a and b once, write out once",
            plan=_fused_plan,
            impls={"cpu": {"fused": _fused}, "cuda": CUDA["fused"],
                   "numba_cuda": NUMBA_CUDA["fused"],
                   "triton": triton("triton_stream", fused="fused")},
            arrow_from="naive",
        ),
    },
    default_size=_default_size,
    quick_size=(1 << 20,),
    test_sizes=SuiteSizes(cpu=((1,), (17,), (1001,)), gpu=(((1 << 20) + 5,),),
                          sanitize={"naive": (("fp32",), (2051,)),
                                    "fused": (("bf16",), (2051,))}),
    flop_convention=FLOP_CONVENTION,
    order=1,
    marker="s",
)
