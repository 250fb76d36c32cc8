"""gemv, LLM decode's product: y = W x with W[M, K] the weights, x[K] one token's activations.

2MK FLOPs; DRAM bytes = W (M K x bytes per weight) + x + y, each moved once, so the intensity
is about 2 / (bytes per weight): 0.5 FLOP/B in FP32, 1 in fp16/bf16, 2 in fp8 e4m3, far left of
every ridge. Weights are stored in the case dtype; x and y in the activation dtype, the case
dtype except for fp8 weights, whose activations are fp16 (weight-only fp8, as decode runs it).
Accumulation is FP32 (FP64 for fp64). No amount of occupancy moves it off the bandwidth roof;
only fewer bytes per weight do.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np
from numba import njit, prange

from . import cuda_impl as cu
from .arrays import itemsize
from .spec import Buf, CpuCode, Launch, Size, SizeContext, SuiteSizes, Variant, Workload, ones
from .triton_impls import triton

FASTMATH = {"reassoc", "contract"}
HIDDEN = 4096  # K of the default size: a decoder layer's hidden size
GPU_THREADS = 256  # 8 warps, one row each per step


def act_dtype(dtype: str) -> str:
    """The dtype of x and y for weights stored in ``dtype``."""
    return "fp16" if dtype == "fp8" else dtype


@njit(parallel=True, cache=True, fastmath=FASTMATH)
def _rows(W, x, y, M, K):
    # One row per iteration, a unit-stride dot product that LLVM vectorises as a reduction
    # (fastmath reassoc: vector partial sums); x stays in cache, W streams from memory once.
    for i in prange(M):
        w = W[i]
        s = W.dtype.type(0)
        for k in range(K):
            s += w[k] * x[k]
        y[i] = s


def _library(W, x, y, M, K):
    np.matmul(W, x, out=y)  # the BLAS GEMV numpy links


def _inputs(size: Size, dtype: str) -> dict[str, Buf]:
    m, k = size
    return {"W": Buf((m, k), dtype, "input"), "x": Buf((k,), act_dtype(dtype), "input")}


def _outputs(size: Size, dtype: str) -> dict[str, Buf]:
    m, _ = size
    return {"y": Buf((m,), act_dtype(dtype), "output")}


def _plan(kernel: str):
    def plan(size: Size, dtype: str) -> list[Launch]:
        m, k = size
        return [Launch(kernel, 2 * m * k, ("W", "x"), ("y",), ("W", "x", "y", m, k),
                       note="y = W x")]
    return plan


def _reference(x: dict[str, Any], size: Size, xp: Any) -> dict[str, Any]:
    return {"y": x["W"] @ x["x"]}


def _default_size(ctx: SizeContext) -> Size:
    # W (the main array) reaches the size rule; a row costs K weights and one y value, and x
    # (K values) comes out of the budget first.
    act = itemsize(act_dtype(ctx.dtype))
    row = HIDDEN * itemsize(ctx.dtype)
    rest = dataclasses.replace(ctx, budget_bytes=max(0, ctx.budget_bytes - HIDDEN * act))
    return (rest.count(row, row + act), HIDDEN)


def _grid(ctx: cu.LaunchCtx) -> cu.Dim3:
    """A row per warp, at most one wave of blocks (the kernel is grid-stride: a smaller grid,
    e.g. an occupancy sweep's, is correct too)."""
    warps = GPU_THREADS // 32
    return (max(1, min(cu.ceil_div(int(ctx.size[0]), warps), cu.one_wave(ctx, GPU_THREADS))),
            1, 1)


CUDA = {
    "rows": {"rows": cu.CudaKernel("gemv.cu", "gemv_warp", grid=_grid,
                                   block=cu.block1d(GPU_THREADS), grid_stride=True,
                                   note="a warp per row, 16-byte packs, shuffle reduction")},
    "library": {"library": cu.CudaLibrary("matmul", note="cuBLAS GEMV through cupy.matmul")},
}

# Its parallel CPU kernel as the codegen matrix compiles it (spec.CpuCode).
CPU_CODE = (CpuCode("_rows", lambda t: (*ones((50, 300), t), *ones(300, t), *ones(50, t), 50, 300),
                    1, why="a unit-stride dot product per row in vector FMAs"),)

WORKLOAD = Workload(
    name="gemv",
    description="y = W x, W of M x K (decode: every weight read once per token)",
    size_names=("m", "k"),
    inputs=_inputs,
    outputs=_outputs,
    reference=_reference,
    row_inputs=("W",),  # y = W x, a row of W at a time
    # FP32 accumulation: what is left is the output's rounding (2^-11 for the fp16 y of fp16
    # and fp8 W, 2^-8 bf16), twice; a 16-bit sum is several times that (tests/kernels/
    # test_emu_numerics.py).
    tolerance={"fp64": 1e-12, "fp32": 1e-5, "fp16": 1e-3, "bf16": 7.5e-3, "fp8": 1e-3},
    variants={
        "rows": Variant(
            name="rows",
            description="a row per warp (GPU: 16-byte loads, shuffle sum, grid-stride) or per "
                        "parallel iteration (CPU: vectorised dot product)",
            plan=_plan("rows"),
            impls={"cpu": {"rows": _rows}, "cuda": CUDA["rows"],
                   "triton": triton("triton_stream", rows="gemv")},
            unsupported={"numba_cuda": "no Numba CUDA twin of the gemv kernel"},
        ),
        "library": Variant(
            name="library",
            description="the vendor BLAS GEMV (numpy.matmul / cuBLAS through cupy.matmul)",
            dtypes=("fp32", "fp64", "fp16"),
            plan=_plan("library"),
            impls={"cpu": {"library": _library}, "cuda": CUDA["library"]},
            numba_threads=False,  # numpy's BLAS: a thread pool of its own
            unsupported={"numba_cuda": "the library GEMV runs on the cpu and cuda backends"},
        ),
    },
    default_size=_default_size,
    quick_size=(2048, 1024),
    test_sizes=SuiteSizes(cpu=((1, 1), (37, 1001), (64, 4096)), gpu=((37, 1001), (4099, 4096)),
                          sanitize={"rows": (("fp16", "fp8"), (37, 1001))}),
    flop_convention="gemv: 2 FLOPs per multiply-add (2MK); bytes = W, x and y moved once",
    order=3,
    marker="v",
)
