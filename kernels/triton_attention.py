"""Triton flash attention for this suite: O = softmax(Q K^T / sqrt(d)) V, forward, one program
per (block of BM query rows, batch x head); K/V streamed in blocks of BN keys with the online
softmax (running max m and sum l, the accumulator rescaled by exp(m_old - m_new)); S never in
memory. ``CAUSAL`` masks keys after the query and stops at the diagonal block. Both products
are ``tl.dot`` (tensor cores for fp16/bf16; fp32 through "ieee", exact); head dims up to 256
(padded to a power of two, masked).

Counts (kernels/triton_counts.py): per valid score 2d (Q K^T) + 2d (P V) + 4 (scale, max,
subtract, sum), the workload's 4d + 4; exp and the final division are not counted. The online
softmax adds, per valid query row and K/V block, 1 subtract (m_old - m_new), 1 multiply (l
rescale) and the accumulator's rescale, d multiplies (BLOCK_D when d is not a power of two):
the convention leaves these out, so a kernel's count exceeds the declaration by exactly that.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import triton
import triton.language as tl

from .triton_gemm import interpreting

BM, BN = 32, 32


@triton.jit
def flash_kernel(Q, K, V, O, N, D, scale, BM: tl.constexpr, BN: tl.constexpr,
                 BD: tl.constexpr, CAUSAL: tl.constexpr, PRECISION: tl.constexpr,
                 WIDEN: tl.constexpr = False):
    bh = tl.program_id(1).to(tl.int64)
    base = bh * N * D
    rows = tl.program_id(0) * BM + tl.arange(0, BM)
    ds = tl.arange(0, BD)
    rmask = rows < N
    dmask = ds < D
    q = tl.load(Q + base + rows[:, None] * D + ds[None, :], mask=rmask[:, None] & dmask[None, :],
                other=0.0)
    if WIDEN:  # interpreter only (see triton_gemm.interpreting)
        q = q.to(tl.float32)
    m_i = tl.full((BM,), float("-inf"), tl.float32)
    l_i = tl.zeros((BM,), tl.float32)
    acc = tl.zeros((BM, BD), tl.float32)
    hi = N
    if CAUSAL:
        hi = tl.minimum(N, (tl.program_id(0) + 1) * BM)
    for k0 in range(0, hi, BN):
        keys = k0 + tl.arange(0, BN)
        kmask = keys < N
        kt = tl.load(K + base + keys[None, :] * D + ds[:, None],
                     mask=kmask[None, :] & dmask[:, None], other=0.0)
        if WIDEN:
            kt = kt.to(tl.float32)
        s = tl.dot(q, kt, input_precision=PRECISION) * scale
        valid = kmask[None, :]
        if CAUSAL:
            valid = valid & (keys[None, :] <= rows[:, None])
        s = tl.where(valid, s, float("-inf"))
        m_new = tl.maximum(m_i, tl.max(s, axis=1))
        p = tl.exp(s - m_new[:, None])
        alpha = tl.exp(m_i - m_new)
        l_i = l_i * alpha + tl.sum(p, axis=1)
        v = tl.load(V + base + keys[:, None] * D + ds[None, :],
                    mask=kmask[:, None] & dmask[None, :], other=0.0)
        if WIDEN:
            v = v.to(tl.float32)
        acc = tl.dot(p.to(v.dtype), v, acc * alpha[:, None], input_precision=PRECISION)
        m_i = m_new
    out = acc / l_i[:, None]
    tl.store(O + base + rows[:, None] * D + ds[None, :], out.to(O.dtype.element_ty),
             mask=rmask[:, None] & dmask[None, :])


def block_d(d: int) -> int:
    return max(16, triton.next_power_of_2(int(d)))


def _launch(dtype: str, q: Any, k: Any, v: Any, o: Any, n: int, d: int, scale: float,
            causal: bool, tune: dict[str, int]) -> Callable[[], None]:
    """``tune``: a configuration of the variant's Triton space (BM, BN, num_warps,
    num_stages); none: the kernel as it runs untuned."""
    b_h = q.numel() // (int(n) * int(d))
    tiles = {"BM": BM, "BN": BN, **tune}
    kern = flash_kernel[(triton.cdiv(int(n), tiles["BM"]), b_h)]
    prec = "ieee" if dtype == "fp32" else None
    widen = dtype == "bf16" and interpreting()
    return lambda: kern(q, k, v, o, n, d, scale, **tiles, BD=block_d(d), CAUSAL=causal,
                        PRECISION=prec, WIDEN=widen)


def flash(dtype: str, q: Any, k: Any, v: Any, o: Any, n: int, d: int, scale: float,
          **tune: int) -> Callable[[], None]:
    return _launch(dtype, q, k, v, o, n, d, scale, False, tune)


def flash_causal(dtype: str, q: Any, k: Any, v: Any, o: Any, n: int, d: int, scale: float,
                 **tune: int) -> Callable[[], None]:
    return _launch(dtype, q, k, v, o, n, d, scale, True, tune)
