"""Numba CUDA twins of the CUDA C kernels: vector_add, l2norm (naive, fused), rownorm (naive,
fused) and the shared-memory tiled GEMM, for fp32, fp64 and fp16.

They run on a GPU (``--backend numba``) and in Numba's CUDA simulator (``--backend sim``,
``NUMBA_ENABLE_CUDASIM=1``), where each thread is a Python thread: keep simulator cases to a
few blocks. ``numba.cuda`` is imported only inside :func:`build` (the workload registry imports
this module on every run, and the simulator must be chosen before ``numba.cuda`` is first
imported). Math is FP32 (FP64 for fp64), matching the CUDA C kernels.

The workload tables hold :class:`NumbaTwin` descriptors; the backend turns one into a compiled
kernel with ``build(twin.name, dtype)`` and a launch geometry with ``twin.geometry``.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from functools import cache
from typing import Any

from . import numba_compat  # noqa: F401  (numpy 2.5 vs numba-cuda 0.30: before any compile)
from .spec import Size

THREADS = 256
TILE = 16  # GEMM tile edge (16 x 16 threads)


@dataclass(frozen=True)
class NumbaTwin:
    """A Numba CUDA kernel standing for one launch.

    ``shape``: "stride" (1-D grid-stride over ``elems(size)`` items), "row" (one block per row
    of a [rows, cols] size) or "gemm" (TILE x TILE blocks over C[M, N]).
    """

    name: str
    shape: str = "stride"
    elems: Callable[[Size], int] = lambda size: int(math.prod(size))

    def geometry(self, size: Size, sm_count: int, max_blocks: int | None = None,
                 threads: int = THREADS) -> tuple[tuple[int, ...], tuple[int, ...]]:
        """(grid, block). ``max_blocks`` caps grid-stride grids (the simulator uses a few)."""
        if self.shape == "gemm":
            m, n, _ = size
            return (-(-n // TILE), -(-m // TILE)), (TILE, TILE)
        if self.shape == "row":
            return (int(size[0]),), (threads,)
        blocks = max(1, min(-(-self.elems(size) // threads), sm_count * (2048 // threads)))
        if max_blocks is not None:
            blocks = min(blocks, max_blocks)
        return (blocks,), (threads,)


DTYPES = ("fp64", "fp32", "fp16")

VECTOR_ADD = {"scalar": {"add": NumbaTwin("vadd")}}
L2NORM = {
    "naive": {"square": NumbaTwin("square"), "add": NumbaTwin("add"),
              "sqrt": NumbaTwin("sqrt")},
    "fused": {"fused": NumbaTwin("l2_fused")},
}
ROWNORM = {
    "naive": {"square": NumbaTwin("rn_square", "row"), "rowsum": NumbaTwin("rn_rowsum", "row"),
              "rsqrt": NumbaTwin("rn_rsqrt", elems=lambda size: int(size[0])),
              "scale": NumbaTwin("rn_scale", "row")},
    "fused": {"fused": NumbaTwin("rn_fused", "row")},
}
GEMM = {"tiled": {"tiled": NumbaTwin("gemm_tiled", "gemm")}}


@cache
def build(name: str, dtype: str) -> Any:
    """The compiled (lazily, on first launch) Numba CUDA kernel ``name`` for ``dtype``."""
    if dtype not in DTYPES:
        raise KeyError(f"no Numba CUDA twin for {dtype} (has {', '.join(DTYPES)})")
    return _kernels(dtype)[name]


cuda: Any = None  # numba.cuda, bound on first build (the simulator swaps module globals)


@cache
def _kernels(dtype: str) -> dict[str, Any]:
    global cuda
    import numba
    from numba import cuda as _cuda

    cuda = _cuda

    acc = numba.float64 if dtype == "fp64" else numba.float32
    threads, tile = THREADS, TILE

    @cuda.jit
    def vadd(a, b, c, n):
        for i in range(cuda.grid(1), n, cuda.gridsize(1)):
            c[i] = acc(a[i]) + acc(b[i])

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

    @cuda.jit(device=True)
    def block_sum(v, part):
        """Tree reduction in shared memory; every thread gets the sum."""
        t = cuda.threadIdx.x
        part[t] = v
        cuda.syncthreads()
        s = threads // 2
        while s > 0:
            if t < s:
                part[t] += part[t + s]
            cuda.syncthreads()
            s //= 2
        total = part[0]
        cuda.syncthreads()  # part[] is reused by the caller's next reduction
        return total

    @cuda.jit
    def rn_square(x, sq, rows, cols):
        r = cuda.blockIdx.x
        for j in range(cuda.threadIdx.x, cols, cuda.blockDim.x):
            v = acc(x[r, j])
            sq[r, j] = v * v

    @cuda.jit
    def rn_rowsum(sq, sums, rows, cols):
        part = cuda.shared.array(threads, acc)
        r = cuda.blockIdx.x
        s = acc(0)
        for j in range(cuda.threadIdx.x, cols, cuda.blockDim.x):
            s += acc(sq[r, j])
        total = block_sum(s, part)
        if cuda.threadIdx.x == 0:
            sums[r] = total

    @cuda.jit
    def rn_rsqrt(sums, scale, rows, eps):
        for i in range(cuda.grid(1), rows, cuda.gridsize(1)):
            scale[i] = acc(1.0) / math.sqrt(acc(sums[i]) + acc(eps))

    @cuda.jit
    def rn_scale(x, scale, y, rows, cols):
        r = cuda.blockIdx.x
        sc = acc(scale[r])
        for j in range(cuda.threadIdx.x, cols, cuda.blockDim.x):
            y[r, j] = acc(x[r, j]) * sc

    @cuda.jit
    def rn_fused(x, y, rows, cols, eps):
        part = cuda.shared.array(threads, acc)
        r = cuda.blockIdx.x
        s = acc(0)
        for j in range(cuda.threadIdx.x, cols, cuda.blockDim.x):
            v = acc(x[r, j])
            s += v * v
        sc = acc(1.0) / math.sqrt(block_sum(s, part) + acc(eps))
        for j in range(cuda.threadIdx.x, cols, cuda.blockDim.x):  # x read a second time
            y[r, j] = acc(x[r, j]) * sc

    @cuda.jit
    def gemm_tiled(A, B, C, M, N, K):
        sA = cuda.shared.array((tile, tile), acc)
        sB = cuda.shared.array((tile, tile), acc)
        tx, ty = cuda.threadIdx.x, cuda.threadIdx.y
        col = cuda.blockIdx.x * tile + tx
        row = cuda.blockIdx.y * tile + ty
        s = acc(0)
        for k0 in range(0, K, tile):
            ka, kb = k0 + tx, k0 + ty
            sA[ty, tx] = acc(A[row, ka]) if row < M and ka < K else acc(0)
            sB[ty, tx] = acc(B[kb, col]) if kb < K and col < N else acc(0)
            cuda.syncthreads()
            for k in range(tile):
                s += sA[ty, k] * sB[k, tx]
            cuda.syncthreads()
        if row < M and col < N:
            C[row, col] = s

    return {"vadd": vadd, "square": square, "add": add, "sqrt": sqrt, "l2_fused": l2_fused,
            "rn_square": rn_square, "rn_rowsum": rn_rowsum, "rn_rsqrt": rn_rsqrt,
            "rn_scale": rn_scale, "rn_fused": rn_fused, "gemm_tiled": gemm_tiled}
