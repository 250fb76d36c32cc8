"""Planted faults for the codegen matrix: kernels as they were (or could be) written, with a
fault that shows on some targets only. tests/kernels/test_cpu_kernels.py checks that the
matrix, run on any x86 machine, names the targets where each shows.

- ``norm_rows_nt_wrapping``: rownorm's non-temporal row kernel before issue 28. Its scalar tail
  ``for j in range(v1, n): y[j] = x[j] * r`` indexes from a start LLVM cannot prove
  non-negative, so numba's negative-index wraparound stays in every index; LLVM vectorises
  that tail with vgather/vscatter wherever gathers are legal and cheap in its model: znver4 and
  the Intel AVX-512 cores, Skylake (AVX2, fast gathers) for the gathers; not on haswell,
  znver2/3 or x86-64-v3.
- ``norm_rows_nt_tuned``: a change that gathers on one target only, as a tuning branch taken
  for one CPU does (the FMA probe's shape is chosen per CPU too): on znver4 the row's tail is
  the loop above, elsewhere the kernel is rownorm's own. It gathers on znver4 and nowhere else,
  so a test that compiles for the host alone passes on every Intel machine.
  (A reduction over two interleaved streams, tried first, does not gather: LLVM loads it as
  interleaved vectors on every target.)
"""

from __future__ import annotations

from typing import Any

from numba import njit, prange
from roofbench.kernels import nt_stores, rownorm


@njit(inline="always")
def _scale_row_wrapping(x, y, r, n):
    v0 = 0
    while v0 < n and nt_stores._address(y, v0) % nt_stores.VEC_BYTES != 0:
        y[v0] = x[v0] * r
        v0 += 1
    w = nt_stores.VEC_BYTES // y.itemsize
    v1 = v0 + (n - v0) // w * w
    for j in range(v0, v1, w):
        nt_stores._nt_scale(y, j, x, r)
    for j in range(v1, n):  # the fault: j >= 0 is not provable, the wraparound stays
        y[j] = x[j] * r


def norm_rows_nt_wrapping(x, y, batch, hidden, eps, rows):
    for c in prange((batch + rows - 1) // rows):
        for i in range(c * rows, min(c * rows + rows, batch)):
            row = x[i]
            _scale_row_wrapping(row, y[i], rownorm._inv_norm(row, hidden, eps), hidden)
        nt_stores.store_fence()


TUNED_FOR = "znver4"


def norm_rows_nt_tuned() -> Any:
    """The planted tuning: the wrapping tail when numba compiles for TUNED_FOR, else rownorm's
    own kernel."""
    from roofbench.roofs.probes.cpu_fma import target_cpu

    return norm_rows_nt_wrapping if target_cpu()[0] == TUNED_FOR else rownorm._norm_rows_nt


# name: (function, fastmath); compiled with the arguments of the kernel it stands in for
PLANTED: dict[str, tuple[Any, Any]] = {
    "norm_rows_nt_wrapping": (lambda: norm_rows_nt_wrapping, rownorm.REDUCE),
    "norm_rows_nt_tuned": (norm_rows_nt_tuned, rownorm.REDUCE),
}
STANDS_FOR = {"norm_rows_nt_wrapping": "rownorm._norm_rows_nt",
              "norm_rows_nt_tuned": "rownorm._norm_rows_nt"}
# Where each must be caught (at least; the matrix's other rows as found on 2026-12-02 with
# numba 0.68.1 / llvmlite 0.46: docs/tests.md).
CAUGHT_ON = {
    "norm_rows_nt_wrapping": {"znver4", "skylake-avx512", "icelake-server", "sapphirerapids",
                              "emeraldrapids"},
    "norm_rows_nt_tuned": {TUNED_FOR},
}
# Where each must not be (the AVX2 cores whose LLVM model finds gathers slow): a row compiled for
# the wrong CPU (a matrix that lost a target's settings) shows here as in CAUGHT_ON.
CLEAN_ON = {"norm_rows_nt_wrapping": {"haswell", "znver2", "znver3", "x86-64-v3"},
            "norm_rows_nt_tuned": {"haswell", "znver2", "znver3", "x86-64-v3", "skylake",
                                   "skylake-avx512", "icelake-server", "sapphirerapids",
                                   "emeraldrapids"}}


def planted_jobs(dtypes: tuple[str, ...] = ("float32", "float64")) -> list[Any]:
    """Each planted kernel in ``dtypes`` (codegen_fanout.Job, keyed as the kernel table's
    ``name-dtype``): its function picked where it is compiled, as a tuning branch is."""
    from codegen_fanout import Job
    from codegen_kernels import ROWS, signature

    return [Job(f"{name}-{dtype}", pick, signature(ROWS[STANDS_FOR[name]], dtype), fastmath)
            for name, (pick, fastmath) in PLANTED.items() for dtype in dtypes]


def planted_facts() -> dict[str, Any]:
    """In the child (one process per target): each planted kernel compiled in both dtypes."""
    from codegen_matrix import code_facts, compile_asm

    return {j.key: code_facts(compile_asm(j.pick(), j.sig, j.fastmath)) for j in planted_jobs()}
