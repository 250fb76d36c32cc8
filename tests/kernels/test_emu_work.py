"""What the emulation checks beyond the values (issue 58), each with the bug it exists for:

* Work done once: the check build keeps the first thread to store each byte of a registered
  buffer per launch (tests/standins/cuda_emu/checks.h rb_store_once); another thread storing
  it fails the launch. Every CUDA C kernel runs here with a grid of several blocks, and a
  grid-stride kernel with more work than one pass of its grid covers (the grid capped at one
  wave of the emulated device), so a loop that strides one block, or a tail every block
  writes, stores an element twice.
* Alignment as the hardware sees it: an access the compiler took for aligned to its width (a
  uint4 pack, a float4) at an address that is not a multiple of it fails, as the GPU's
  misaligned-address fault. The GEMMs and gemv run at N and K of every residue mod 16 that
  separates their vector paths (0, 1, 2, 4, 8: residues mod 2, 4, 8, 16), per dtype.
* Warps whole: a block that is not whole warps runs (legal on the GPU), but a warp primitive
  whose mask names a lane its partial warp lacks fails; every host block-size rule is held
  to whole warps within the device's 1024 threads over its size range.
* Arguments as the driver reads them: every launch's scalars are checked against the
  kernel's parameter types as compiled (emu.h rb_signature): a 4-byte int handed to a
  ``long long`` fails.
"""

from __future__ import annotations

import ctypes
import dataclasses
from typing import Any

import cuda_tools as ct
import numpy as np
import pytest
from emu_run import DEV, LaunchError, build_mutant, emulation_libs, run_emulated
from roofbench.bench.backends.base import CaseUnsupported
from roofbench.bench.backends.gpu_common import ALL_LAUNCHERS, plan_launches
from roofbench.bench.suite.runner import validate
from roofbench.kernels import attention, rownorm
from roofbench.kernels.cuda_impl import CudaKernel, DeviceProps
from roofbench.kernels.registry import workloads
from roofbench.kernels.spec import Case

pytestmark = ct.needs_emulation()


@pytest.fixture(scope="module")
def libs() -> dict[str, ctypes.CDLL]:
    return emulation_libs(ct.EMU_SOURCES)


def _case(name: str, variant: str, dtype: str, size: tuple[int, ...]) -> Case:
    w = workloads()[name]
    return Case(w, w.variants[variant], dtype, size)


def _check(libs, case: Case, change=lambda pl: pl) -> None:
    inputs, outs = run_emulated(libs, case, np.random.default_rng(58), change)
    ok, _, why = validate(case, outs, case.workload.expected(inputs, case.size, case.dtype))
    assert ok, f"{case.key}: {why}"


def _id(c: tuple[Any, ...]) -> str:
    return f"{c[0]}-{c[1]}-{c[2]}-{'x'.join(map(str, c[3]))}"


# ------------------------------------------------------------------- work done once
# 9 * 1024 + 7 values: more 16-byte packs than one pass of the emulated device's 2 x 256
# threads covers in every dtype (576 fp8 packs), and a scalar tail of 7, 3 or 1 values.
BIG = 9 * 1024 + 7
ALL = ("fp32", "fp64", "fp16", "bf16", "fp8")
MULTI = (
    [("vector_add", v, d, (BIG,)) for v in ("scalar", "vec4") for d in ALL
     if (v, d) != ("vec4", "fp64")]
    + [("l2norm", v, d, (BIG,)) for v in ("naive", "fused") for d in ("fp32", "fp8")]
    # 520 rows: rn_rsqrt's grid-stride loop over rows takes 2 blocks of 256, twice
    + [("rownorm", "naive", "fp32", (520, 12))]
    + [("rownorm", v, "fp16", (5, 1001)) for v in ("fused", "onepass")]
    + [("gemm", v, "fp32", (67, 45, 33)) for v in ("naive", "tiled")]
    + [("gemm", "regblock", "fp32", (130, 132, 20))]
    + [("gemm", "tensor_mma", "fp16", (130, 136, 40))]
    + [(w, v, "fp16", (1, 2, 67, 64)) for w in ("attention", "attention_causal")
       for v in ("naive", "flash")]
    + [("gemv", "rows", "fp16", (70, 520))]
)
# A device twice as wide: a grid-stride launch whose grid grows there was capped at one wave
# here, so its loop makes more than one pass.
WIDER = dataclasses.replace(DEV, sm_count=2 * DEV.sm_count)


def _several_blocks(case: Case) -> list[str]:
    """What keeps ``case`` from showing work repeated across blocks: a launch of one block, a
    grid-stride launch whose loop makes one pass."""
    why = []
    for pl, wide in zip(plan_launches(case, DEV), plan_launches(case, WIDER), strict=True):
        if np.prod(pl.grid) < 2:
            why.append(f"{pl.function}: a grid of one block")
        elif pl.impl.grid_stride and wide.grid == pl.grid:
            why.append(f"{pl.function}: its grid-stride loop makes one pass")
    return why


def test_every_kernel_runs_with_several_blocks_looping():
    """MULTI holds, for every CUDA C kernel the runtime launches, a case whose launches each
    have several blocks, and whose grid-stride launches loop (each vector dtype of the
    element-wise kernels: their packs differ)."""
    covered = set()
    for c in MULTI:
        case = _case(*c)
        assert not _several_blocks(case), (_id(c), _several_blocks(case))
        covered |= {pl.impl.prefix for pl in plan_launches(case, DEV)}
    kernels = {impl.prefix for w in workloads().values() for v in w.variants.values()
               for impl in (v.impls.get("cuda") or {}).values()
               if isinstance(impl, CudaKernel) and impl.source in ct.EMU_SOURCES}
    assert kernels and kernels <= covered, kernels - covered


@pytest.mark.parametrize("case", MULTI, ids=[_id(c) for c in MULTI])
def test_work_is_done_once_with_several_blocks(libs, case):
    _check(libs, _case(*case))


# The survivors of issue 58's table, planted in the source: the vector kernel's scalar tail
# indexed by the thread's index in its block, rn_rsqrt striding one block.
PLANTED_TWICE = {
    "tail_in_block": ("vector_add.cu",
                      "for (i64 i = npack * V + tid; i < n; i += stride)",
                      "for (i64 i = npack * V + threadIdx.x; i < n; i += stride)",
                      ("vector_add", "vec4", "fp32", (BIG,))),
    "rsqrt_block_stride": ("rownorm.cu", "const i64 stride = (i64)gridDim.x * blockDim.x;",
                           "const i64 stride = (i64)blockDim.x;",
                           ("rownorm", "naive", "fp32", (520, 12))),
}


@pytest.mark.parametrize("plant", list(PLANTED_TWICE))
def test_planted_repeated_work_fails_naming_both_threads(plant, tmp_path):
    source, old, new, case = PLANTED_TWICE[plant]
    lib = ctypes.CDLL(str(build_mutant(tmp_path, source, {source: (old, new)})))
    lib.rb_launch.restype = ctypes.c_int
    with pytest.raises(LaunchError, match="by a second thread: block .* thread .* stored it"):
        _check({source: lib}, _case(*case))


# ------------------------------------------------------------------------ alignment
# N and K of every residue mod 16 that tells the vector paths apart: 0 (every width), 8
# (16-byte fp8, not 32), 4 (8 values: the mma B chunk of 16-bit types), 2, 1 (none);
# each residue once for N and once for K, the two paired so that each case differs in both.
RESIDUES = (0, 1, 2, 4, 8)
ALIGN = ([("gemm", "tensor_mma", d, (17, 48 + rn, 32 + rk)) for d in ("fp16", "bf16", "fp8")
          for rn, rk in zip(RESIDUES, reversed(RESIDUES), strict=True)]
         + [("gemm", "regblock", d, (9, 48 + rn, 16 + rk)) for d in ("fp32", "fp16")
            for rn, rk in zip(RESIDUES, reversed(RESIDUES), strict=True)]
         + [("gemv", "rows", d, (3, 64 + r)) for d in ALL for r in RESIDUES])


def test_alignment_sizes_cover_every_residue():
    """Each GEMM dtype meets N and K of every residue; gemv K of every residue per dtype."""
    for d in ("fp16", "bf16", "fp8"):
        sizes = [c[3] for c in ALIGN if c[1] == "tensor_mma" and c[2] == d]
        assert {n % 16 for _, n, _ in sizes} == {k % 16 for _, _, k in sizes} == set(RESIDUES)
        assert any(n % 8 == 4 for _, n, _ in sizes)  # 16-bit B rows 8-byte aligned only
    for d in ALL:
        assert {c[3][1] % 16 for c in ALIGN if c[0] == "gemv" and c[2] == d} == set(RESIDUES)


@pytest.mark.parametrize("case", ALIGN, ids=[_id(c) for c in ALIGN])
def test_vector_paths_are_aligned_at_every_residue(libs, case):
    _check(libs, _case(*case))


def test_planted_misaligned_vector_load_faults(tmp_path):
    """The mma GEMM's B vector path taken when N % 8 == 4 (rows 8-byte aligned): a fault."""
    old = "b_vec = (N % 8) == 0;"
    lib = ctypes.CDLL(str(build_mutant(tmp_path, "gemm.cu",
                                       {"gemm.cu": (old, "b_vec = (N % 4) == 0;")})))
    lib.rb_launch.restype = ctypes.c_int
    with pytest.raises(LaunchError, match=r"misaligned 16-byte load at B \+ \d+ .*fault"):
        _check({"gemm.cu": lib}, _case("gemm", "tensor_mma", "fp16", (17, 52, 32)))


# ----------------------------------------------------------------------- whole warps
def test_block_of_partial_warp_runs_without_warp_primitives(libs):
    """A block of 100 threads (3 warps and 4 lanes) is legal: the scalar add runs right."""
    _check(libs, _case("vector_add", "scalar", "fp32", (1003,)),
           lambda pl: dataclasses.replace(pl, block=(100, 1, 1)))


def test_full_mask_shuffle_on_a_partial_warp_fails(libs):
    """rn_fused's block_sum shuffles with the full mask: in a block of 129 threads the last
    warp has one lane, and the launch fails naming it."""
    with pytest.raises(LaunchError, match=r"__shfl_xor_sync with mask 0xffffffff in a partial "
                                          r"warp: warp 4 of a block of 129 threads has lanes 0-0"):
        _check(libs, _case("rownorm", "fused", "fp32", (2, 1001)),
               lambda pl: dataclasses.replace(pl, block=(129, 1, 1)))


def test_block_past_the_device_limit_fails(libs):
    with pytest.raises(LaunchError, match="invalid launch configuration: block \\(1056"):
        _check(libs, _case("vector_add", "scalar", "fp32", (1003,)),
               lambda pl: dataclasses.replace(pl, block=(1056, 1, 1)))


H200 = DeviceProps(cc=(9, 0), sm_count=132, name="H200")


def _sizes(case_dims: int, w: str) -> list[tuple[int, ...]]:
    """Sizes around each rule's steps: powers of two and their neighbours; for attention the
    row lengths on both sides of every multiple of 1024 up to the softmax's capacity (where
    its block grows), for rownorm every code path of onepass (onepass_paths). The two 1-D
    rules are also held over every value below (softmax_threads, onepass_threads)."""
    edges = sorted({max(1, 2**e + d) for e in range(13) for d in (-1, 0, 1)})
    if w.startswith("attention"):
        ns = {*edges, *(n + d for n in range(1024, attention.GPU_ROW_MAX + 1, 1024)
                        for d in (-1, 0, 1, 33))}
        return [(1, 1, n, 64) for n in sorted(ns) if n <= attention.GPU_ROW_MAX]
    if w == "rownorm":
        hs = {*edges, *(p.hidden for d in ALL for p in rownorm.onepass_paths(d))}
        return [(2, h) for h in sorted(hs)]
    if case_dims == 1:
        return [(n,) for n in edges]
    if case_dims == 2:
        return [(m, k) for m in edges[::3] for k in edges[::3]]
    return [(m, n, k) for m in edges[::6] for n in edges[::6] for k in edges[::6]]


@pytest.mark.parametrize("name", sorted(workloads()))
def test_every_block_size_rule_gives_whole_warps(name):
    """Every CUDA kernel's block size, for every size the variant accepts over the rule's
    range: a multiple of 32, at most 1024 threads (a partial warp would run its full-mask
    shuffles on missing lanes; more threads do not launch)."""
    w = workloads()[name]
    bad, seen = [], 0
    sizes = _sizes(len(w.size_names), name)
    for vname, v in w.variants.items():
        table = v.impls.get("cuda") or {}
        if not table:
            continue
        for dtype in v.dtypes:
            for size in sizes:
                case = Case(w, v, dtype, size)
                if v.refuse(size, dtype, "cuda") is not None:
                    continue
                try:
                    launches = plan_launches(case, H200, launchers=ALL_LAUNCHERS)
                except CaseUnsupported:  # no kernel of this dtype, a size it refuses
                    continue
                for pl in launches:
                    if pl.block is None:
                        continue
                    seen += 1
                    t = int(np.prod(pl.block))
                    if t % 32 or t > 1024:
                        bad.append((vname, dtype, size, pl.function, pl.block))
    assert seen, f"{name}: no CUDA launch planned"
    assert not bad, bad[:5]


def test_onepass_block_is_whole_warps_over_its_range():
    """rownorm onepass's block rule at every hidden size it accepts, per dtype."""
    for d in ALL:
        top = max(p.hidden for p in rownorm.onepass_paths(d))
        for h in range(1, top + 1):
            t = rownorm.onepass_threads(h, d)
            if t is None:  # past the row's register capacity: refused by the host
                continue
            assert t % 32 == 0 and 32 <= t <= 1024, (d, h, t)


def test_softmax_block_is_whole_warps_past_4096():
    """The attention softmax's own rule at each row length: whole warps, 4 warps at least,
    the 512-thread cap, enough threads for GPU_ROW_VALS values each."""
    for n in range(1, attention.GPU_ROW_MAX + 1):
        t = attention.softmax_threads(n)
        assert t % 32 == 0 and 128 <= t <= attention.GPU_SM_THREADS, (n, t)
        assert t * attention.GPU_ROW_VALS >= n, (n, t)


# ---------------------------------------------------------------- scalar arguments
def test_scalar_of_the_wrong_width_fails_the_launch(libs):
    """n handed over as a 4-byte int to ``long long n``: the kernel would read 4 bytes of
    garbage above it on the GPU; the launch fails naming the argument."""
    def narrow(pl):
        return dataclasses.replace(pl, args=tuple(np.int32(a) if isinstance(a, np.int64) else a
                                                  for a in pl.args))

    with pytest.raises(LaunchError, match="argument 3 is handed over as 4-byte signed int for "
                                          r"a 8-byte signed int \(long long\) parameter"):
        _check(libs, _case("vector_add", "scalar", "fp32", (1003,)), narrow)


def test_float_scalar_as_a_double_fails_the_launch(libs):
    def wide(pl):
        return dataclasses.replace(pl, args=tuple(np.float64(a) if isinstance(a, np.float32)
                                                  else a for a in pl.args))

    with pytest.raises(LaunchError, match="argument 4 is handed over as 8-byte double for a "
                                          "4-byte float parameter"):
        _check(libs, _case("rownorm", "fused", "fp32", (2, 1001)), wide)


def test_signatures_are_the_compiled_parameter_types(libs):
    from emu_launch import signature

    assert signature(libs["vector_add.cu"], "vadd_vec4_fp16") == ["p", "p", "p", "i8"]
    assert signature(libs["rownorm.cu"], "rn_fused_fp32") == ["p", "p", "i8", "i8", "f4"]
    assert signature(libs["gemm.cu"], "gemm_tensor_fp8")[-3:] == ["i8", "i8", "i8"]
