"""The CPU (Numba) kernels of attention (kernels/attention.py declares the workload): the
naive pipeline's three launches (S = QK^T, P = softmax(S), O = PV), flash (online softmax over
K/V tiles that stay in cache) and the BLAS formulation, causal or not."""

from __future__ import annotations

import math

import numpy as np
from numba import njit, prange

from .spec import CpuCode, ones

FASTMATH = {"reassoc", "contract"}
QB = 32  # CPU flash: query rows per parallel task
KB = 64  # CPU flash: keys per tile (a 64 x d K/V tile sits in L1/L2)
LIB_BYTES = 4 << 20  # CPU library: scores per BLAS call (a block of query rows, in cache)

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


@njit(inline="always")
def _query_blocks(n, qb=QB):
    """The tasks of one head: a task per ``qb`` query rows."""
    return (n + qb - 1) // qb


@njit(inline="always")
def _query_block(t, n, qb=QB):
    """Task t's head, first query row and number of rows (qb, fewer in the last block)."""
    nqb = _query_blocks(n, qb)
    i0 = (t % nqb) * qb
    return t // nqb, i0, min(qb, n - i0)


@njit(parallel=True, cache=True, fastmath=FASTMATH)
def _scores_core(q, k, s):
    # S[h] = Q[h] K[h]^T, the whole N x N (causal or not), one task per QB query rows.
    bh, n, d = q.shape
    for t in prange(bh * _query_blocks(n)):
        h, i0, rows = _query_block(t, n)
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
    for t in prange(bh * _query_blocks(n)):
        h, i0, rows = _query_block(t, n)
        vt = np.empty((d, KB), dtype=v.dtype)
        for j0 in range(0, n, KB):
            cols = min(KB, n - j0)
            _transpose_tile(v[h], j0, cols, vt)
            _abt(p[h], i0, j0, vt, 0, 0, o[h], i0, 0, rows, d, cols, j0 > 0)


@njit(parallel=True, cache=True, fastmath=FASTMATH)
def _flash_core(q, k, v, o, scale, causal, qb, kb):
    # FlashAttention's loop on the CPU: one task per (head, block of qb query rows); K/V are
    # streamed in kb-key tiles, the scores of a tile live in a qb x kb scratch, the running max
    # m, sum l and output acc are rescaled as each tile arrives (online softmax). S never
    # reaches memory. Causal: tiles after the block's last row are skipped, the diagonal one
    # masked.
    bh, n, d = q.shape
    for t in prange(bh * _query_blocks(n, qb)):
        h, i0, rows = _query_block(t, n, qb)
        zero = q.dtype.type(0)
        acc = np.zeros((qb, d), dtype=q.dtype)
        s = np.empty((qb, kb), dtype=q.dtype)
        vt = np.empty((d, kb), dtype=q.dtype)
        m = np.empty(qb, dtype=q.dtype)
        l = np.zeros(qb, dtype=q.dtype)  # noqa: E741
        kend = i0 + rows if causal else n
        for j0 in range(0, kend, kb):
            cols = min(kb, kend - j0)
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


def cpu_scores(Q, K, S, n, d):
    _scores_core(*_heads(Q, K, S))


def cpu_softmax(causal: bool):
    def softmax(S, P, n, scale):
        s, p = _heads(S, P)
        _softmax_core(s, p, s.dtype.type(scale), causal)
    return softmax


def cpu_pv(P, V, O, n, d):
    _pv_core(*_heads(P, V, O))


def cpu_flash(causal: bool, qb: int = QB, kb: int = KB):
    def flash(Q, K, V, O, n, d, scale):
        q, k, v, o = _heads(Q, K, V, O)
        _flash_core(q, k, v, o, q.dtype.type(scale), causal, qb, kb)
    return flash


# The flash loop's tunable parameters (Variant.tune): query rows per parallel task and keys per
# K/V tile. Neither changes the FLOPs nor the bytes counted (Q, K, V read and O written once:
# the tiles every query block re-reads come from cache, as attention.py counts them), so every
# configuration shares the variant's plan. Small blocks pay the online softmax's rescaling and
# the loop overhead per few FMAs; large ones outgrow L1/L2 (a 256 x 128 fp64 tile is 256 KiB).
FLASH_QB = (8, 16, 32, 64, 128)
FLASH_KB = (16, 32, 64, 128, 256)


_LIB: dict[str, np.ndarray] = {}


def cpu_library(causal: bool):
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


# Its parallel CPU kernels as the codegen matrix compiles them (spec.CpuCode): 2 heads of 70
# rows, d = 64.
CPU_CODE = (
    CpuCode("_scores_core", lambda t: (*ones((2, 70, 64), t, 2), *ones((2, 70, 70), t)), 8,
            why="Q K^T through the register-blocked _abt: vector FMAs"),
    CpuCode("_softmax_core", lambda t: (*ones((2, 70, 70), t, 2), t(0.125), True)),
    CpuCode("_pv_core", lambda t: (*ones((2, 70, 70), t), *ones((2, 70, 64), t, 2)), 8,
            why="P V through the register-blocked _abt: vector FMAs"),
    CpuCode("_flash_core", lambda t: (*ones((2, 70, 64), t, 4), t(0.125), True, QB, KB), 8,
            why="both products through the register-blocked _abt: vector FMAs"),
)
