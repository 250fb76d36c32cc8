"""Every CPU kernel against its float64 reference, odd sizes included."""

from __future__ import annotations

import codegen_kernels as ck
import numba
import numpy as np
import planted_kernels as planted
import pytest
from codegen_fanout import fanout_facts
from codegen_matrix import IDS as MATRIX_IDS
from codegen_matrix import MATRIX, NOT_X86, X86, host_cpu, matrix_facts
from roofbench.bench.backends.cpu import CpuBackend
from roofbench.bench.suite.runner import validate
from roofbench.kernels.registry import workloads
from roofbench.kernels.spec import Case
from workload_cases import case_id, cpu_cases

# The sizes are each workload's own (Workload.test_sizes.cpu), the cases derived from the
# registry: tests/standins/workload_cases.py.


@pytest.mark.parametrize("w,v,dtype,size", cpu_cases(), ids=[case_id(c) for c in cpu_cases()])
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


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("k,n", [(1, 1), (7, 9), (8, 8), (9, 17), (16, 3), (67, 45), (5, 300)])
def test_pack_bt_is_the_exact_transpose(k, n, dtype):
    # gemm's B -> Bt pack in 8 x 8 blocks: full blocks, partial ones in k, in n and in both,
    # every element written exactly once (Bt starts as NaN).
    from roofbench.kernels.gemm import _pack_bt

    b = np.random.default_rng(5).standard_normal((k, n)).astype(dtype)
    bt = np.full((n, k), np.nan, dtype)
    _pack_bt(b, bt, k, n)
    assert np.array_equal(bt, b.T)


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


# ----------------------------------------------------------------------------- machine code
# Every parallel CPU kernel compiled for every target of the matrix (tests/standins/
# codegen_matrix.py: ten x86 CPUs and this host), never run; what each must show is its row in
# tests/standins/codegen_kernels.py (docs/tests.md lists them): no gathers anywhere, packed
# arithmetic, FMA chains or wide adds where the kernel's speed rests on them. The matrix is
# compiled by tests/standins/codegen_fanout.py: numba's frontend once, its backend (numba's own
# codegen, built for each target) replayed for every row; test_fanout_is_what_a_fresh_process_
# compiles holds it to what a fresh process under NUMBA_CPU_NAME compiles.


@pytest.fixture(scope="module")
def compiled(tmp_path_factory) -> dict[str, dict]:
    if not X86:
        pytest.skip(NOT_X86)
    return fanout_facts(["kernels", "planted"], tmp_path_factory.mktemp("numba-cache"))


# Two rows compiled again the slow way, one process each: znver4 (the one-target plant, 512-bit
# loops) and skylake-avx512 (an Intel AVX-512 tuning, 256-bit loops; the host row is the
# frontend's own compile, no replay); the planted kernels (rownorm's non-temporal row kernel
# among them) and vector_add's. Every row and kernel was compared once: docs/tests.md.
FRESH_CHECK = ("znver4", "skylake-avx512")


def test_fanout_is_what_a_fresh_process_compiles(compiled, tmp_path_factory):
    rows = [t for t in MATRIX if t.name in FRESH_CHECK]
    # never kept (codegen_store): this is also the check that a kept fan-out is what numba
    # compiles today
    fresh = matrix_facts(["kernels:vector_add", "planted"], tmp_path_factory.mktemp("fresh"),
                         targets=rows, keep=False)
    for t in rows:
        res, fan = fresh[(t.name, None)], compiled[t.name]
        assert len(res["planted"]) == 4 and len(res["kernels"]) == 2
        assert res["planted"] == fan["planted"], t.name
        assert res["kernels"] == {k: fan["kernels"][k] for k in res["kernels"]}, t.name


def _problems(facts: dict, row: ck.KernelRow, name: str) -> dict[str, list[str]]:
    found = {d: ck.problems(row, facts[f"{name}-{d}"]) for d in ck.DTYPES}
    return {d: p for d, p in found.items() if p}


@pytest.mark.parametrize("row", ck.KERNELS, ids=[r.name for r in ck.KERNELS])
@pytest.mark.parametrize("t", MATRIX, ids=MATRIX_IDS)
def test_cpu_kernel_machine_code(compiled, t, row):
    assert not _problems(compiled[t.name]["kernels"], row, row.name), row.why


def test_codegen_table_names_every_parallel_kernel():
    # A new kernel without a row (or a row for a kernel that is gone) fails here; the
    # non-temporal-store kernels are compiled where their stores are read
    # (tests/roofs/test_cpu_codegen.py).
    nt = {f"nt_stores.{k}" for k in ("square", "add", "sqrt", "hypot")}
    assert ck.parallel_kernels() == set(ck.ROWS) | nt


def test_planted_one_target_gather_is_caught(compiled):
    # tests/standins/planted_kernels.py: rownorm's row kernel as it was before issue 28
    # (gathers on znver4 and the Intel AVX-512 cores), and a tuning branch that brings it back
    # on znver4 alone. The matrix names where each gathers on whatever machine runs it; for the
    # one-target plant the host row (all a host-only test would look at) is clean, unless this
    # machine is that target.
    caught = {p: {name for name, res in compiled.items()
                  if any("gathers" in line for lines in
                         _problems(res["planted"], ck.ROWS[planted.STANDS_FOR[p]], p).values()
                         for line in lines)}
              for p in planted.PLANTED}
    for p, targets in planted.CAUGHT_ON.items():
        assert caught[p] >= targets, p
        assert not caught[p] & planted.CLEAN_ON[p], p
    host_is_it = host_cpu()[0] == planted.TUNED_FOR
    assert caught["norm_rows_nt_tuned"] == {planted.TUNED_FOR} | ({"host"} if host_is_it else set())
