"""gemm: C = A B with A[M, K], B[K, N], C[M, N].

2MNK FLOPs; minimum DRAM traffic (MK + KN + MN) x itemsize, i.e. every matrix moved once —
what a perfectly tiled kernel would move. AI for square n is 2n / (3 x itemsize): ~683
FLOP/byte in FP32 at n = 4096, far right of any ridge, so a GEMM is held against the compute
roof and its efficiency says how close the kernel comes to it.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from typing import Any

import numpy as np
from numba import njit, prange

from . import cuda_impl as cu
from . import numba_cuda_twins as nb
from . import spec
from . import wgmma_gemm as wg
from .arrays import itemsize
from .spec import Buf, CpuCode, Launch, Size, SizeContext, SuiteSizes, Variant, Workload, ones
from .triton_impls import MMA_TILE_RULE, smem_rule, triton, triton_space

# CPU kernels. Both fast variants read B through a packed copy Bt = B^T (n^2 copies against
# the n^3 FMAs, inside the timed call), so that every inner loop is a unit-stride dot product
# over k that LLVM vectorises as a reduction (fastmath reassoc lets it keep vector partial
# sums; the order of the k sum differs from the naive loop's, within the tolerance).
# Work is split into TILE x TILE blocks of C (many more blocks than cores at 1024^2, so 1 to 64
# threads all get work) and k into KC_BYTES segments, so that the rows a micro-kernel streams
# (4 of A, 4 of Bt: 8 x 4 KiB) sit in L1 and the A and Bt blocks of a tile in L2.
# Each step (naive, tiled, register-blocked) is several times faster than the one before, and
# OpenBLAS about twice the register-blocked loop (figures in the README). The register-blocked
# loop is 8 loads + 16 FMAs per step; 256- and 512-bit code ran alike (the Bt rows stream
# from L2), so the kernels keep numba's default tuning.
TILE = 64  # rows/columns of C per parallel block
KC_BYTES = 4096  # bytes of one row segment over k
FASTMATH = {"reassoc", "contract"}


@njit(parallel=True, cache=True)
def _naive(A, B, C, M, N, K):
    for i in prange(M):
        for j in range(N):
            acc = A[i, 0] * 0
            for k in range(K):
                acc += A[i, k] * B[k, j]
            C[i, j] = acc


@njit(inline="always")
def _transpose8(src, dst, k0, j0):
    # dst[j0 + jj, k0 + kk] = src[k0 + kk, j0 + jj] for an 8 x 8 block: constant trip counts,
    # fully unrolled into plain moves (scalar vmovss/vmovsd on the Xeon host), never a gather
    # or scatter (issue 28: a strided loop with a runtime trip count gathers on AVX-512).
    for jj in range(8):
        for kk in range(8):
            dst[j0 + jj, k0 + kk] = src[k0 + kk, j0 + jj]


@njit(inline="always")
def _pack_edge(B, Bt, k0, kn, j0, jn, t_in, t_out):
    # A partial block (kn x jn, each <= 8) through two 8 x 8 scratch tiles: the copies in and
    # out are contiguous row slices (no index arithmetic numba would wrap), the transpose the
    # same constant 8 x 8 as a full block.
    for kk in range(kn):
        t_in[kk, :jn] = B[k0 + kk, j0:j0 + jn]
    _transpose8(t_in, t_out, 0, 0)
    for jj in range(jn):
        Bt[j0 + jj, k0:k0 + kn] = t_out[jj, :kn]


@njit(parallel=True, cache=True)
def _pack_bt(B, Bt, K, N):
    # Bt[j, k] = B[k, j] in 8 x 8 register blocks, one strip of 8 columns per parallel
    # iteration; a strided loop with a runtime trip count would vectorise into gathers on the
    # AVX-512 cores and Skylake, so the edges go through _pack_edge.
    for jb in prange((N + 7) // 8):
        j0 = jb * 8
        jn = min(8, N - j0)
        t_in = np.zeros((8, 8), B.dtype)
        t_out = np.zeros((8, 8), B.dtype)
        if jn == 8:
            for kb in range(K // 8):
                _transpose8(B, Bt, kb * 8, j0)
            kf = K // 8 * 8
            if kf < K:
                _pack_edge(B, Bt, kf, K - kf, j0, 8, t_in, t_out)
        else:
            for k0 in range(0, K, 8):
                _pack_edge(B, Bt, k0, min(8, K - k0), j0, jn, t_in, t_out)


@njit(inline="always", fastmath=FASTMATH)
def _dot(a, b, n):
    # a and b are 1-D row segments indexed from 0: LLVM sees unit-stride, non-negative
    # indices (a loop from k0 > 0 would get numba's negative-index wraparound, and gathers).
    s = a.dtype.type(0)
    for k in range(n):
        s += a[k] * b[k]
    return s


@njit(inline="always")
def _tile_of(t, tiles_j, M, N, tile):
    i0 = (t // tiles_j) * tile
    j0 = (t % tiles_j) * tile
    return i0, min(i0 + tile, M), j0, min(j0 + tile, N)


@njit(parallel=True, cache=True, fastmath=FASTMATH)
def _tiled_core(A, Bt, C, M, N, K, kc, tile):
    # Cache tiling only: one C element at a time (one vector accumulator chain), each
    # element a dot product of an A row segment and a Bt row segment, both reused from cache
    # by the other elements of the tile. Every FMA needs two loads.
    tiles_j = (N + tile - 1) // tile
    for t in prange(((M + tile - 1) // tile) * tiles_j):
        i0, i1, j0, j1 = _tile_of(t, tiles_j, M, N, tile)
        for i in range(i0, i1):
            for j in range(j0, j1):
                C[i, j] = 0
        for k0 in range(0, K, kc):
            k1 = min(k0 + kc, K)
            for i in range(i0, i1):
                a = A[i, k0:k1]
                for j in range(j0, j1):
                    C[i, j] += _dot(a, Bt[j, k0:k1], k1 - k0)


@njit(parallel=True, cache=True, fastmath=FASTMATH)
def _regblock_core(A, Bt, C, M, N, K, kc, tile):
    # Cache tiling plus a 4 x 4 register block: 16 independent vector accumulators (one per
    # C element of the block) over k, fed by 4 A loads and 4 Bt loads per step, so every
    # load feeds 4 FMAs instead of one. Edges (rows or columns not a multiple of 4) fall back
    # to one dot product per element.
    tiles_j = (N + tile - 1) // tile
    for t in prange(((M + tile - 1) // tile) * tiles_j):
        i0, i1, j0, j1 = _tile_of(t, tiles_j, M, N, tile)
        i4 = i0 + (i1 - i0) // 4 * 4
        j4 = j0 + (j1 - j0) // 4 * 4
        for i in range(i0, i1):
            for j in range(j0, j1):
                C[i, j] = 0
        for k0 in range(0, K, kc):
            k1 = min(k0 + kc, K)
            n = k1 - k0
            for i in range(i0, i4, 4):
                a0 = A[i, k0:k1]
                a1 = A[i + 1, k0:k1]
                a2 = A[i + 2, k0:k1]
                a3 = A[i + 3, k0:k1]
                for j in range(j0, j4, 4):
                    b0 = Bt[j, k0:k1]
                    b1 = Bt[j + 1, k0:k1]
                    b2 = Bt[j + 2, k0:k1]
                    b3 = Bt[j + 3, k0:k1]
                    z = C.dtype.type(0)
                    s00 = s01 = s02 = s03 = s10 = s11 = s12 = s13 = z
                    s20 = s21 = s22 = s23 = s30 = s31 = s32 = s33 = z
                    for k in range(n):
                        x0, x1, x2, x3 = a0[k], a1[k], a2[k], a3[k]
                        y0, y1, y2, y3 = b0[k], b1[k], b2[k], b3[k]
                        s00 += x0 * y0
                        s01 += x0 * y1
                        s02 += x0 * y2
                        s03 += x0 * y3
                        s10 += x1 * y0
                        s11 += x1 * y1
                        s12 += x1 * y2
                        s13 += x1 * y3
                        s20 += x2 * y0
                        s21 += x2 * y1
                        s22 += x2 * y2
                        s23 += x2 * y3
                        s30 += x3 * y0
                        s31 += x3 * y1
                        s32 += x3 * y2
                        s33 += x3 * y3
                    C[i, j] += s00
                    C[i, j + 1] += s01
                    C[i, j + 2] += s02
                    C[i, j + 3] += s03
                    C[i + 1, j] += s10
                    C[i + 1, j + 1] += s11
                    C[i + 1, j + 2] += s12
                    C[i + 1, j + 3] += s13
                    C[i + 2, j] += s20
                    C[i + 2, j + 1] += s21
                    C[i + 2, j + 2] += s22
                    C[i + 2, j + 3] += s23
                    C[i + 3, j] += s30
                    C[i + 3, j + 1] += s31
                    C[i + 3, j + 2] += s32
                    C[i + 3, j + 3] += s33
                for j in range(j4, j1):  # leftover columns of these 4 rows
                    b = Bt[j, k0:k1]
                    C[i, j] += _dot(a0, b, n)
                    C[i + 1, j] += _dot(a1, b, n)
                    C[i + 2, j] += _dot(a2, b, n)
                    C[i + 3, j] += _dot(a3, b, n)
            for i in range(i4, i1):  # leftover rows
                a = A[i, k0:k1]
                for j in range(j0, j1):
                    C[i, j] += _dot(a, Bt[j, k0:k1], n)


def _kc(A, kc_bytes: int = KC_BYTES) -> int:
    return max(kc_bytes // A.itemsize, 1)


_BT: dict[str, np.ndarray] = {}


def _packed_bt(B, K: int, N: int) -> np.ndarray:
    # One packing buffer, kept between calls: a fresh 4-8 MiB array per call page-faults
    # inside the timed window (hundreds of faults per call). Only the last shape is kept.
    buf = _BT.get("bt")
    if buf is None or buf.shape != (N, K) or buf.dtype != B.dtype:
        buf = _BT["bt"] = np.empty((N, K), dtype=B.dtype)
    _pack_bt(B, buf, K, N)
    return buf


def _tiled(A, B, C, M, N, K, tile: int = TILE, kc_bytes: int = KC_BYTES):
    _tiled_core(A, _packed_bt(B, K, N), C, M, N, K, _kc(A, kc_bytes), tile)


def _regblock(A, B, C, M, N, K, tile: int = TILE, kc_bytes: int = KC_BYTES):
    _regblock_core(A, _packed_bt(B, K, N), C, M, N, K, _kc(A, kc_bytes), tile)


# The CPU loops' tunable parameters (Variant.tune): the C tile a parallel task owns and the k
# segment its rows are streamed in. Neither changes the FLOPs nor the bytes counted (every
# matrix moved once: the tiles re-read A and Bt from cache, as the module doc counts), so every
# configuration shares the variant's plan. The values run from far too small (a 16 x 16 tile,
# 256-byte segments: call and loop overhead per few FMAs) to larger than L2 holds, so a tune
# has configurations far from the best to drop early. TILE stays a multiple of 4: the
# register block's 4 x 4 steps cover a full tile without its leftover loops.
def _cpu_space(kernel: str, fn: Callable[..., None]) -> spec.TuneSpace:
    def build(config: Any) -> dict[str, Any]:
        tile, kc = int(config["TILE"]), int(config["KC_BYTES"])
        if (tile, kc) == (TILE, KC_BYTES):
            return {kernel: fn}  # the variant's own entry, as it runs
        return {kernel: partial(fn, tile=tile, kc_bytes=kc)}

    tiles, kcs = (16, 32, 64, 128, 256), (256, 1024, 4096, 16384)
    return spec.TuneSpace(
        family="cpu",
        params=(spec.TuneParam("TILE", tiles, TILE), spec.TuneParam("KC_BYTES", kcs, KC_BYTES)),
        build=build,
        rules=(spec.TuneRule("TILE < max(M, N), or the least that covers it (larger tiles run as "
                             "that one)",
                             lambda c, size, dtype: spec.covers_once(tiles, c["TILE"],
                                                                     max(size[0], size[1]))),
               spec.TuneRule("KC_BYTES / itemsize < K, or the least that covers it (longer "
                             "segments run as that one)",
                             lambda c, size, dtype: spec.covers_once(
                                 [v // itemsize(dtype) for v in kcs],
                                 c["KC_BYTES"] // itemsize(dtype), size[2]))),
        note="FLOPs and bytes the same for every configuration (compulsory traffic)")


# The Triton GEMM's space (kernels/triton_gemm.py, the tensor variant): the C tile of a
# program (BM x BN), the k step (BK), warps and pipeline stages. Counts the same for all
# (every matrix moved once: the re-reads of A and B come from L2, as triton_gemm.py says).
# Rules: tl.dot's 16 x 8 mma tile per warp at least; the staged A and B tiles within shared
# memory; a tile larger than the matrix runs as the least that covers it.
GEMM_TRITON = (spec.TuneParam("BM", (32, 64, 128), 64), spec.TuneParam("BN", (32, 64, 128), 64),
               spec.TuneParam("BK", (32, 64, 128), 32), spec.TuneParam("num_warps", (4, 8), 4),
               spec.TuneParam("num_stages", (2, 3, 4), 3))


def gemm_smem(c: Any, dtype: str) -> int:
    """Shared memory of a configuration: num_stages A (BM x BK) and B (BK x BN) tiles."""
    return c["num_stages"] * (c["BM"] + c["BN"]) * c["BK"] * itemsize(dtype)


def _triton_space(table: dict[str, Any]) -> spec.TuneSpace:
    bm, bn, bk = (p.values for p in GEMM_TRITON[:3])
    return triton_space(
        table, GEMM_TRITON,
        rules=(spec.covers_rule("BM", bm, 0, "M"),
               spec.covers_rule("BN", bn, 1, "N"),
               spec.covers_rule("BK", bk, 2, "K"),
               MMA_TILE_RULE,
               smem_rule("num_stages * (BM + BN) * BK * itemsize",
                         lambda c, size, dtype: gemm_smem(c, dtype))),
        note="FLOPs and bytes the same for every configuration (compulsory traffic)")


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


def _reference(x: dict[str, Any], size: Size, xp: Any) -> dict[str, Any]:
    return {"C": xp.matmul(x["A"], x["B"])}


def _default_size(ctx: SizeContext) -> Size:
    if ctx.quick:
        return (256, 256, 256)
    # The naive CPU loop runs at well under 1 GFLOP/s: a smaller problem keeps `make bench`
    # short and is still far beyond the caches for its strided walk of B.
    cpu_n = 512 if ctx.variant == "naive" else 1024
    n = 4096 if ctx.kind == "gpu" else cpu_n
    return (n, n, n)


# ---------------------------------------------------------- CUDA C (kernels/cuda/gemm*.cu)
def _grid(tile_m: int, tile_n: int) -> Callable[[cu.LaunchCtx], cu.Dim3]:
    def grid(ctx: cu.LaunchCtx) -> cu.Dim3:
        m, n, _ = ctx.size
        gy = cu.ceil_div(m, tile_m)
        if gy > 65535:
            raise ValueError(f"M = {m} needs {gy} row blocks, more than gridDim.y allows")
        return (cu.ceil_div(n, tile_n), gy, 1)

    return grid


_TC_MIN_CC = {"fp16": (8, 0), "bf16": (8, 0), "fp8": (8, 9)}
_MMA_SYNC = cu.CudaKernel("gemm.cu", "gemm_tensor", grid=_grid(128, 128), block=cu.block1d(256),
                          dtypes=("fp16", "bf16", "fp8"), min_cc=_TC_MIN_CC,
                          note="mma.sync m16n8k16 (fp16/bf16), m16n8k32 e4m3 (fp8)")
_WGMMA = wg.TmaKernel(wg.WGMMA_SOURCE, "gemm_wgmma",
                        note="wgmma m64n256 + TMA ring + mbarriers, producer/consumer "
                             "warpgroups (sm_90a)")
CUDA = {
    "naive": {"naive": cu.CudaKernel("gemm.cu", "gemm_naive", grid=_grid(16, 16),
                                     block=lambda ctx: (16, 16, 1))},
    "tiled": {"tiled": cu.CudaKernel("gemm.cu", "gemm_tiled", grid=_grid(32, 32),
                                     block=lambda ctx: (32, 8, 1))},
    "regblock": {"regblock": cu.CudaKernel("gemm.cu", "gemm_regblock", grid=_grid(128, 128),
                                           block=cu.block1d(256))},
    # Hopper runs the native wgmma kernel; sm_80/89 the mma.sync one.
    "tensor": {"tensor": cu.ByArch(exact=(((9, 0), _WGMMA),), default=_MMA_SYNC)},
    # The legacy mma.sync path as a second Hopper point, beside the native one on the plot.
    "tensor_mma": {"tensor": cu.ByArch(
        exact=(((9, 0), _MMA_SYNC),),
        default="tensor_mma is the Hopper-only legacy point: elsewhere the tensor variant "
                "already runs this mma.sync kernel")},
    "library": {"library": cu.CudaLibrary("matmul", note="cuBLAS through cupy.matmul")},
}

# ------------------------------------------------------------------------ Numba CUDA twin
cuda: Any = None  # numba.cuda, bound by nb.bind when the twin is first built


def _numba_twins(env: nb.TwinEnv) -> dict[str, Any]:
    nb.bind(__name__)  # sets the global `cuda` the kernel names
    acc, tile = env.acc, env.tile

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

    return {"gemm_tiled": gemm_tiled}


NUMBA_CUDA = {"tiled": {"tiled": nb.NumbaTwin("gemm_tiled", _numba_twins, "gemm")}}


def _variant(name: str, description: str, fn, arrow_from: str | None = None) -> Variant:
    # GPU implementations: CUDA C for every variant (fp16/bf16 stored, FP32 math on CUDA
    # cores), a Numba CUDA twin of the tiled kernel; cuBLAS (cupy.matmul) as the library.
    gpu_dtypes = ("fp16",) if name == "library" else ("fp16", "bf16")
    impls = {"cpu": {name: fn}, "cuda": CUDA[name]}
    if name in NUMBA_CUDA:
        impls["numba_cuda"] = NUMBA_CUDA[name]
    tune = {"cpu": _cpu_space(name, fn)} if name in ("tiled", "regblock") else {}
    return Variant(name=name, description=description, dtypes=("fp32", "fp64", *gpu_dtypes),
                   plan=_plan(name), impls=impls, arrow_from=arrow_from, tune=tune,
                   cores_on=_library_cores if name == "library" else None,
                   numba_threads=name != "library")  # numpy's BLAS: a pool of its own


def _library_cores(kind: str, dtype: str) -> str:
    """cuBLAS runs HGEMM/BF16 and, from sm_80, DGEMM on tensor cores (above the CUDA-core
    FP64 datasheet peak), and SGEMM on CUDA cores unless
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
    impls = {"cuda": CUDA[name]}
    tune: dict[str, spec.TuneSpace] = {}
    if name == "tensor":  # tl.dot on tensor cores; fp8 e4m3 needs sm_89+ (the backend refuses it)
        table = triton("triton_gemm", dtypes=("fp16", "bf16", "fp8"), tensor="gemm")
        impls["triton"] = table
        tune["triton"] = _triton_space(table)
    return Variant(name=name, dtypes=("fp16", "bf16", "fp8"), plan=_plan("tensor"),
                   description=description, impls=impls, cores="tensor", tune=tune,
                   unsupported={"cpu": "tensor cores are GPU-only",
                                "numba_cuda": "Numba CUDA exposes no mma instructions"},
                   arrow_from="regblock" if name == "tensor" else None)


# Its parallel CPU kernels as the codegen matrix compiles them (spec.CpuCode).
_K_LOOP = "the k loop in vector FMAs on contiguous rows of A and Bt"
CPU_CODE = (
    CpuCode("_naive", lambda t: (*ones((17, 17), t, 3), 17, 17, 17)),
    CpuCode("_pack_bt", lambda t: (*ones((67, 45), t), *ones((45, 67), t), 67, 45),
            no_scatter=True, why="a transpose in constant 8 x 8 blocks: shuffles or scalar moves"),
    CpuCode("_tiled_core", lambda t: (*ones((64, 64), t, 3), 64, 64, 64, 32, TILE), 4,
            why=_K_LOOP),
    CpuCode("_regblock_core", lambda t: (*ones((64, 64), t, 3), 64, 64, 64, 32, TILE), 4,
            why=_K_LOOP),
)

WORKLOAD = Workload(
    name="gemm",
    description="C = A B (M x K times K x N)",
    size_names=("m", "n", "k"),
    inputs=_inputs,
    outputs=_outputs,
    reference=_reference,
    # FP32 accumulation: the output's rounding, twice (tests/kernels/test_emu_numerics.py)
    tolerance={"fp64": 1e-12, "fp32": 1e-5, "fp16": 1e-3, "bf16": 7.5e-3, "fp8": 0.1},
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
    # CPU sizes cross every tile edge (64 x 64 blocks of C, 4 KiB k segments: 1024 FP32 or
    # 512 FP64 values) and the 4 x 4 register block's leftover rows and columns.
    test_sizes=SuiteSizes(cpu=((1, 1, 1), (17, 5, 33), (70, 300, 140), (67, 130, 1100)),
                          gpu=((257, 129, 97), (256, 256, 256)),
                          sanitize={"naive": (("fp32",), (67, 45, 33)),
                                    "tiled": (("fp16",), (67, 45, 33)),
                                    "regblock": (("fp32",), (130, 132, 20)),
                                    "tensor_mma": (("fp16", "fp8"), (130, 136, 97)),
                                    "tensor": (("fp16", "fp8"), (130, 272, 112))}),
    flop_convention="gemm: 2 FLOPs per multiply-add (2MNK); bytes = every matrix moved once",
    order=3,  # compute-bound: after the memory-bound workloads
    marker="^",
)
