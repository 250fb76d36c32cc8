"""Triton GEMM for this suite: C = A B, tiled, each K step one ``tl.dot`` into an fp32
accumulator (tensor cores: wgmma on sm_90, mma.sync on sm_80/89; checked in the PTX by
tests/kernels/test_triton.py). Storage fp16, bf16, fp8 e4m3 (sm_89+: tl.dot has no fp8 form
below) or fp32 through TF32 (``input_precision="tf32"``; "ieee" keeps fp32 exact).

Counts: 2MNK FLOPs (each valid product of a dot is a multiply and an add); a program reads its
rows of A and columns of B once per K step, so A is read N/BN times and B M/BM times: the
workload declares every matrix moved once (the re-reads hit the L2), which equals the
*unique* bytes the kernel touches (kernels/triton_counts.py).
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

import triton
import triton.language as tl

BM, BN, BK = 64, 64, 32


@triton.jit
def gemm_kernel(A, B, C, M, N, K, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr,
                PRECISION: tl.constexpr, WIDEN: tl.constexpr = False):
    rm = tl.program_id(0).to(tl.int64) * BM + tl.arange(0, BM)
    rn = tl.program_id(1).to(tl.int64) * BN + tl.arange(0, BN)
    rk = tl.arange(0, BK)
    acc = tl.zeros((BM, BN), tl.float32)
    for k0 in range(0, K, BK):
        ks = k0 + rk
        a = tl.load(A + rm[:, None] * K + ks[None, :], mask=(rm[:, None] < M) & (ks[None, :] < K),
                    other=0.0)
        b = tl.load(B + ks[:, None] * N + rn[None, :], mask=(ks[:, None] < K) & (rn[None, :] < N),
                    other=0.0)
        if WIDEN:  # the interpreter's tl.dot reads bf16 bits as integers: widen first
            a, b = a.to(tl.float32), b.to(tl.float32)
        acc = tl.dot(a, b, acc, input_precision=PRECISION)
    tl.store(C + rm[:, None] * N + rn[None, :], acc.to(C.dtype.element_ty),
             mask=(rm[:, None] < M) & (rn[None, :] < N))


def gemm(dtype: str, A: Any, B: Any, C: Any, m: int, n: int, k: int,
         precision: str = "tf32", **tune: int) -> Callable[[], None]:
    """C = A B; ``precision`` applies to fp32 storage only ("tf32" or "ieee"). ``tune``: a
    configuration of the variant's Triton space (BM, BN, BK, num_warps, num_stages)."""
    tiles = {"BM": BM, "BN": BN, "BK": BK, **tune}
    kern = gemm_kernel[(triton.cdiv(int(m), tiles["BM"]), triton.cdiv(int(n), tiles["BN"]))]
    prec = precision if dtype == "fp32" else None
    widen = dtype == "bf16" and interpreting()
    return lambda: kern(A, B, C, m, n, k, **tiles, PRECISION=prec, WIDEN=widen)


def interpreting() -> bool:
    """Under TRITON_INTERPRET=1 (numpy has no bf16: the interpreter's tl.dot multiplies the
    raw bits of bf16 operands as integers, so the kernels widen them to fp32 first there;
    the compiled kernel keeps its bf16 tl.dot)."""
    return os.environ.get("TRITON_INTERPRET", "0") not in ("", "0")
