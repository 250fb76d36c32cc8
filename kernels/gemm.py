"""gemm: C = A B with A[M, K], B[K, N], C[M, N].

2MNK FLOPs; minimum DRAM traffic (MK + KN + MN) x itemsize, i.e. every matrix moved once —
what a perfectly tiled kernel would move. AI for square n is 2n / (3 x itemsize): ~683
FLOP/byte in FP32 at n = 4096, far right of any ridge, so a GEMM is held against the compute
roof and its efficiency says how close the kernel comes to it.
"""

from __future__ import annotations

import numpy as np
from numba import njit, prange

from . import cuda_impl as cu
from . import numba_cuda_twins as nb
from .spec import Buf, Launch, Size, SizeContext, Variant, Workload

TILE_I, TILE_K, TILE_J = 64, 128, 256  # CPU cache blocking (L1/L2 sized for FP32/FP64)


@njit(parallel=True, cache=True)
def _naive(A, B, C, M, N, K):
    for i in prange(M):
        for j in range(N):
            acc = A[i, 0] * 0
            for k in range(K):
                acc += A[i, k] * B[k, j]
            C[i, j] = acc


@njit(parallel=True, cache=True)
def _tiled(A, B, C, M, N, K):
    # Cache tiles: a TILE_I x TILE_K block of A and a TILE_K x TILE_J block of B are reused
    # from cache; the inner j loop is unit-stride so it vectorises.
    n_tiles = (M + TILE_I - 1) // TILE_I
    for t in prange(n_tiles):
        i0 = t * TILE_I
        i1 = min(i0 + TILE_I, M)
        for i in range(i0, i1):
            for j in range(N):
                C[i, j] = 0
        for k0 in range(0, K, TILE_K):
            k1 = min(k0 + TILE_K, K)
            for j0 in range(0, N, TILE_J):
                j1 = min(j0 + TILE_J, N)
                for i in range(i0, i1):
                    for k in range(k0, k1):
                        a = A[i, k]
                        for j in range(j0, j1):
                            C[i, j] += a * B[k, j]


@njit(parallel=True, cache=True)
def _regblock(A, B, C, M, N, K):
    # 4 rows of C per block: each B[k, j] loaded once feeds 4 FMAs held in registers.
    n_blocks = (M + 3) // 4
    for t in prange(n_blocks):
        i0 = t * 4
        rows = min(4, M - i0)
        for j0 in range(0, N, TILE_J):
            j1 = min(j0 + TILE_J, N)
            for i in range(i0, i0 + rows):
                for j in range(j0, j1):
                    C[i, j] = 0
            if rows == 4:
                for k in range(K):
                    a0 = A[i0, k]
                    a1 = A[i0 + 1, k]
                    a2 = A[i0 + 2, k]
                    a3 = A[i0 + 3, k]
                    for j in range(j0, j1):
                        b = B[k, j]
                        C[i0, j] += a0 * b
                        C[i0 + 1, j] += a1 * b
                        C[i0 + 2, j] += a2 * b
                        C[i0 + 3, j] += a3 * b
            else:
                for i in range(i0, i0 + rows):
                    for k in range(K):
                        a = A[i, k]
                        for j in range(j0, j1):
                            C[i, j] += a * B[k, j]


def _library(A, B, C, M, N, K):
    np.matmul(A, B, out=C)  # the BLAS numpy links (OpenBLAS/MKL): the library baseline


def _inputs(size: Size, dtype: str) -> dict[str, Buf]:
    m, n, k = size
    return {"A": Buf((m, k), dtype, "input"), "B": Buf((k, n), dtype, "input")}


def _outputs(size: Size, dtype: str) -> dict[str, Buf]:
    m, n, _ = size
    return {"C": Buf((m, n), dtype, "output")}


def _plan(kernel: str):
    def plan(size: Size, dtype: str) -> list[Launch]:
        m, n, k = size
        return [Launch(kernel, 2 * m * n * k, ("A", "B"), ("C",), ("A", "B", "C", m, n, k))]
    return plan


def _reference(x: dict[str, np.ndarray], size: Size) -> dict[str, np.ndarray]:
    return {"C": x["A"].astype(np.float64) @ x["B"].astype(np.float64)}


def _default_size(ctx: SizeContext) -> Size:
    if ctx.quick:
        return (256, 256, 256)
    # The naive CPU loop runs at well under 1 GFLOP/s: a smaller problem keeps `make bench`
    # short and is still far beyond the caches for its strided walk of B.
    cpu_n = 512 if ctx.variant == "naive" else 1024
    n = 4096 if ctx.kind == "gpu" else cpu_n
    return (n, n, n)


def _variant(name: str, description: str, fn, arrow_from: str | None = None) -> Variant:
    # GPU implementations: CUDA C for every variant (fp16/bf16 stored, FP32 math on CUDA
    # cores), a Numba CUDA twin of the tiled kernel; cuBLAS (cupy.matmul) as the library.
    gpu_dtypes = ("fp16",) if name == "library" else ("fp16", "bf16")
    impls = {"cpu": {name: fn}, "cuda": cu.GEMM[name]}
    if name in nb.GEMM:
        impls["numba_cuda"] = nb.GEMM[name]
    return Variant(name=name, description=description, dtypes=("fp32", "fp64", *gpu_dtypes),
                   plan=_plan(name), impls=impls, arrow_from=arrow_from,
                   unit_on=_library_unit if name == "library" else None)


def _library_unit(kind: str, dtype: str) -> str:
    """cuBLAS runs HGEMM/BF16 and, from sm_80, DGEMM on tensor cores (an H200 measured
    63 TFLOP/s FP64 against a 33.5 CUDA-core datasheet peak), and SGEMM on CUDA cores unless
    TF32 is enabled; a CPU BLAS runs on the SIMD lanes. A device without the tensor roof of a
    precision falls back to its CUDA-core roof (runner.apply_roofs)."""
    return "tensor" if kind == "gpu" and dtype in ("fp16", "bf16", "fp64") else "simt"


def _tensor_variant(name: str = "tensor") -> Variant:
    """`tensor`: the device's native tensor-core path (wgmma + TMA on sm_90, mma.sync on
    sm_80/89); `tensor_mma`: the legacy mma.sync kernel on Hopper, plotted beside it."""
    if name == "tensor":
        description = ("tensor cores, FP32 accumulate: sm_90 wgmma m64n256 (fp16/bf16 k16, fp8 "
                       "e4m3 k32) fed by TMA through a 3-4 stage mbarrier ring, producer + 2 "
                       "consumer warpgroups, 128x256 tiles; sm_80/89 mma.sync m16n8k16, "
                       "m16n8k32 e4m3 (sm_89), 128x128 tiles")
    else:
        description = ("legacy tensor-core path on Hopper: mma.sync m16n8k16 fp16/bf16 (fp8 is "
                       "lowered to FP16 HMMA there), 128x128 tiles, double-buffered")
    return Variant(name=name, dtypes=("fp16", "bf16", "fp8"), plan=_plan("tensor"),
                   description=description, impls={"cuda": cu.GEMM[name]}, unit="tensor",
                   unsupported={"cpu": "tensor cores are GPU-only",
                                "numba_cuda": "Numba CUDA exposes no mma instructions"},
                   arrow_from="regblock" if name == "tensor" else None)


WORKLOAD = Workload(
    name="gemm",
    description="C = A B (M x K times K x N)",
    size_names=("m", "n", "k"),
    inputs=_inputs,
    outputs=_outputs,
    reference=_reference,
    tolerance={"fp64": 1e-12, "fp32": 1e-5, "fp16": 2e-3, "bf16": 1.5e-2, "fp8": 0.1},
    variants={
        "naive": _variant("naive", "one dot product per output element", _naive),
        "tiled": _variant("tiled", "cache/shared-memory tiles of A and B reused", _tiled),
        "regblock": _variant("regblock", "register blocking: each B load feeds 4 FMAs",
                             _regblock),
        "tensor": _tensor_variant(),
        "tensor_mma": _tensor_variant("tensor_mma"),
        "library": _variant("library", "the vendor BLAS (numpy.matmul / cuBLAS)", _library),
    },
    default_size=_default_size,
    quick_size=(256, 256, 256),
    flop_convention="gemm: 2 FLOPs per multiply-add (2MNK); bytes = every matrix moved once",
)
