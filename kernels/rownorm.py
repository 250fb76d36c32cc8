"""rownorm, the book's row-wise fusion example: y = x / sqrt(sum(x^2) + eps) per row of
x[batch, hidden].

FLOP convention: per element 3 FLOPs (square, accumulate, scale); per row 1 FLOP (+eps), the
(r)sqrt is not counted. Bytes per element (FP32), the per-row terms stated apart:
- naive (square, row-reduce, rsqrt, scale; 4 launches): 20 B/elt (+16 B/row) -> 0.15 FLOP/B
- fused (one pass per row to reduce, x read again to scale): 12 B/elt -> 0.25 FLOP/B
- onepass (row kept on chip, x read once): 8 B/elt -> 0.375 FLOP/B
The row sums and scales are kept in fp32 (fp64 for fp64 inputs).
The accounting is the book's minimum per variant: fused's second read of x is counted as DRAM
traffic, although for realistic hidden sizes it often hits L2 (GPU) or L1/L2 (CPU); a fused
point may then sit above the DRAM roof it is held against.
"""

from __future__ import annotations

import math

import numpy as np
from numba import njit, prange

from . import cuda_impl as cu
from . import numba_cuda_twins as nb
from .spec import Buf, Launch, Size, SizeContext, Variant, Workload, itemsize

EPS = 1e-6
FLOP_CONVENTION = ("rownorm: 3 FLOPs per element (square, accumulate, scale) + 1 per row (+eps); "
                   "rsqrt/sqrt not counted; per-row bytes (row sums, scales) counted; fused's "
                   "second read of x counted as DRAM traffic though it may hit cache")


@njit(parallel=True, cache=True)
def _square(x, sq, batch, hidden):
    for i in prange(batch):
        for j in range(hidden):
            sq[i, j] = x[i, j] * x[i, j]


@njit(parallel=True, cache=True)
def _rowsum(sq, sums, batch, hidden):
    for i in prange(batch):
        s = sums.dtype.type(0)
        for j in range(hidden):
            s += sq[i, j]
        sums[i] = s


@njit(parallel=True, cache=True)
def _rsqrt(sums, scale, batch, eps):
    for i in prange(batch):
        scale[i] = 1.0 / math.sqrt(sums[i] + eps)


@njit(parallel=True, cache=True)
def _scale(x, scale, y, batch, hidden):
    for i in prange(batch):
        r = scale[i]
        for j in range(hidden):
            y[i, j] = x[i, j] * r


@njit(parallel=True, cache=True)
def _fused(x, y, batch, hidden, eps):
    for i in prange(batch):
        s = 0.0
        for j in range(hidden):
            s += x[i, j] * x[i, j]
        r = 1.0 / math.sqrt(s + eps)
        for j in range(hidden):
            y[i, j] = x[i, j] * r


@njit(parallel=True, cache=True, fastmath={"reassoc", "contract"})
def _onepass(x, y, batch, hidden, eps):
    # One read of each row from memory. The row (16 KiB in FP32 at hidden 4096) stays in
    # L1/L2 while it is reduced, then it is scaled from there into y. The reduction keeps
    # vector partial sums in registers (fastmath reassoc: the sum's order differs from a
    # sequential loop's, within the tolerance), in the storage precision. No scratch row and
    # no allocation per call: the cache is the on-chip row. On a CPU the fused kernel moves
    # the same DRAM bytes (its second read of x hits the cache too); what sets the two apart
    # here is that fused is the book's loop as written, an ordered scalar sum whose add
    # latency, not memory, bounds it (measured on the issue-9 Intel VM: fused fp32 122 ms vs
    # onepass 148 ms before; the old onepass also copied each row into a scratch array
    # allocated per chunk inside the parallel loop).
    for i in prange(batch):
        row = x[i]
        out = y[i]
        s = x.dtype.type(0)
        for j in range(hidden):
            s += row[j] * row[j]
        r = x.dtype.type(1.0 / math.sqrt(s + eps))
        for j in range(hidden):
            out[j] = row[j] * r


def _acc(dtype: str) -> str:
    return "fp64" if dtype == "fp64" else "fp32"


def _inputs(size: Size, dtype: str) -> dict[str, Buf]:
    return {"x": Buf(size, dtype, "input")}


def _outputs(size: Size, dtype: str) -> dict[str, Buf]:
    return {"y": Buf(size, dtype, "output")}


def _naive_temps(size: Size, dtype: str) -> dict[str, Buf]:
    batch, _ = size
    return {"sq": Buf(size, dtype), "sums": Buf((batch,), _acc(dtype)),
            "scale": Buf((batch,), _acc(dtype))}


def _naive_plan(size: Size, dtype: str) -> list[Launch]:
    b, h = size
    return [
        Launch("square", b * h, ("x",), ("sq",), ("x", "sq", b, h), note="sq = x*x"),
        Launch("rowsum", b * h, ("sq",), ("sums",), ("sq", "sums", b, h),
               note="sums = row-sum(sq)"),
        Launch("rsqrt", b, ("sums",), ("scale",), ("sums", "scale", b, EPS),
               note="scale = 1/sqrt(sums + eps)"),
        Launch("scale", b * h, ("x", "scale"), ("y",), ("x", "scale", "y", b, h),
               note="y = x * scale"),
    ]


def _fused_plan(size: Size, dtype: str) -> list[Launch]:
    b, h = size
    return [Launch("fused", 3 * b * h + b, ("x", "x"), ("y",), ("x", "y", b, h, EPS),
                   note="reduce the row, then read x again to scale")]


def _onepass_plan(size: Size, dtype: str) -> list[Launch]:
    b, h = size
    return [Launch("onepass", 3 * b * h + b, ("x",), ("y",), ("x", "y", b, h, EPS),
                   note="row kept on chip: x read once")]


def _reference(x: dict[str, np.ndarray], size: Size) -> dict[str, np.ndarray]:
    # In place on the float64 copy: a 10^8-element case holds no extra temporaries.
    v = x["x"].astype(np.float64)
    sums = np.einsum("ij,ij->i", v, v)
    v /= np.sqrt(sums + EPS)[:, None]
    return {"y": v}


def _row_footprint(hidden: int, dtype: str) -> int:
    """Bytes one row costs the largest variant (naive: x, sq, y and its row sum and scale),
    from the buffer declarations themselves, so the default size can never outgrow the budget
    the runner checks it against."""
    bufs = {**_inputs((1, hidden), dtype), **_outputs((1, hidden), dtype),
            **_naive_temps((1, hidden), dtype)}
    return sum(b.nbytes for b in bufs.values())


def _default_size(ctx: SizeContext) -> Size:
    hidden = 4096
    batch = ctx.count(hidden * itemsize(ctx.dtype), _row_footprint(hidden, ctx.dtype))
    return (batch, hidden)


CPU = {"square": _square, "rowsum": _rowsum, "rsqrt": _rsqrt, "scale": _scale}

WORKLOAD = Workload(
    name="rownorm",
    description="y = x / sqrt(sum(x^2) + eps) per row of x[batch, hidden]",
    size_names=("batch", "hidden"),
    inputs=_inputs,
    outputs=_outputs,
    reference=_reference,
    tolerance={"fp64": 1e-12, "fp32": 1e-5, "fp16": 2e-3, "bf16": 1.5e-2, "fp8": 0.1},
    variants={
        "naive": Variant(
            name="naive",
            description="square, row-reduce, rsqrt, scale: 4 launches through memory",
            dtypes=("fp32", "fp64", "fp16", "bf16", "fp8"),
            plan=_naive_plan,
            temps=_naive_temps,
            impls={"cpu": CPU, "cuda": cu.ROWNORM["naive"], "numba_cuda": nb.ROWNORM["naive"]},
        ),
        "fused": Variant(
            name="fused",
            description="one pass per row to reduce, x read again to scale (the book's)",
            dtypes=("fp32", "fp64", "fp16", "bf16", "fp8"),
            plan=_fused_plan,
            impls={"cpu": {"fused": _fused}, "cuda": cu.ROWNORM["fused"],
                   "numba_cuda": nb.ROWNORM["fused"]},
            arrow_from="naive",
        ),
        "onepass": Variant(
            name="onepass",
            description="row kept on chip, x read once",
            dtypes=("fp32", "fp64", "fp16", "bf16", "fp8"),
            plan=_onepass_plan,
            impls={"cpu": {"onepass": _onepass}, "cuda": cu.ROWNORM["onepass"]},
            unsupported={"numba_cuda": "no Numba CUDA twin of the register-resident row"},
            # CUDA C keeps a row in one block's registers: larger rows are refused.
            refuse=cu.onepass_refuse,
            arrow_from="fused",
        ),
    },
    default_size=_default_size,
    quick_size=(512, 1024),
    flop_convention=FLOP_CONVENTION,
)
