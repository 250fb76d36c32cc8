"""attention: O = softmax(Q K^T / sqrt(d)) V, forward, over batch x heads x N x d.

FLOP convention (the same count for every variant at a size, so points compare): per score
(an element of S = Q K^T) 2d FLOPs for Q K^T, 2d for P V and 4 for the softmax (scale, max,
subtract, row-sum add): 4d + 4. exp is a special-function op and is not counted (as sqrt
elsewhere); nor is the normalisation (naive divides every score, flash every output). Causal
attention counts only the scores on or below the diagonal, N(N+1)/2 per head.

Bytes per launch, the minimum each launch must move (item = bytes per value):
- naive (standard attention, three launches): S = Q K^T reads Q, K and writes S (N^2 per
  head); P = softmax(S) reads S, writes P; O = P V reads P, V, writes O. About 4 N^2 values per
  head: its intensity stays near (4d + 4) / (4 item) however long the sequence. Causal naive
  materialises the whole S and P, masked entries included, as standard attention does.
- flash / library (one launch): reads Q, K, V and writes O once, 4 N d values per head; its
  intensity grows as N (the K/V tiles every query block re-reads come from cache).

Causal is a workload of its own (kernels/attention_causal.py), not a variant: a variant shares
its workload's float64 reference, and the reference must know the mask.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
from numba import njit, prange

from . import cuda_impl as cu
from .spec import Buf, Launch, Size, SizeContext, Variant, Workload

FASTMATH = {"reassoc", "contract"}
QB = 32  # CPU flash: query rows per parallel task
KB = 64  # CPU flash: keys per tile (a 64 x d K/V tile sits in L1/L2)
LIB_BYTES = 4 << 20  # CPU library: scores per BLAS call (a block of query rows, in cache)
REF_BYTES = 256 << 20  # float64 scores the reference holds at once

GPU_HEAD_DIMS = (64, 128)  # the tensor-core kernels' head dims
GPU_ROW_MAX = 16384  # attn_softmax keeps a row in registers (kernels/cuda/attention.cu)
GPU_BM = 64  # query rows (and keys) per tile of the CUDA kernels
GPU_THREADS = 128
GPU_SM_THREADS, GPU_ROW_VALS = 512, 32


def n_scores(n: int, causal: bool) -> int:
    """Scores per head that the convention counts: every one, or those on/below the diagonal."""
    return n * (n + 1) // 2 if causal else n * n


def flops_per_score(d: int) -> int:
    return 4 * d + 4


def _scale(d: int) -> float:
    return 1.0 / math.sqrt(d)


# ------------------------------------------------------------------------------ CPU kernels
# Q, K, V, O arrive as [batch, heads, N, d]; the wrappers pass [batch*heads, N, d] views. Both
# products of every variant go through one register-blocked micro-kernel (_abt, after gemm.py's:
# vector accumulators over a contiguous k), so naive and flash differ in the bytes they move,
# not in how well they multiply.
@njit(inline="always", fastmath=FASTMATH)
def _dot(a, b, n):
    s = a.dtype.type(0)
    for x in range(n):
        s += a[x] * b[x]
    return s


@njit(inline="always", fastmath=FASTMATH)
def _abt(a, ar, ac, b, br, bc, c, cr, cc, m, n, kk, add):
    """c[cr:cr+m, cc:cc+n] = (c +) a[ar:ar+m, ac:ac+kk] @ b[br:br+n, bc:bc+kk].T on 2-D
    C-contiguous arrays, in 2 x 4 register blocks: 8 vector accumulators and 6 loads fit the
    16 vector registers of AVX2 (a 4 x 4 block spills there). Rows are taken as 1-D segments
    from 0, so the k loops are unit-stride vector reductions."""
    m2, n4 = m // 2 * 2, n // 4 * 4
    for i in range(0, m2, 2):
        a0 = a[ar + i, ac:ac + kk]
        a1 = a[ar + i + 1, ac:ac + kk]
        for j in range(0, n4, 4):
            b0 = b[br + j, bc:bc + kk]
            b1 = b[br + j + 1, bc:bc + kk]
            b2 = b[br + j + 2, bc:bc + kk]
            b3 = b[br + j + 3, bc:bc + kk]
            z = c.dtype.type(0)
            s00 = s01 = s02 = s03 = s10 = s11 = s12 = s13 = z
            for x in range(kk):
                x0, x1 = a0[x], a1[x]
                y0, y1, y2, y3 = b0[x], b1[x], b2[x], b3[x]
                s00 += x0 * y0
                s01 += x0 * y1
                s02 += x0 * y2
                s03 += x0 * y3
                s10 += x1 * y0
                s11 += x1 * y1
                s12 += x1 * y2
                s13 += x1 * y3
            r, q = cr + i, cc + j
            if add:
                s00 += c[r, q]
                s01 += c[r, q + 1]
                s02 += c[r, q + 2]
                s03 += c[r, q + 3]
                s10 += c[r + 1, q]
                s11 += c[r + 1, q + 1]
                s12 += c[r + 1, q + 2]
                s13 += c[r + 1, q + 3]
            c[r, q], c[r, q + 1], c[r, q + 2], c[r, q + 3] = s00, s01, s02, s03
            c[r + 1, q], c[r + 1, q + 1], c[r + 1, q + 2], c[r + 1, q + 3] = s10, s11, s12, s13
        for j in range(n4, n):  # leftover columns of these 2 rows
            bj = b[br + j, bc:bc + kk]
            v0, v1 = _dot(a0, bj, kk), _dot(a1, bj, kk)
            if add:
                v0 += c[cr + i, cc + j]
                v1 += c[cr + i + 1, cc + j]
            c[cr + i, cc + j], c[cr + i + 1, cc + j] = v0, v1
    for i in range(m2, m):  # a leftover row
        ai = a[ar + i, ac:ac + kk]
        for j in range(n):
            v = _dot(ai, b[br + j, bc:bc + kk], kk)
            c[cr + i, cc + j] = c[cr + i, cc + j] + v if add else v


@njit(inline="always")
def _transpose_tile(v, j0, cols, vt):
    """vt[:, :cols] = v[j0:j0+cols, :].T (a K/V tile, so that P V is an a @ b.T product)."""
    for b in range(cols):
        row = v[j0 + b]
        for x in range(v.shape[1]):
            vt[x, b] = row[x]


@njit(parallel=True, cache=True, fastmath=FASTMATH)
def _scores_core(q, k, s):
    # S[h] = Q[h] K[h]^T, the whole N x N (causal or not), one task per QB query rows.
    bh, n, d = q.shape
    nqb = (n + QB - 1) // QB
    for t in prange(bh * nqb):
        h, i0 = t // nqb, (t % nqb) * QB
        rows = min(QB, n - i0)
        for j0 in range(0, n, KB):
            _abt(q[h], i0, 0, k[h], j0, 0, s[h], i0, j0, rows, min(KB, n - j0), d, False)


@njit(parallel=True, cache=True, fastmath=FASTMATH)
def _softmax_core(s, p, scale, causal):
    # P[h, i] = softmax(S[h, i] * scale); causal: keys after i masked (P = 0). Every score is
    # read and every P written, masked ones included, as standard attention does.
    bh, n, _ = s.shape
    for t in prange(bh * n):
        h, i = t // n, t % n
        row, out = s[h, i], p[h, i]
        last = i if causal else n - 1
        mx = row[0]
        for j in range(1, n):
            if j <= last and row[j] > mx:
                mx = row[j]
        tot = row.dtype.type(0)
        for j in range(n):
            # masked: score x 0 (= 0, and a use of the score: every score is read, as counted)
            e = math.exp((row[j] - mx) * scale) if j <= last else row[j] * 0
            out[j] = e
            tot += e
        inv = 1 / tot
        for j in range(n):
            out[j] *= inv


@njit(parallel=True, cache=True, fastmath=FASTMATH)
def _pv_core(p, v, o):
    # O[h] = P[h] V[h] over every key (causal: the masked zeros too), one task per QB rows,
    # V taken in KB-key tiles transposed into a scratch.
    bh, n, d = v.shape
    nqb = (n + QB - 1) // QB
    for t in prange(bh * nqb):
        h, i0 = t // nqb, (t % nqb) * QB
        rows = min(QB, n - i0)
        vt = np.empty((d, KB), dtype=v.dtype)
        for j0 in range(0, n, KB):
            cols = min(KB, n - j0)
            _transpose_tile(v[h], j0, cols, vt)
            _abt(p[h], i0, j0, vt, 0, 0, o[h], i0, 0, rows, d, cols, j0 > 0)


@njit(parallel=True, cache=True, fastmath=FASTMATH)
def _flash_core(q, k, v, o, scale, causal):
    # FlashAttention's loop on the CPU: one task per (head, block of QB query rows); K/V are
    # streamed in KB-key tiles, the scores of a tile live in a QB x KB scratch, the running max
    # m, sum l and output acc are rescaled as each tile arrives (online softmax). S never
    # reaches memory. Causal: tiles after the block's last row are skipped, the diagonal one
    # masked.
    bh, n, d = q.shape
    nqb = (n + QB - 1) // QB
    for t in prange(bh * nqb):
        h, i0 = t // nqb, (t % nqb) * QB
        rows = min(QB, n - i0)
        zero = q.dtype.type(0)
        acc = np.zeros((QB, d), dtype=q.dtype)
        s = np.empty((QB, KB), dtype=q.dtype)
        vt = np.empty((d, KB), dtype=q.dtype)
        m = np.empty(QB, dtype=q.dtype)
        l = np.zeros(QB, dtype=q.dtype)  # noqa: E741
        kend = i0 + rows if causal else n
        for j0 in range(0, kend, KB):
            cols = min(KB, kend - j0)
            _abt(q[h], i0, 0, k[h], j0, 0, s, 0, 0, rows, cols, d, False)
            for a in range(rows):
                # keys after the row's own are masked (causal); the row always has key 0
                last = min(i0 + a - j0, cols - 1) if causal else cols - 1
                mx = s[a, 0] * scale
                for b in range(1, last + 1):
                    mx = max(mx, s[a, b] * scale)
                if j0 > 0:
                    mx = max(mx, m[a])
                    corr = math.exp(m[a] - mx)
                else:
                    corr = zero
                tot = zero
                for b in range(cols):
                    e = math.exp(s[a, b] * scale - mx) if b <= last else zero
                    s[a, b] = e
                    tot += e
                l[a] = l[a] * corr + tot
                m[a] = mx
                for x in range(d):
                    acc[a, x] *= corr
            _transpose_tile(v[h], j0, cols, vt)
            _abt(s, 0, 0, vt, 0, 0, acc, 0, 0, rows, d, cols, True)
        for a in range(rows):
            inv = 1 / l[a]
            for x in range(d):
                o[h, i0 + a, x] = acc[a, x] * inv


def _heads(*arrays: np.ndarray) -> list[np.ndarray]:
    """[batch, heads, N, ...] -> [batch*heads, N, ...] views."""
    return [a.reshape((-1, *a.shape[2:])) for a in arrays]


def _cpu_scores(Q, K, S, n, d):
    _scores_core(*_heads(Q, K, S))


def _cpu_softmax(causal: bool):
    def softmax(S, P, n, scale):
        s, p = _heads(S, P)
        _softmax_core(s, p, s.dtype.type(scale), causal)
    return softmax


def _cpu_pv(P, V, O, n, d):
    _pv_core(*_heads(P, V, O))


def _cpu_flash(causal: bool):
    def flash(Q, K, V, O, n, d, scale):
        q, k, v, o = _heads(Q, K, V, O)
        _flash_core(q, k, v, o, q.dtype.type(scale), causal)
    return flash


_LIB: dict[str, np.ndarray] = {}


def _cpu_library(causal: bool):
    """The BLAS formulation: per head and block of query rows (LIB_BYTES of scores), S = Q K^T
    by numpy.matmul into a scratch kept between calls, softmax by numpy ufuncs, O = P V by
    numpy.matmul. The score block stays in cache; S is never whole in memory."""
    def library(Q, K, V, O, n, d, scale):
        q, k, v, o = _heads(Q, K, V, O)
        rows = max(1, min(n, LIB_BYTES // (n * q.itemsize)))
        buf = _LIB.get("s")
        if buf is None or buf.shape != (rows, n) or buf.dtype != q.dtype:
            buf = _LIB["s"] = np.empty((rows, n), dtype=q.dtype)
            _LIB["upper"] = np.triu(np.ones((rows, rows), dtype=bool), 1)
        upper = _LIB["upper"]
        for h in range(q.shape[0]):
            kt = k[h].T
            for r0 in range(0, n, rows):
                r1 = min(r0 + rows, n)
                m, keys = r1 - r0, (r1 if causal else n)
                s = buf[:m, :keys]
                np.matmul(q[h, r0:r1], kt[:, :keys], out=s)
                s *= scale
                if causal:
                    s[:, r0:r1][upper[:m, :m]] = -np.inf
                s -= s.max(axis=1, keepdims=True)
                np.exp(s, out=s)
                s /= s.sum(axis=1, keepdims=True)
                np.matmul(s, v[h, :keys], out=o[h, r0:r1])
    return library


# --------------------------------------------------------------------------- declarations
def _inputs(size: Size, dtype: str) -> dict[str, Buf]:
    return {name: Buf(tuple(size), dtype, "input") for name in ("Q", "K", "V")}


def _outputs(size: Size, dtype: str) -> dict[str, Buf]:
    return {"O": Buf(tuple(size), dtype, "output")}


def _naive_temps(size: Size, dtype: str) -> dict[str, Buf]:
    b, h, n, _ = size
    return {"S": Buf((b, h, n, n), dtype), "P": Buf((b, h, n, n), dtype)}


def _naive_plan(causal: bool):
    def plan(size: Size, dtype: str) -> list[Launch]:
        b, h, n, d = size
        sc = b * h * n_scores(n, causal)
        return [
            Launch("scores", 2 * d * sc, ("Q", "K"), ("S",), ("Q", "K", "S", n, d),
                   note="S = Q K^T, the whole N x N"),
            Launch("softmax", 4 * sc, ("S",), ("P",), ("S", "P", n, _scale(d)),
                   note="P = softmax(S / sqrt(d))" + (", causal mask" if causal else "")),
            Launch("pv", 2 * d * sc, ("P", "V"), ("O",), ("P", "V", "O", n, d),
                   note="O = P V"),
        ]
    return plan


def _one_launch_plan(kernel: str, causal: bool, note: str):
    def plan(size: Size, dtype: str) -> list[Launch]:
        b, h, n, d = size
        return [Launch(kernel, flops_per_score(d) * b * h * n_scores(n, causal),
                       ("Q", "K", "V"), ("O",), ("Q", "K", "V", "O", n, d, _scale(d)),
                       note=note)]
    return plan


def _reference(causal: bool):
    def reference(x: dict[str, Any], size: Size, xp: Any) -> dict[str, Any]:
        # float64 (the inputs arrive so), one head and a block of query rows at a time
        # (REF_BYTES of scores), in the array module of the inputs (numpy, or CuPy on a GPU).
        b, h, n, d = size
        q, k, v = (x[name].reshape(b * h, n, d) for name in "QKV")
        o = xp.empty_like(q)
        rows = max(1, min(n, REF_BYTES // (8 * n)))
        for i in range(b * h):
            for r0 in range(0, n, rows):
                s = xp.matmul(q[i, r0:r0 + rows], k[i].T) * _scale(d)
                if causal:  # key j > query r0 + a: masked
                    s = xp.where(xp.triu(xp.ones_like(s), k=r0 + 1) > 0, -xp.inf, s)
                s -= s.max(axis=-1, keepdims=True)
                e = xp.exp(s)
                o[i, r0:r0 + rows] = xp.matmul(e, v[i]) / e.sum(axis=-1, keepdims=True)
        return {"O": o.reshape(b, h, n, d)}
    return reference


# -------------------------------------------------------------------------------- sizes
# GPU: FlashAttention's benchmark shape, 16k tokens (batch x N) of 16 heads of d = 128, N from
# 512 to 16k. CPU: 2 heads of d = 64, N from 256 to 2048, batch = 1024 / N (at least 1): S and
# P are 2 MiB each at N = 256 and 32 MiB at 2048, where together they outgrow a 32 MiB
# last-level cache; the cases stay short (tens of ms) so that the CPU bench stays within its
# time. The sweep runs in the dtypes the device computes in (fp16/bf16 tensor cores; fp32 on a
# CPU), and at one N in the others and for the causal workload.
GPU_SWEEP = (512, 1024, 2048, 4096, 8192, 16384)
GPU_TOKENS, GPU_HEADS, GPU_D = 16384, 16, 128
CPU_SWEEP = (256, 512, 1024, 2048)
CPU_TOKENS, CPU_HEADS, CPU_D = 1024, 2, 64


def _sweep_sizes(ctx: SizeContext, causal: bool) -> list[Size]:
    if ctx.kind == "gpu":
        if ctx.quick:
            return [(1, 8, 1024, GPU_D)]
        sweep = GPU_SWEEP if ctx.dtype in ("fp16", "bf16") and not causal else (4096,)
        return [(max(1, GPU_TOKENS // n), GPU_HEADS, n, GPU_D) for n in sweep]
    sweep = CPU_SWEEP if ctx.dtype == "fp32" and not causal else (1024,)
    return [(max(1, CPU_TOKENS // n), CPU_HEADS, n, CPU_D) for n in sweep]


# ------------------------------------------------------------------ CUDA C (attention.cu)
def gpu_refuse(size: Size, dtype: str, backend: str, naive: bool) -> str | None:
    """What the CUDA C kernels cannot run: head dims other than 64/128, more heads than a grid
    dimension holds, and (naive) rows longer than the softmax holds in registers."""
    if backend not in ("cuda", "pycuda"):
        return None
    b, h, n, d = (int(s) for s in size)
    if d not in GPU_HEAD_DIMS:
        return (f"the tensor-core attention kernels are built for head dims "
                f"{' and '.join(map(str, GPU_HEAD_DIMS))}, got d = {d}")
    if b * h > 65535:
        return f"batch x heads = {b * h} exceeds a grid dimension (65535)"
    if naive and n > GPU_ROW_MAX:
        return (f"the naive softmax keeps a row in one block's registers: N = {n} > "
                f"{GPU_ROW_MAX}; use the flash variant")
    return None


def _tiles(ctx: cu.LaunchCtx) -> int:
    return cu.ceil_div(int(ctx.size[2]), GPU_BM)


def _bh(ctx: cu.LaunchCtx) -> int:
    return int(ctx.size[0]) * int(ctx.size[1])


def softmax_threads(n: int) -> int:
    """Block size of attn_softmax: enough threads for GPU_ROW_VALS values each, at least 4 warps."""
    return min(GPU_SM_THREADS, max(128, cu.ceil_div(cu.ceil_div(n, GPU_ROW_VALS), 32) * 32))


_TC = ("fp16", "bf16")
_block = cu.block1d(GPU_THREADS)


def _cuda_tables(causal: bool) -> dict[str, dict[str, Any]]:
    c = "_causal" if causal else ""
    return {
        "naive": {
            "scores": cu.CudaKernel("attention.cu", "attn_scores", dtypes=_TC, block=_block,
                                    grid=lambda ctx: (_tiles(ctx), _tiles(ctx), _bh(ctx)),
                                    note="mma.sync m16n8k16, 64 x 64 score tiles"),
            "softmax": cu.CudaKernel(
                "attention.cu", f"attn_softmax{c}", dtypes=_TC,
                grid=lambda ctx: (_bh(ctx) * int(ctx.size[2]), 1, 1),
                block=lambda ctx: (softmax_threads(int(ctx.size[2])), 1, 1),
                note="one block per row, the row in registers"),
            "pv": cu.CudaKernel("attention.cu", "attn_pv", dtypes=_TC, block=_block,
                                grid=lambda ctx: (_tiles(ctx), _bh(ctx), 1),
                                note="mma.sync m16n8k16, P and V tiles through shared memory"),
        },
        "flash": {"flash": cu.CudaKernel(
            "attention.cu", f"attn_flash{c}", dtypes=_TC, block=_block,
            grid=lambda ctx: (_tiles(ctx), _bh(ctx), 1),
            note="mma.sync m16n8k16, 64 query rows per block, 64-key K/V tiles, online "
                 "softmax in registers")},
        "library": {"library": cu.CudaLibrary(
            "sdpa_causal" if causal else "sdpa", dtypes=_TC, module="torch",
            note="torch.nn.functional.scaled_dot_product_attention on DLPack views")},
    }


def _unit(kind: str, dtype: str) -> str:
    """Both products on tensor cores on a GPU (mma.sync; torch's SDPA kernels), SIMD lanes on
    a CPU."""
    return "tensor" if kind == "gpu" and dtype in _TC else "simt"


def workload(causal: bool = False) -> Workload:
    """The attention workload, non-causal or causal."""
    cuda = _cuda_tables(causal)
    dtypes = ("fp32", "fp64", "fp16", "bf16")
    no_twin = {"numba_cuda": "no Numba CUDA twin of the tensor-core attention kernels"}
    variants = {
        "naive": Variant(
            name="naive",
            description="standard attention: S = QK^T, P = softmax(S), O = PV, three launches "
                        "with S and P (N x N per head) in memory",
            dtypes=dtypes, plan=_naive_plan(causal), temps=_naive_temps,
            impls={"cpu": {"scores": _cpu_scores, "softmax": _cpu_softmax(causal),
                           "pv": _cpu_pv},
                   "cuda": cuda["naive"]},
            unit_on=_unit, unsupported=no_twin,
            refuse=lambda size, dtype, backend: gpu_refuse(size, dtype, backend, True)),
        "flash": Variant(
            name="flash",
            description="one launch: K/V tiles streamed through shared memory / cache, "
                        "online softmax, S never in memory",
            dtypes=dtypes,
            plan=_one_launch_plan("flash", causal, "online softmax over K/V tiles"),
            impls={"cpu": {"flash": _cpu_flash(causal)}, "cuda": cuda["flash"]},
            unit_on=_unit, unsupported=no_twin, arrow_from="naive",
            refuse=lambda size, dtype, backend: gpu_refuse(size, dtype, backend, False)),
        "library": Variant(
            name="library",
            description="torch scaled_dot_product_attention (GPU); numpy BLAS matmuls and "
                        "ufunc softmax per block of query rows (CPU)",
            dtypes=dtypes,
            plan=_one_launch_plan("library", causal, "the library's own kernels"),
            impls={"cpu": {"library": _cpu_library(causal)}, "cuda": cuda["library"]},
            unit_on=_unit, unsupported=no_twin),
    }
    name = "attention_causal" if causal else "attention"
    return Workload(
        name=name,
        description=("O = softmax(Q K^T / sqrt(d)) V over batch x heads x N x d"
                     + (", causal" if causal else "")),
        size_names=("batch", "heads", "n", "d"),
        inputs=_inputs,
        outputs=_outputs,
        reference=_reference(causal),
        tolerance={"fp64": 1e-12, "fp32": 1e-5, "fp16": 3e-3, "bf16": 2e-2},
        variants=variants,
        default_size=lambda ctx: _sweep_sizes(ctx, causal)[0],
        sweep=lambda ctx: _sweep_sizes(ctx, causal),
        quick_size=(1, 2, 256, 64),
        flop_convention=(f"{name}: 4d + 4 FLOPs per score (2d QK^T, 2d PV, 4 softmax: scale, "
                         "max, subtract, sum); exp and the normalisation not counted"
                         + ("; only the N(N+1)/2 scores on or below the diagonal counted"
                            if causal else "")),
        order=5 if causal else 4,
        marker="P" if causal else "*",
    )


WORKLOAD = workload(causal=False)
