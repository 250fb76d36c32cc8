"""The Hopper wgmma GEMM (kernels/cuda/gemm_wgmma.cu, sm_90a): its tile constants read from the
source, the CTA schedule, a CPU model of its dataflow, its TMA tensor maps, and the
implementation a backend launches (TmaKernel). The host (grid, shared memory, tensor-map
boxes) and the CPU model of the schedule read the kernel's own #defines, so they cannot drift
from it."""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import cache
from typing import ClassVar, Literal

import numpy as np

from .arrays import itemsize
from .cuda_impl import CUDA_DIR, Dim3, LaunchCtx, PerDtype, TensorMapSpec, ceil_div, no_dtype_kernel
from .spec import Size

# kernels/cuda/gemm_wgmma.cu. Its tile constants are read from the source (#define WG_*), so
# the host (grid, shared memory, tensor-map boxes) and the CPU model of the tile schedule
# cannot drift from the kernel.
WGMMA_SOURCE = "gemm_wgmma.cu"
WGMMA_LAYOUT = "wgmma_layout.cuh"  # its constants, schedule and fp8 transpose (host-testable)
_WG_DEFINE = re.compile(r"^#define\s+(WG_[A-Z0-9_]+)\s+(\d+)\b", re.M)


@cache
def wgmma_constants() -> dict[str, int]:
    """The integer ``#define WG_*`` of the wgmma kernel (WG_BM, WG_BN, WG_STAGES_16, ...)."""
    return {k: int(v) for k, v in _WG_DEFINE.findall((CUDA_DIR / WGMMA_LAYOUT).read_text())}


def wgmma_stages(dtype: str) -> int:
    c = wgmma_constants()
    return c["WG_STAGES_8"] if itemsize(dtype) == 1 else c["WG_STAGES_16"]


def wgmma_smem(dtype: str) -> int:
    """Dynamic shared memory of one CTA: the ring, fp8's two staging tiles, the mbarriers
    (full + empty per stage, 2 staging), and the slack to align the base to 1024 bytes."""
    c = wgmma_constants()
    stage = (c["WG_BM"] + c["WG_BN"]) * c["WG_BK_BYTES"]
    staging = 2 * c["WG_BN"] * c["WG_BK_BYTES"] if itemsize(dtype) == 1 else 0
    stages = wgmma_stages(dtype)
    return stages * stage + staging + 8 * (2 * stages + 2) + c["WG_SMEM_ALIGN"]


def wgmma_tiles(m: int, n: int) -> tuple[int, int]:
    c = wgmma_constants()
    return ceil_div(m, c["WG_BM"]), ceil_div(n, c["WG_BN"])


def wgmma_tile(bid: int, tiles_m: int, tiles_n: int) -> tuple[int, int]:
    """(tile row, tile column) that CTA ``bid`` computes: the kernel's grouped raster
    (wgmma_layout.cuh: wgmma_tile), WG_GROUP_M tile rows per group, integer maths as in C."""
    g = wgmma_constants()["WG_GROUP_M"]
    per_group = g * tiles_n
    group = bid // per_group
    first_m = group * g
    rows = min(tiles_m - first_m, g)
    in_group = bid - group * per_group
    return first_m + in_group % rows, in_group // rows


@dataclass(frozen=True)
class WgmmaCta:
    """What one CTA of the wgmma GEMM computes: its tile and the output ranges it stores."""

    bid: int
    tile: tuple[int, int]
    rows: range
    cols: range
    ktiles: int


def wgmma_schedule(m: int, n: int, k: int, dtype: str) -> list[WgmmaCta]:
    """Every CTA of the grid in launch order (the CPU model of the kernel's schedule)."""
    c = wgmma_constants()
    tiles_m, tiles_n = wgmma_tiles(m, n)
    bk = c["WG_BK_BYTES"] // itemsize(dtype)
    out = []
    for bid in range(tiles_m * tiles_n):
        tm, tn = wgmma_tile(bid, tiles_m, tiles_n)
        r0, c0 = tm * c["WG_BM"], tn * c["WG_BN"]
        out.append(WgmmaCta(bid, (tm, tn), range(r0, min(r0 + c["WG_BM"], m)),
                            range(c0, min(c0 + c["WG_BN"], n)), ceil_div(k, bk)))
    return out


def wgmma_model(a: np.ndarray, b: np.ndarray, dtype: str) -> tuple[np.ndarray, np.ndarray]:
    """The kernel's dataflow on the CPU in float64: per CTA, per k tile, the TMA boxes of A and
    B (zero-filled out of bounds) are multiplied and accumulated; the store is guarded.
    Returns (C, how many times each element was written)."""
    c = wgmma_constants()
    m, k = a.shape
    n = b.shape[1]
    bm, bn, bk = c["WG_BM"], c["WG_BN"], c["WG_BK_BYTES"] // itemsize(dtype)
    out = np.full((m, n), np.nan)
    writes = np.zeros((m, n), dtype=np.int64)
    for cta in wgmma_schedule(m, n, k, dtype):
        r0, c0 = cta.tile[0] * bm, cta.tile[1] * bn
        acc = np.zeros((bm, bn))
        for kt in range(cta.ktiles):
            box_a = np.zeros((bm, bk))
            box_b = np.zeros((bk, bn))
            blk_a = a[r0:r0 + bm, kt * bk:(kt + 1) * bk]
            blk_b = b[kt * bk:(kt + 1) * bk, c0:c0 + bn]
            box_a[:blk_a.shape[0], :blk_a.shape[1]] = blk_a
            box_b[:blk_b.shape[0], :blk_b.shape[1]] = blk_b
            acc += box_a @ box_b
        rows, cols = cta.rows, cta.cols
        out[rows.start:rows.stop, cols.start:cols.stop] = acc[:len(rows), :len(cols)]
        writes[rows.start:rows.stop, cols.start:cols.stop] += 1
    return out, writes


def wgmma_refuse(size: Size, dtype: str) -> str | None:
    """Why the wgmma kernel cannot run this size (None when it can). TMA reads rows whose
    stride is a multiple of 16 bytes, and the kernel indexes with 32-bit ints."""
    m, n, k = (int(x) for x in size)
    v = 16 // itemsize(dtype)
    if n % v or k % v:
        return (f"the wgmma/TMA GEMM needs N and K multiples of {v} for {dtype} (TMA row "
                f"strides are multiples of 16 bytes); got N = {n}, K = {k}: use the "
                "tensor_mma variant for such sizes")
    if max(m, n, k) >= 2**31 or m * n >= 2**62:
        return f"the wgmma GEMM indexes with 32-bit ints: {m}x{n}x{k} is too large"
    return None


_TMA_TYPE = {"fp16": "FLOAT16", "bf16": "BFLOAT16", "fp8": "UINT8"}


def wgmma_tensor_maps(size: Size, dtype: str) -> tuple[TensorMapSpec, TensorMapSpec]:
    """Tensor maps of A (K-major, [BK][BM] boxes, 128-byte swizzle) and B (N-major: fp16/bf16
    [BK][64] boxes with the 128-byte swizzle, read transposed by wgmma; fp8 one [BK][BN]
    unswizzled box per stage that the producer transposes)."""
    c = wgmma_constants()
    m, n, k = (int(x) for x in size)
    e = itemsize(dtype)
    bk = c["WG_BK_BYTES"] // e
    t = _TMA_TYPE[dtype]
    a = TensorMapSpec("A", t, (k, m), (k * e,), (bk, c["WG_BM"]), "128B")
    if e == 1:
        b = TensorMapSpec("B", t, (n, k), (n * e,), (c["WG_BN"], bk), "NONE")
    else:
        b = TensorMapSpec("B", t, (n, k), (n * e,), (128 // e, bk), "128B")
    return a, b


@dataclass(frozen=True)
class TmaKernel(PerDtype):
    """A kernel fed by TMA tensor maps, compiled for sm_90a: the wgmma GEMM, with two tensor
    maps (A, B) as ``__grid_constant__`` parameters then C, M, N, K (its grid, shared memory
    and maps from the wgmma tile model). Launched through cuda-python's driver API (the CuPy
    backend):
    CuPy picks the compile arch itself (sm_90, not sm_90a) and passes 128-byte structs only as
    NumPy records, so compile, load and launch go through cuda.bindings directly."""

    source: str
    prefix: str
    dtypes: tuple[str, ...] = ("fp16", "bf16", "fp8")
    arch: str = "sm_90a"
    cc: tuple[int, int] = (9, 0)
    note: str = ""
    # Its mbarrier waits can hang and its faults are sticky: each case in its own process.
    isolated: bool = True
    launcher: ClassVar[Literal["driver"]] = "driver"

    def resolve(self, cc: tuple[int, int]) -> TmaKernel:
        return self

    def unsupported(self, dtype: str, cc: tuple[int, int]) -> str | None:
        if dtype not in self.dtypes:
            return no_dtype_kernel(self.name(dtype), dtype, self.dtypes)
        if tuple(cc) != self.cc:
            return (f"{self.name(dtype)} is built for {self.arch} (wgmma, TMA, setmaxnreg): "
                    f"compute capability {self.cc[0]}.{self.cc[1]} only, device has "
                    f"{cc[0]}.{cc[1]}")
        return None

    def grid(self, ctx: LaunchCtx) -> Dim3:
        why = wgmma_refuse(ctx.size, ctx.dtype)
        if why:
            raise ValueError(why)
        tm, tn = wgmma_tiles(ctx.size[0], ctx.size[1])
        return (tm * tn, 1, 1)

    def block(self, ctx: LaunchCtx) -> Dim3:
        return (wgmma_constants()["WG_THREADS"], 1, 1)

    def smem(self, ctx: LaunchCtx) -> int:
        need = wgmma_smem(ctx.dtype)
        if need > ctx.dev.smem_per_block_optin:
            raise ValueError(f"{self.name(ctx.dtype)} needs {need} bytes of shared memory per "
                             f"block, the device allows {ctx.dev.smem_per_block_optin}")
        return need

    def tensor_maps(self, ctx: LaunchCtx) -> tuple[TensorMapSpec, TensorMapSpec]:
        return wgmma_tensor_maps(ctx.size, ctx.dtype)


