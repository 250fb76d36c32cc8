"""rownorm, the book's row-wise fusion example: y = x / sqrt(sum(x^2) + eps) per row of
x[batch, hidden].

FLOP convention: per element 3 FLOPs (square, accumulate, scale); per row 1 FLOP (+eps), the
(r)sqrt is not counted. Bytes per element (FP32), the per-row terms stated apart:
- naive (square, row-reduce, rsqrt, scale; 4 launches): 20 B/elt (+16 B/row) -> 0.15 FLOP/B
- fused (one pass per row to reduce, x read again to scale): 8 B/elt -> 0.375 FLOP/B
- onepass (row kept on chip, x read once): 8 B/elt -> 0.375 FLOP/B
The row sums and scales are kept in fp32 (fp64 for fp64 inputs).
The book counts fused's second read of x as DRAM traffic (12 B/elt, 0.25 FLOP/B). Here it is
counted once, as gemm's re-read tiles are: a row (16-32 KiB at hidden 4096) is read again by
the same block or thread right after its reduction, from L1/L2, and a fused point counted at
12 B/elt sat 1.10-1.35 above its DRAM roof on every device measured (docs/cpu-roofs.md,
"rownorm fused: the second read comes from cache"). What onepass saves is that cache traffic
and, on a GPU, the second pass's latency; the DRAM bytes of the two are the same.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import Any

from numba import njit, prange

from . import cuda_impl as cu
from . import nt_stores, spec
from . import numba_cuda_twins as nb
from .arrays import itemsize
from .spec import Buf, CpuCode, Launch, Size, SizeContext, SuiteSizes, Variant, Workload, ones
from .triton_impls import triton, triton_space

EPS = 1e-6
FLOP_CONVENTION = ("rownorm: 3 FLOPs per element (square, accumulate, scale) + 1 per row (+eps); "
                   "rsqrt/sqrt not counted; per-row bytes (row sums, scales) counted; fused's "
                   "second read of a row is served by cache and counted once (the book "
                   "counts it twice: 12 B/elt)")


# CPU kernels. Two rules, as for l2norm: an output larger than the last-level cache is written
# with non-temporal stores (no read for ownership; kernels/nt_stores.py), a smaller one by plain
# stores; and a row's sum of squares keeps vector partial sums (fastmath reassoc, as the
# GPU's tree reduction reorders it too), in the storage precision. Before both, on a 2-vCPU
# Zen 3 VM the row kernels ran at 43-53% of the DRAM roof: each plain store to y first
# read its line (8 B/elt counted, 12 moved), and fused's ordered scalar sum was bound by the
# add latency (4096 dependent adds a row), not by memory.
REDUCE = {"reassoc", "contract"}


@njit(inline="always")
def _inv_norm(row, hidden, eps):
    s = row.dtype.type(0)
    for j in range(hidden):
        s += row[j] * row[j]
    return row.dtype.type(1.0 / math.sqrt(s + eps))


@njit(parallel=True, cache=True)
def _square_cached(x, sq, batch, hidden):
    for i in prange(batch):
        for j in range(hidden):
            sq[i, j] = x[i, j] * x[i, j]


def _square_nt(x, sq, batch, hidden):
    nt_stores.square(x.reshape(-1), sq.reshape(-1), batch * hidden)


@njit(parallel=True, cache=True, fastmath=REDUCE)
def _rowsum(sq, sums, batch, hidden):
    for i in prange(batch):
        row = sq[i]
        s = sums.dtype.type(0)
        for j in range(hidden):
            s += row[j]
        sums[i] = s


@njit(parallel=True, cache=True)
def _rsqrt(sums, scale, batch, eps):
    for i in prange(batch):
        scale[i] = 1.0 / math.sqrt(sums[i] + eps)


@njit(parallel=True, cache=True)
def _scale_cached(x, scale, y, batch, hidden):
    for i in prange(batch):
        r = scale[i]
        for j in range(hidden):
            y[i, j] = x[i, j] * r


@njit(parallel=True, cache=True)
def _scale_rows_nt(x, scale, y, batch, hidden, rows):
    for c in prange((batch + rows - 1) // rows):
        for i in range(c * rows, min(c * rows + rows, batch)):
            nt_stores.scale_row(x[i], y[i], y.dtype.type(scale[i]), hidden)
        nt_stores.store_fence()


def _scale_nt(x, scale, y, batch, hidden):
    _scale_rows_nt(x, scale, y, batch, hidden, nt_stores.rows_per_chunk(hidden, y.itemsize))


@njit(parallel=True, cache=True, fastmath=REDUCE)
def _fused_cached(x, y, batch, hidden, eps):
    # The book's loop: reduce the row, then read x again to scale it. On a CPU the second
    # read comes from L1/L2 (a 4096-element row is 16-32 KiB), so it moves the DRAM bytes
    # of onepass, and the plan counts x once (module doc).
    for i in prange(batch):
        r = _inv_norm(x[i], hidden, eps)
        for j in range(hidden):
            y[i, j] = x[i, j] * r


@njit(parallel=True, cache=True, fastmath=REDUCE)
def _onepass_cached(x, y, batch, hidden, eps):
    # One read of each row from memory: the row stays in L1/L2 while it is reduced, then it
    # is scaled from there into y. No scratch row and no allocation per call: the cache is
    # the on-chip row.
    for i in prange(batch):
        row = x[i]
        out = y[i]
        r = _inv_norm(row, hidden, eps)
        for j in range(hidden):
            out[j] = row[j] * r


@njit(parallel=True, cache=True, fastmath=REDUCE)
def _norm_rows_nt(x, y, batch, hidden, eps, rows):
    # fused and onepass with non-temporal stores: each row reduced, then scaled into y.
    for c in prange((batch + rows - 1) // rows):
        for i in range(c * rows, min(c * rows + rows, batch)):
            row = x[i]
            nt_stores.scale_row(row, y[i], _inv_norm(row, hidden, eps), hidden)
        nt_stores.store_fence()


def _norm_nt(x, y, batch, hidden, eps):
    _norm_rows_nt(x, y, batch, hidden, eps, nt_stores.rows_per_chunk(hidden, y.itemsize))


_square = nt_stores.NtStoreKernel(_square_cached, _square_nt, out_arg=1)
_scale = nt_stores.NtStoreKernel(_scale_cached, _scale_nt, out_arg=2)
_fused = nt_stores.NtStoreKernel(_fused_cached, _norm_nt, out_arg=1)
_onepass = nt_stores.NtStoreKernel(_onepass_cached, _norm_nt, out_arg=1)


# The CPU row kernels' tunable parameters (Variant.tune), fused and onepass alike: STORES, how y
# is written (auto: non-temporal above the LLC, as the variant runs; nt; cached), and ROWS, the
# rows of a non-temporal chunk (0: the variant's rule, about 64 KiB of y per chunk and fence).
# Counts are exact per configuration: cached stores to a y larger than the LLC read each line
# before writing it (write-allocate), so that configuration declares y read as well as
# written, 12 B/elt in FP32 against the 8 of the others: its roof is further away, and a tune
# whose best is within the noise of 8 B/elt never tries it.
_ROWS = (0, 1, 16, 256)


def _nt_stores_at(size: Size, dtype: str, stores: str) -> bool:
    """Whether ``stores`` writes y non-temporally at this size (auto: above the LLC)."""
    if stores == "auto":
        return math.prod(size) * itemsize(dtype) > nt_stores.nt_threshold()
    return stores == "nt"


def _row_space(kernel: str, default: nt_stores.NtStoreKernel, plan: Any) -> spec.TuneSpace:
    def build(config: Any) -> dict[str, Any]:
        stores, rows = str(config["STORES"]), int(config["ROWS"])
        if stores == "cached":
            return {kernel: default.cached}
        if rows == 0:
            nt = default.nt
        else:
            def nt(x: Any, y: Any, batch: int, hidden: int, eps: float) -> None:
                _norm_rows_nt(x, y, batch, hidden, eps, rows)
        return {kernel: default if stores == "auto" and rows == 0 else
                nt_stores.NtStoreKernel(default.cached, nt, 1) if stores == "auto" else
                nt}

    def config_plan(size: Size, dtype: str, config: Any) -> list[Launch]:
        (launch,) = plan(size, dtype)
        if _nt_stores_at(size, dtype, config["STORES"]) or \
                math.prod(size) * itemsize(dtype) <= nt_stores.llc_bytes():
            return [launch]
        return [replace(launch, reads=(*launch.reads, "y"),
                        note=launch.note + "; cached stores: y read for ownership")]

    def rows_used(c: Any, size: Size, dtype: str) -> bool:
        return c["ROWS"] == 0 or _nt_stores_at(size, dtype, c["STORES"])

    def not_auto_twin(c: Any, size: Size, dtype: str) -> bool:
        return c["STORES"] == "auto" or \
            _nt_stores_at(size, dtype, "auto") != _nt_stores_at(size, dtype, c["STORES"])

    def not_default_rows(c: Any, size: Size, dtype: str) -> bool:
        return c["ROWS"] == 0 or \
            c["ROWS"] != nt_stores.rows_per_chunk(int(size[1]), itemsize(dtype))

    return spec.TuneSpace(
        family="cpu",
        params=(spec.TuneParam("STORES", ("auto", "nt", "cached"), "auto"),
                spec.TuneParam("ROWS", _ROWS, 0)),
        build=build,
        rules=(spec.TuneRule("the stores auto picks at this size run as STORES=auto",
                             not_auto_twin),
               spec.TuneRule("ROWS applies to non-temporal stores only", rows_used),
               spec.TuneRule("ROWS equal to the default rule's runs as ROWS=0", not_default_rows)),
        plan=config_plan,
        note="cached stores to a y beyond the LLC declare y read as well (write-allocate)")


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
    return [Launch("fused", 3 * b * h + b, ("x",), ("y",), ("x", "y", b, h, EPS),
                   note="reduce the row, then read it again (from cache) to scale")]


def _onepass_plan(size: Size, dtype: str) -> list[Launch]:
    b, h = size
    return [Launch("onepass", 3 * b * h + b, ("x",), ("y",), ("x", "y", b, h, EPS),
                   note="row kept on chip: x read once")]


# Why fused and onepass (the same loop on a CPU: the cache is the on-chip row) stay below the
# DRAM roof there.
CPU_PHASES = {"cpu": (
    "a thread reduces its row (reads only), then streams y out (writes only): the two phases "
    "do not overlap, so it runs near 2 / (1/R + 1/W) of the read-only and write-only "
    "bandwidths, below STREAM's mixed streams; measured on the 2-core Zen 3 VM: "
    "docs/cpu-roofs.md, 'rownorm at 43-53% of the DRAM roof'")}


def _reference(x: dict[str, Any], size: Size, xp: Any) -> dict[str, Any]:
    # In place on the float64 copy: a 10^8-element case holds no extra temporaries.
    v = x["x"]
    sums = xp.einsum("ij,ij->i", v, v)
    v /= xp.sqrt(sums + EPS)[:, None]
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


# ------------------------------------------------------------- CUDA C (kernels/cuda/rownorm.cu)
# Row kept on chip by rn_onepass (kernels/cuda/rownorm.cu: RN_PACKS, RN_ELEMS).
RN_PACKS, RN_ELEMS, RN_MAX_THREADS = 8, 16, 1024


def onepass_threads(hidden: int, dtype: str) -> int | None:
    """Block size for rn_onepass, or None when a row does not fit in the block's registers.

    Aim for ~4 packs (16 B each) per thread, so the register file holds the row with room to
    spare; a row whose hidden size is not a multiple of the pack uses scalar registers.
    """
    v = cu.pack_values(dtype)
    if hidden % v == 0:
        items, per_thread_max, aim = hidden // v, RN_PACKS, 4
    else:
        items, per_thread_max, aim = hidden, RN_ELEMS, 8
    threads = min(RN_MAX_THREADS, max(64, cu.ceil_div(cu.ceil_div(items, aim), 32) * 32))
    return threads if cu.ceil_div(items, threads) <= per_thread_max else None


def onepass_capacity(dtype: str) -> tuple[int, int]:
    """Largest hidden size rn_onepass holds: (multiple of the 16-byte pack, other)."""
    return RN_MAX_THREADS * RN_PACKS * cu.pack_values(dtype), RN_MAX_THREADS * RN_ELEMS


@dataclass(frozen=True)
class OnepassPath:
    """A code path of rn_onepass: its branch (16-byte packs when hidden is a multiple of the
    pack, else scalar) and how many of the thread's register chunks (RN_PACKS / RN_ELEMS)
    the row fills, with the smallest hidden size that takes it and that size's block."""

    branch: str
    chunks: int
    hidden: int
    threads: int


def onepass_paths(dtype: str) -> list[OnepassPath]:
    """Every path rn_onepass takes for the rows the sizing rule accepts (a test runs one size
    per path: a chunk no size reaches is code no test executes)."""
    v = cu.pack_values(dtype)
    paths: dict[tuple[str, int], OnepassPath] = {}
    for h in range(1, max(onepass_capacity(dtype)) + 1):
        t = onepass_threads(h, dtype)
        if t is None:
            continue
        branch, items = ("vector", h // v) if h % v == 0 else ("scalar", h)
        key = (branch, cu.ceil_div(items, t))
        paths.setdefault(key, OnepassPath(branch, key[1], h, t))
    return sorted(paths.values(), key=lambda p: (p.branch, p.chunks))


def onepass_refuse(size: Size, dtype: str, backend: str) -> str | None:
    """The Variant.refuse hook of rownorm/onepass for the CUDA C backends."""
    if backend not in ("cuda", "pycuda") or dtype not in cu.ALL_DTYPES:
        return None
    _, hidden = size
    if onepass_threads(int(hidden), dtype) is None:
        vec, other = onepass_capacity(dtype)
        return (f"onepass keeps a row in one block's registers: hidden {hidden} {dtype} does "
                f"not fit (at most {vec} when hidden is a multiple of "
                f"{cu.pack_values(dtype)}, else {other}); use the fused variant")
    return None


def _onepass_block(ctx: cu.LaunchCtx) -> cu.Dim3:
    t = onepass_threads(int(ctx.size[1]), ctx.dtype)
    if t is None:
        raise ValueError(onepass_refuse(ctx.size, ctx.dtype, "cuda"))
    return (t, 1, 1)


# The GPU fused kernels' spaces. CUDA C rn_fused: threads per block (one block per row; whole
# warps for its warp-shuffle reduction, at most CUDA's 1024). Triton rownorm_fused_kernel: the
# row chunk per step (BLOCK) and warps. Counts the same for all (x read twice, y written once,
# as the variant's plan declares). More threads, or a larger chunk, than the row has packs
# run idle lanes: only the least that covers the row is kept.
FUSED_THREADS = (32, 64, 128, 256, 512, 1024)
FUSED_TRITON = (spec.TuneParam("BLOCK", (256, 512, 1024, 2048, 4096), 1024),
                spec.TuneParam("num_warps", (1, 2, 4, 8, 16), 4))


def _packs(size: Size, dtype: str) -> int:
    return -(-int(size[1]) // cu.pack_values(dtype))


def _cuda_fused_space(table: dict[str, Any]) -> spec.TuneSpace:
    kernel = table["fused"]

    def build(config: Any) -> dict[str, Any]:
        t = int(config["THREADS"])
        return dict(table) if t == cu.THREADS else {"fused": replace(kernel,
                                                                     block=cu.block1d(t))}

    return spec.TuneSpace(
        family="cuda", params=(spec.TuneParam("THREADS", FUSED_THREADS, cu.THREADS),), build=build,
        rules=(spec.TuneRule("THREADS a multiple of 32 (whole warps: the shuffle reduction)",
                             lambda c, size, dtype: c["THREADS"] % 32 == 0),
               spec.TuneRule("THREADS <= 1024 (CUDA's threads per block)",
                             lambda c, size, dtype: c["THREADS"] <= 1024),
               spec.TuneRule("THREADS < the row's 16-byte packs, or the least that covers them",
                             lambda c, size, dtype: spec.covers_once(FUSED_THREADS, c["THREADS"],
                                                                     _packs(size, dtype)))),
        note="FLOPs and bytes the same for every configuration")


def _triton_fused_space(table: dict[str, Any]) -> spec.TuneSpace:
    blocks = FUSED_TRITON[0].values
    return triton_space(
        table, FUSED_TRITON,
        rules=(spec.TuneRule("BLOCK >= 32 * num_warps (an element per lane at least)",
                             lambda c, size, dtype: c["BLOCK"] >= 32 * c["num_warps"]),
               spec.covers_rule("BLOCK", blocks, 1, "hidden")),
        note="FLOPs and bytes the same for every configuration")


CUDA = {
    "naive": {
        "square": cu.elementwise("rownorm.cu", "rn_square"),
        "rowsum": cu.CudaKernel("rownorm.cu", "rn_rowsum", grid=cu.per_row, block=cu.block1d()),
        "rsqrt": cu.CudaKernel("rownorm.cu", "rn_rsqrt", grid=cu.grid_stride(cu.n_rows, False),
                               block=cu.block1d()),
        "scale": cu.CudaKernel("rownorm.cu", "rn_scale", grid=cu.per_row, block=cu.block1d()),
    },
    "fused": {"fused": cu.CudaKernel("rownorm.cu", "rn_fused", grid=cu.per_row,
                                     block=cu.block1d())},
    "onepass": {"onepass": cu.CudaKernel("rownorm.cu", "rn_onepass", grid=cu.per_row,
                                         block=_onepass_block)},
}

# ------------------------------------------------------------------------ Numba CUDA twins
cuda: Any = None  # numba.cuda, bound by nb.bind when a twin is first built


def _numba_twins(env: nb.TwinEnv) -> dict[str, Any]:
    nb.bind(__name__)  # sets the global `cuda` the kernels name
    acc, threads = env.acc, env.threads

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

    return {"rn_square": rn_square, "rn_rowsum": rn_rowsum, "rn_rsqrt": rn_rsqrt,
            "rn_scale": rn_scale, "rn_fused": rn_fused}


def _twin(name: str, shape: str = "row", **kw: Any) -> nb.NumbaTwin:
    return nb.NumbaTwin(name, _numba_twins, shape, **kw)


NUMBA_CUDA = {
    "naive": {"square": _twin("rn_square"), "rowsum": _twin("rn_rowsum"),
              "rsqrt": _twin("rn_rsqrt", "stride", elems=lambda size: int(size[0])),
              "scale": _twin("rn_scale")},
    "fused": {"fused": _twin("rn_fused")},
}

CPU = {"square": _square, "rowsum": _rowsum, "rsqrt": _rsqrt, "scale": _scale}

# Its parallel CPU kernels as the codegen matrix compiles them (spec.CpuCode), at B rows of H.
_B, _H, _EPS = 4, 64, 1e-6
_VEC = "an elementwise loop on packed vectors"
_REDUCTION = ("a row's sum of squares in vector partial sums, more than one FMA chain (an "
              "ordered scalar sum is bound by the add latency, not by memory)")
CPU_CODE = (
    CpuCode("_square_cached", lambda t: (*ones((_B, _H), t, 2), _B, _H), 1, why=_VEC),
    CpuCode("_rowsum", lambda t: (*ones((_B, _H), t), *ones(_B, t), _B, _H),
            min_wide_adds=2, why="the row sum in vector partial sums"),
    CpuCode("_rsqrt", lambda t: (*ones(_B, t, 2), _B, _EPS)),
    CpuCode("_scale_cached",
            lambda t: (*ones((_B, _H), t), *ones(_B, t), *ones((_B, _H), t), _B, _H), 1,
            why=_VEC),
    CpuCode("_scale_rows_nt",
            lambda t: (*ones((_B, _H), t), *ones(_B, t), *ones((_B, _H), t), _B, _H, 2),
            streams=True),
    CpuCode("_fused_cached", lambda t: (*ones((_B, _H), t, 2), _B, _H, _EPS),
            min_chains=2, why=_REDUCTION),
    CpuCode("_onepass_cached", lambda t: (*ones((_B, _H), t, 2), _B, _H, _EPS),
            min_chains=2, why=_REDUCTION),
    CpuCode("_norm_rows_nt", lambda t: (*ones((_B, _H), t, 2), _B, _H, _EPS, 2),
            min_chains=2, why=_REDUCTION, streams=True),
)

WORKLOAD = Workload(
    name="rownorm",
    description="y = x / sqrt(sum(x^2) + eps) per row of x[batch, hidden]",
    size_names=("batch", "hidden"),
    inputs=_inputs,
    outputs=_outputs,
    reference=_reference,
    row_inputs=("x",),  # each row normalised alone
    # FP32 row sums: the output's rounding, twice (tests/kernels/test_emu_numerics.py)
    tolerance={"fp64": 1e-12, "fp32": 1e-5, "fp16": 1e-3, "bf16": 7.5e-3, "fp8": 0.1},
    variants={
        "naive": Variant(
            name="naive",
            description="square, row-reduce, rsqrt, scale: 4 launches through memory",
            plan=_naive_plan,
            temps=_naive_temps,
            impls={"cpu": CPU, "cuda": CUDA["naive"], "numba_cuda": NUMBA_CUDA["naive"]},
        ),
        "fused": Variant(
            name="fused",
            description="one pass per row to reduce, x read again to scale (the book's)",
            plan=_fused_plan,
            impls={"cpu": {"fused": _fused}, "cuda": CUDA["fused"],
                   "numba_cuda": NUMBA_CUDA["fused"],
                   "triton": triton("triton_stream", fused="rownorm_fused")},
            arrow_from="naive",
            limits=CPU_PHASES,
            tune={"cpu": _row_space("fused", _fused, _fused_plan),
                  "cuda": _cuda_fused_space(CUDA["fused"]),
                  "triton": _triton_fused_space(triton("triton_stream",
                                                       fused="rownorm_fused"))},
        ),
        "onepass": Variant(
            name="onepass",
            description="row kept on chip, x read once",
            plan=_onepass_plan,
            impls={"cpu": {"onepass": _onepass}, "cuda": CUDA["onepass"]},
            unsupported={"numba_cuda": "no Numba CUDA twin of the register-resident row"},
            # CUDA C keeps a row in one block's registers: larger rows are refused.
            refuse=onepass_refuse,
            arrow_from="fused",
            limits=CPU_PHASES,
            tune={"cpu": _row_space("onepass", _onepass, _onepass_plan)},
        ),
    },
    default_size=_default_size,
    quick_size=(512, 1024),
    test_sizes=SuiteSizes(cpu=((1, 1), (3, 17), (5, 1000)),
                          gpu=((67, 1024), (33, 1001), (9, 16384)),
                          sanitize={"naive": (("fp32",), (3, 1001)),
                                    "fused": (("fp16",), (3, 1024)),
                                    "onepass": (("fp16", "fp32"), (2, 1001))}),
    flop_convention=FLOP_CONVENTION,
    order=2,
    marker="D",
)
