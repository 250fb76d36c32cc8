"""vector_add: c = a + b. 1 FLOP per element against 3 values moved (1/12 FLOP/byte in FP32)."""

from __future__ import annotations

from typing import Any

from numba import njit, prange

from . import cuda_impl as cu
from . import nt_stores
from . import numba_cuda_twins as nb
from .spec import Buf, CpuCode, Launch, Size, SizeContext, SuiteSizes, Variant, Workload, ones
from .triton_impls import triton


@njit(parallel=True, cache=True)
def _add_cached(a, b, c, n):
    for i in prange(n):
        c[i] = a[i] + b[i]


# An output larger than the last-level cache is written with non-temporal stores (no read for
# ownership; kernels/nt_stores.py), a smaller one by the cached loop above.
_add = nt_stores.NtStoreKernel(_add_cached, nt_stores.add, out_arg=2)


def _io(size: Size, dtype: str) -> dict[str, Buf]:
    return {"a": Buf(size, dtype, "input"), "b": Buf(size, dtype, "input")}


def _out(size: Size, dtype: str) -> dict[str, Buf]:
    return {"c": Buf(size, dtype, "output")}


def _plan_add(kernel: str):
    def plan(size: Size, dtype: str) -> list[Launch]:
        (n,) = size
        return [Launch(kernel, flops=n, reads=("a", "b"), writes=("c",), args=("a", "b", "c", n))]
    return plan


def _reference(x: dict[str, Any], size: Size, xp: Any) -> dict[str, Any]:
    a = x["a"]
    a += x["b"]  # in place on the float64 copy
    return {"c": a}


def _default_size(ctx: SizeContext) -> Size:
    return (ctx.elements(3),)  # a, b, c


# GPU implementations: CUDA C (kernels/cuda/vector_add.cu) and a Numba CUDA twin.
CUDA = {
    "scalar": {"add": cu.elementwise("vector_add.cu", "vadd_scalar", vector=False)},
    "vec4": {"add": cu.elementwise("vector_add.cu", "vadd_vec4",
                                   note="16-byte packs: float4 / 8 x half2 / 16 x fp8")},
}

cuda: Any = None  # numba.cuda, bound by nb.bind when a twin is first built


def _numba_twins(env: nb.TwinEnv) -> dict[str, Any]:
    nb.bind(__name__)  # sets the global `cuda` the kernels name
    acc = env.acc

    @cuda.jit
    def vadd(a, b, c, n):
        for i in range(cuda.grid(1), n, cuda.gridsize(1)):
            c[i] = acc(a[i]) + acc(b[i])

    return {"vadd": vadd}


NUMBA_CUDA = {"scalar": {"add": nb.NumbaTwin("vadd", _numba_twins)}}

# Its parallel CPU kernel as the codegen matrix compiles it (spec.CpuCode).
CPU_CODE = (CpuCode("_add_cached", lambda t: (*ones(1000, t, 3), 1000), 1,
                    why="an elementwise loop on packed vectors"),)

WORKLOAD = Workload(
    name="vector_add",
    description="c = a + b, elementwise (1 FLOP per 3 values moved)",
    size_names=("n",),
    inputs=_io,
    outputs=_out,
    reference=_reference,
    row_inputs=("a", "b"),  # elementwise: the reference in blocks of elements
    tolerance={"fp64": 1e-12, "fp32": 1e-6, "fp16": 1e-3, "bf16": 8e-3, "fp8": 0.07},
    variants={
        "scalar": Variant(
            name="scalar",
            description="one element per thread per iteration, grid-stride",
            plan=_plan_add("add"),
            impls={"cpu": {"add": _add}, "cuda": CUDA["scalar"],
                   "numba_cuda": NUMBA_CUDA["scalar"],
                   "triton": triton("triton_stream", add="add")},
        ),
        # GPU-only: 16-byte packs per thread (float4 / 8 x half2 / 16 x fp8).
        "vec4": Variant(
            name="vec4",
            description="one 16-byte pack per thread per iteration (float4, half2 x 4, "
                        "fp8 x 16), grid-stride",
            dtypes=("fp32", "fp16", "bf16", "fp8"),
            plan=_plan_add("add"),
            impls={"cuda": CUDA["vec4"]},
            native_math=("fp32", "fp16", "bf16"),  # half2 / bfloat162 adds
            unsupported={"cpu": "16-byte vector packs are a GPU variant (the CPU loop is "
                                "vectorised by the compiler)",
                         "numba_cuda": "no Numba CUDA twin of the 16-byte pack kernel"},
            arrow_from="scalar",
        ),
    },
    default_size=_default_size,
    quick_size=(1 << 20,),
    test_sizes=SuiteSizes(cpu=((1,), (17,), (1001,)), gpu=(((1 << 20) + 3,),),
                          sanitize={"scalar": (("fp32",), (1003,)),
                                    "vec4": (("fp16", "fp8"), (1003,))}),
    flop_convention="vector_add: 1 FLOP (the add) per element",
    order=0,
    marker="o",
)
