"""Triton kernels of the streaming workloads: vector_add, l2norm (naive and fused), rownorm
(fused) and gemv. Written for this suite; launched through kernels/triton_impls.py.

Every kernel loads its storage dtype, computes in ``ACC`` (fp64 for fp64 storage, fp32
otherwise: fp16/bf16/fp8 arithmetic is fp32 here, as the suite's roofs assume for such
storage) and stores the storage dtype. Elementwise kernels take BLOCK = 1024 elements a
program: a program's lanes are contiguous, so the compiler emits 16-byte vector loads on
aligned arrays (checked in the generated PTX by tests/kernels/test_triton.py).

FLOPs as the workloads count them, and as kernels/triton_counts.py reads them from these
kernels: one per add or multiply on a valid lane, a sum of k values k - 1 adds plus the add
that accumulates it; sqrt and rsqrt are special-function ops, not counted.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import triton
import triton.language as tl

BLOCK = 1024
ROW_BLOCK = 1024  # rownorm: a row's chunk per step
GEMV_BM, GEMV_BK = 16, 256


def acc_type(dtype: str) -> Any:
    """The compute dtype of a storage dtype."""
    return tl.float64 if dtype == "fp64" else tl.float32


@triton.jit
def _block(n, BLOCK: tl.constexpr):
    """An elementwise program's BLOCK contiguous elements: their offsets (int64: n may pass
    2**31) and which of them are below n."""
    offs = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    return offs, offs < n


@triton.jit
def add_kernel(a, b, c, n, ACC: tl.constexpr, BLOCK: tl.constexpr):
    offs, m = _block(n, BLOCK)
    x = tl.load(a + offs, mask=m).to(ACC)
    y = tl.load(b + offs, mask=m).to(ACC)
    tl.store(c + offs, (x + y).to(c.dtype.element_ty), mask=m)


@triton.jit
def square_kernel(a, y, n, ACC: tl.constexpr, BLOCK: tl.constexpr):
    offs, m = _block(n, BLOCK)
    x = tl.load(a + offs, mask=m).to(ACC)
    tl.store(y + offs, (x * x).to(y.dtype.element_ty), mask=m)


@triton.jit
def sqrt_kernel(a, y, n, ACC: tl.constexpr, BLOCK: tl.constexpr):
    offs, m = _block(n, BLOCK)
    x = tl.load(a + offs, mask=m).to(ACC)
    tl.store(y + offs, tl.sqrt(x).to(y.dtype.element_ty), mask=m)


@triton.jit
def l2_fused_kernel(a, b, out, n, ACC: tl.constexpr, BLOCK: tl.constexpr):
    offs, m = _block(n, BLOCK)
    x = tl.load(a + offs, mask=m).to(ACC)
    y = tl.load(b + offs, mask=m).to(ACC)
    tl.store(out + offs, tl.sqrt(x * x + y * y).to(out.dtype.element_ty), mask=m)


@triton.jit
def rownorm_fused_kernel(x, y, H, eps, ACC: tl.constexpr, BLOCK: tl.constexpr):
    """One program a row: sum the squares (x read once), then read x again and scale."""
    base = tl.program_id(0).to(tl.int64) * H
    tot = tl.zeros((1,), ACC)
    for h0 in range(0, H, BLOCK):
        offs = h0 + tl.arange(0, BLOCK)
        v = tl.load(x + base + offs, mask=offs < H).to(ACC)
        tot += tl.sum(v * v, axis=0)
    r = tl.rsqrt(tot + eps)
    for h0 in range(0, H, BLOCK):
        offs = h0 + tl.arange(0, BLOCK)
        m = offs < H
        v = tl.load(x + base + offs, mask=m).to(ACC)
        tl.store(y + base + offs, (v * r).to(y.dtype.element_ty), mask=m)


@triton.jit
def gemv_kernel(W, x, y, M, K, ACC: tl.constexpr, BM: tl.constexpr, BK: tl.constexpr):
    """BM rows a program, K in chunks of BK: y[rows] = sum over k of W[rows, k] x[k]."""
    rows = tl.program_id(0).to(tl.int64) * BM + tl.arange(0, BM)
    rm = rows < M
    acc = tl.zeros((BM,), ACC)
    for k0 in range(0, K, BK):
        ks = k0 + tl.arange(0, BK)
        km = ks < K
        w = tl.load(W + rows[:, None] * K + ks[None, :], mask=rm[:, None] & km[None, :])
        v = tl.load(x + ks, mask=km).to(ACC)
        acc += tl.sum(w.to(ACC) * v[None, :], axis=1)
    tl.store(y + rows, acc.to(y.dtype.element_ty), mask=rm)


def _grid1(n: int, block: int) -> tuple[int]:
    return (triton.cdiv(int(n), block),)


# ---- launchers: launcher(dtype, *launch args) -> a call that launches once (triton_impls)
def add(dtype: str, a: Any, b: Any, c: Any, n: int) -> Callable[[], None]:
    k = add_kernel[_grid1(n, BLOCK)]
    return lambda: k(a, b, c, n, ACC=acc_type(dtype), BLOCK=BLOCK)


def square(dtype: str, a: Any, y: Any, n: int) -> Callable[[], None]:
    k = square_kernel[_grid1(n, BLOCK)]
    return lambda: k(a, y, n, ACC=acc_type(dtype), BLOCK=BLOCK)


def sqrt(dtype: str, a: Any, y: Any, n: int) -> Callable[[], None]:
    k = sqrt_kernel[_grid1(n, BLOCK)]
    return lambda: k(a, y, n, ACC=acc_type(dtype), BLOCK=BLOCK)


def fused(dtype: str, a: Any, b: Any, out: Any, n: int) -> Callable[[], None]:
    k = l2_fused_kernel[_grid1(n, BLOCK)]
    return lambda: k(a, b, out, n, ACC=acc_type(dtype), BLOCK=BLOCK)


def rownorm_fused(dtype: str, x: Any, y: Any, b: int, h: int, eps: float, **tune: int
                  ) -> Callable[[], None]:
    """``tune``: a configuration of the variant's Triton space (BLOCK, num_warps)."""
    k = rownorm_fused_kernel[(int(b),)]
    launch = {"BLOCK": ROW_BLOCK, **tune}
    return lambda: k(x, y, h, eps, ACC=acc_type(dtype), **launch)


def gemv(dtype: str, W: Any, x: Any, y: Any, m: int, k: int) -> Callable[[], None]:
    kern = gemv_kernel[_grid1(m, GEMV_BM)]
    return lambda: kern(W, x, y, m, k, ACC=acc_type(dtype), BM=GEMV_BM, BK=GEMV_BK)
