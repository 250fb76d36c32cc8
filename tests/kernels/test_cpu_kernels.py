"""Every CPU kernel against its float64 reference, odd sizes included."""

from __future__ import annotations

import re

import numba
import numpy as np
import pytest
from roofbench.bench.backends.cpu import CpuBackend
from roofbench.bench.measure.runner import validate
from roofbench.kernels import attention_cpu, gemm, gemv, rownorm
from roofbench.kernels.registry import workloads
from roofbench.kernels.spec import Case
from roofbench.roofs.probes import x86_asm

SIZES = {
    "vector_add": [(1,), (17,), (1001,)],
    "l2norm": [(1,), (17,), (1001,)],
    "rownorm": [(1, 1), (3, 17), (5, 1000)],
    # Crosses every CPU tile edge (64 x 64 blocks of C, 4 KiB k segments: 1024 FP32 or 512
    # FP64 values) and the 4 x 4 register block's leftover rows and columns.
    "gemm": [(1, 1, 1), (17, 5, 33), (70, 300, 140), (67, 130, 1100)],
    # batch x heads x N x d: odd N crosses the 32-row query blocks and 64-key tiles, odd d the
    # 2 x 4 register block's leftovers; N = 1100 makes the library take several row blocks.
    "attention": [(1, 1, 1, 5), (1, 2, 67, 37), (2, 1, 131, 64), (1, 1, 1100, 8)],
    "attention_causal": [(1, 1, 1, 5), (1, 2, 67, 37), (2, 1, 131, 64), (1, 1, 1100, 8)],
    "gemv": [(1, 1), (37, 1001), (64, 4096)],
}


def cpu_cases():
    for w in workloads().values():
        for v in w.variants.values():
            if "cpu" not in v.impls:
                continue
            for d in ("fp32", "fp64"):
                if d not in v.dtypes:
                    continue
                for s in SIZES[w.name]:
                    yield pytest.param(w.name, v.name, d, s, id=f"{w.name}-{v.name}-{d}-"
                                       + "x".join(map(str, s)))


@pytest.mark.parametrize("w,v,dtype,size", list(cpu_cases()))
def test_cpu_kernel_matches_float64_reference(w, v, dtype, size):
    wl = workloads()[w]
    case = Case(wl, wl.variants[v], dtype, size)
    inputs = wl.make_inputs(size, dtype, np.random.default_rng(7))
    ref = wl.expected(inputs, size, case.dtype)
    prep = CpuBackend().prepare(case, inputs)
    prep.poison()
    prep.run()
    ok, err, why = validate(case, prep.outputs(), ref)
    assert ok, why
    assert err <= wl.tolerance[dtype]


# ----------------------------------------------------------------------------- thread counts


@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("w,v,size", [("gemm", "regblock", (70, 300, 140)),
                                      ("gemm", "tiled", (70, 300, 140)),
                                      ("rownorm", "onepass", (5, 1000)),
                                      ("l2norm", "naive", (1001,)),
                                      ("attention", "flash", (2, 1, 131, 64)),
                                      ("attention_causal", "naive", (1, 2, 67, 37)),
                                      ("gemv", "rows", (37, 1001))])
def test_cpu_kernels_are_right_at_any_thread_count(threads, w, v, size):
    # More threads than this machine has cannot be started; 1 thread and all of them cover
    # the split of the parallel loops (64 x 64 blocks of C, rows, elements).
    threads = min(threads, numba.config.NUMBA_NUM_THREADS)
    wl = workloads()[w]
    case = Case(wl, wl.variants[v], "fp32", size)
    inputs = wl.make_inputs(size, "fp32", np.random.default_rng(3))
    ref = wl.expected(inputs, size, case.dtype)
    before = numba.get_num_threads()
    numba.set_num_threads(threads)
    try:
        prep = CpuBackend().prepare(case, inputs)
        prep.poison()
        prep.run()
    finally:
        numba.set_num_threads(before)
    ok, _, why = validate(case, prep.outputs(), ref)
    assert ok, why


# ----------------------------------------------------------------------------- vectorisation


def _packed_fma_and_gathers(fn, args, fastmath) -> tuple[int, int]:
    """Compile a fresh copy of a kernel (cached code cannot be inspected) and count packed
    FMA/mul/add instructions and gathers in its machine code."""
    f = numba.njit(parallel=True, fastmath=fastmath)(fn.py_func)
    f(*args)
    asm = f.inspect_asm(f.signatures[0])
    packed = len(re.findall(r"\bv(?:fn?m(?:add|sub)\d{3}|mul|add)p[sd]\s[^\n]*%[xyz]mm", asm))
    return packed, asm.count("vgather")


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_gemm_micro_kernels_are_vectorised(dtype):
    # The reason the tiled and register-blocked CPU GEMMs are fast: LLVM turns their k loops
    # into vector FMAs on contiguous rows (a negative-index wraparound in an index would make
    # it gather, and a strided B would stop it).
    n = 64
    A = np.ones((n, n), dtype)
    Bt = np.ones((n, n), dtype)
    C = np.zeros((n, n), dtype)
    for core in (gemm._tiled_core, gemm._regblock_core):
        packed, gathers = _packed_fma_and_gathers(core, (A, Bt, C, n, n, n, 32), gemm.FASTMATH)
        assert packed >= 4, core
        assert gathers == 0, core
        assert np.array_equal(C, np.full((n, n), n, dtype))


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("name", ["_onepass_cached", "_fused_cached", "_norm_rows_nt"])
def test_rownorm_row_reductions_are_vectorised(name, dtype):
    # The sum of squares keeps vector partial sums: a loop of packed FMAs into more than one
    # accumulator (an ordered scalar sum is bound by the add latency, not by memory).
    fn = getattr(rownorm, name)
    x = np.ones((4, 64), dtype)
    y = np.empty_like(x)
    args = (x, y, 4, 64, rownorm.EPS) + ((2,) if name.endswith("_nt") else ())
    f = numba.njit(parallel=True, fastmath=rownorm.REDUCE)(fn.py_func)
    f(*args)
    asm = f.inspect_asm(f.signatures[0])
    loop = x86_asm.fma_loop(asm)
    assert loop is not None and loop.chains() >= 2, name
    assert asm.count("vgather") == 0
    assert np.allclose(y, 1 / np.sqrt(64 + rownorm.EPS))


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_attention_and_gemv_inner_loops_are_vectorised(dtype):
    # Both products of every attention kernel go through the register-blocked _abt (checked
    # in the smallest kernel that uses it); gemv is a dot product per row: packed FMAs on
    # contiguous rows, no gathers.
    q = np.ones((2, 70, 64), dtype)
    s = np.empty((2, 70, 70), dtype)
    packed, gathers = _packed_fma_and_gathers(attention_cpu._scores_core, (q, q, s),
                                              attention_cpu.FASTMATH)
    assert packed >= 8 and gathers == 0 and np.allclose(s, 64)
    W, x, y = np.ones((50, 300), dtype), np.ones(300, dtype), np.empty(50, dtype)
    packed, gathers = _packed_fma_and_gathers(gemv._rows, (W, x, y, 50, 300), gemv.FASTMATH)
    assert packed >= 1 and gathers == 0 and np.allclose(y, 300)

def test_rownorm_rowsum_is_vectorised():
    sq = np.ones((4, 64), np.float32)
    sums = np.empty(4, np.float32)
    f = numba.njit(parallel=True, fastmath=rownorm.REDUCE)(rownorm._rowsum.py_func)
    f(sq, sums, 4, 64)
    adds = re.findall(r"\bvaddps\s[^\n]*%[yz]mm", f.inspect_asm(f.signatures[0]))
    assert len(adds) >= 2 and np.array_equal(sums, np.full(4, 64, np.float32))
