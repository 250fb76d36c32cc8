"""The mutant catalogue of scripts/mutate_cuda.py: realistic one-line bugs in the CUDA sources
(kernels/cuda/*.cu, *.cuh, roofs/probes/cuda/*.cu), each with the narrowest tests that should
catch it. A mutant is one exact text replacement that must apply exactly once; most are
written as the change inside that snippet (``E``: the bug is what the line shows).

``cls`` names what kind of check should catch it (values, bytes, hang, descriptors, SASS) or,
for the kinds the emulation does not model yet, the class it belongs to (oob, race, mask,
proxy-fence, init-fence, alignment; issue 58's repeated-work, partial-warp, scalar-width,
far-oob): the score is reported per class. A mutant may edit the host code a launch depends
on (kernels/*.py: a block-size rule, the scalar marshalling; the driver path's packing) as well
as the CUDA sources. ``equivalent`` gives the reason a mutant cannot be caught by any test (it
behaves as the original): listed, not scored.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Mutant:
    name: str
    file: str  # relative to the repository root
    old: str
    new: str
    what: str
    tests: tuple[str, ...]  # pytest arguments: node ids, then "-k", expression
    cls: str = "values"
    equivalent: str = ""


K = "kernels/cuda/"
P = "roofs/probes/cuda/"
_EMU = "tests/kernels/test_cuda_emu.py::test_kernel_correct_under_emulation"
_BYTES = "tests/kernels/test_emu_bytes.py::test_counted_bytes_equal_the_declaration"


def emu(expr: str) -> tuple[str, ...]:
    """The byte-count cases (bounds, alignment, bytes, outputs) and the emulated correctness
    cases whose id matches ``expr``."""
    return (_BYTES, _EMU, "-k", expr)  # the counted first: its guard bytes see overruns


STREAM = ("tests/kernels/test_emu_bytes.py", "-k", "stream_probe")
L2 = ("tests/kernels/test_emu_bytes.py", "-k", "l2_probe")
WGMMA = ("tests/kernels/test_emu_bytes.py::test_wgmma_gemm_tma_reads_what_its_tiles_imply",
         "tests/kernels/test_cuda_emu.py::test_wgmma_gemm_valid_under_emulation")
# The case whose k tiles wrap the stage ring twice (the others have fewer tiles than stages).
RING = ("tests/kernels/test_cuda_emu.py::test_original_passes_the_mutant_case",)
WGMMA_PROBE = ("tests/kernels/test_cuda_emu.py::test_wgmma_probe_computes_what_it_claims",)
FMA_SASS = ("tests/roofs/test_gpu_probes_nogpu.py::test_fma_loop_is_fma_dominated",)
MMA_SASS = ("tests/roofs/test_gpu_probes_nogpu.py::test_mma_probes_run_on_tensor_cores",)
ERT_SASS = ("tests/roofs/test_gpu_probes_nogpu.py::test_ert_keeps_its_fmas",)


# Issue 40's classes: asm strings checked by type, probes executed and counted, one size per
# code path, adversarial numerics, work in flight at block end, a helper called twice.
PTX_TYPES = ("tests/kernels/test_ptx_types.py::test_inline_asm_types_match_the_kernel_dtype",)
FMA_COUNT = ("tests/roofs/test_emu_probes.py",)
COVERAGE = "tests/kernels/test_emu_coverage.py"
BLOCK_SUM_TWICE = ("tests/kernels/test_emu_checks.py::"
                   "test_shared_memory_helper_called_twice_is_ordered",)


# Issue 58's classes: work repeated across blocks (stores once per launch, grids of several
# blocks), alignment at every residue, accumulator-judged numerics, whole warps, scalar widths
# (the SysV launch and the driver path), an index far past every guard zone (far-oob).
WORK = "tests/kernels/test_emu_work.py"
TWICE = (WORK + "::test_work_is_done_once_with_several_blocks",)
NUMERICS = ("tests/kernels/test_emu_numerics.py",)
DRIVER_ARGS = ("tests/kernels/test_emu_driver_args.py", "-k", "planned_params")


def counted(expr: str) -> tuple[str, ...]:
    """The byte-count cases only (a mutant whose values stay right)."""
    return (_BYTES, "-k", expr)

def E(name: str, file: str, old: str, change: str, to: str, what: str,
      tests: tuple[str, ...], cls: str = "values", equivalent: str = "") -> Mutant:
    """A mutant written as its change: ``change`` (once in the snippet ``old``) becomes ``to``,
    so an entry shows the bug and not the snippet twice."""
    if old.count(change) != 1:
        raise ValueError(f"{name}: {change!r} occurs {old.count(change)} times in its snippet")
    return Mutant(name, file, old, old.replace(change, to, 1), what, tests, cls, equivalent)


M = Mutant  # a mutant whose whole snippet changes (a deleted line), written out
MUTANTS: tuple[Mutant, ...] = (
    # ------------------------------------------------------------------ vector_add.cu
    E("va_tail_short", K + "vector_add.cu",
      "for (i64 i = npack * V + tid; i < n; i += stride)  // tail",
      " n;", " n - 1;",
      "the scalar tail stops one element early", emu("vector_add")),
    E("va_scalar_block_stride", K + "vector_add.cu",
      "const i64 stride = (i64)gridDim.x * blockDim.x;\n    for (i64 i = (i64)blockIdx.x",
      "gridDim.x * blockDim", "blockDim",
      "grid stride of one block: blocks overlap, every element right but written twice",
      counted("vector_add"), cls="bytes"),
    E("va_half2_three", K + "vector_add.cu",
      "for (int i = 0; i < 4; ++i) r2[i] = __hadd2(x2[i], y2[i]);",
      "4", "3",
      "the half2 pack add leaves its last pair unset", emu("vector_add")),
    E("va_tail_in_block", K + "vector_add.cu",
      "for (i64 i = npack * V + tid; i < n; i += stride)  // tail",
      "tid", "threadIdx.x",
      "the vector kernel's scalar tail indexed in the block: every block rewrites the tail",
      TWICE + ("-k", "vector_add and vec4"), cls="repeated-work"),
    E("va_scalar_far_index", K + "vector_add.cu",
      "threadIdx.x; i < n; i += stride)\n        c[i] = from_acc<T>(to_acc(a[i])",
      "a[i]", "a[i + n * 65536]",
      "the scalar kernel's load index far past its buffer (a stride multiplied in once more): "
      "past every guard zone", emu("vector_add and scalar"), cls="far-oob"),
    # --------------------------------------------------------------------- l2norm.cu
    E("l2_fused_reads_a_twice", K + "l2norm.cu",
      "map<T, true>(a, b, out, n, OpL2());", "b", "a",
      "the fused kernel reads a for b", emu("l2norm")),
    E("l2_sqrt_squares", K + "l2norm.cu",
      "map<T, false>(x, x, out, n, OpSqrt());", "OpSqrt", "OpSquare",
      "the last naive launch squares instead of taking the root", emu("l2norm")),
    # -------------------------------------------------------------------- common.cuh
    E("map_y_from_x", K + "common.cuh",
      "if (TWO) unpack(ld_pack(y + p * V), fy);", "(y", "(x",
      "the two-input map reads x for y in its vector body", emu("l2norm")),
    E("fp8_unpack_lane", K + "common.cuh",
      "f[2 * i + 1] = f2.y;", "y", "x",
      "fp8 pack unpacking duplicates the low value of each pair", emu("vector_add and fp8")),
    E("map_packs_rounded_up", K + "common.cuh",
      "    constexpr int V = Pack<T>::N;\n    const i64 npack = n / V;\n    const i64 tid",
      " n ", " (n + V - 1) ",
      "the map's pack count rounded up: its last pack runs past the end", emu("l2norm"),
      cls="oob"),
    E("warp_sum_half_mask", K + "common.cuh",
      "for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);\n"
      "    return v;",
      "0xffffffffu", "0x0000ffffu",
      "the warp reduction's shuffle mask names half the warp", emu("rownorm"), cls="mask"),
    E("block_sum_no_first_barrier", K + "common.cuh",
      "    v = warp_sum(v);\n"
      "    __syncthreads();  // part[] may still be read by a previous call\n",
      "    __syncthreads();  // part[] may still be read by a previous call\n", "",
      "block_sum without the barrier that protects part[] from the previous call",
      BLOCK_SUM_TWICE, cls="race"),
    # -------------------------------------------------------------------- rownorm.cu
    E("rn_scale_row0", K + "rownorm.cu",
      "row_scale(x + off, y + off, h, scale[blockIdx.x]);",
      "blockIdx.x", "0",
      "every row scaled by row 0's factor", emu("rownorm")),
    E("rn_reduce_skips", K + "rownorm.cu",
      "for (i64 j = threadIdx.x; j < h; j += blockDim.x) {\n            const A v",
      "blockDim", "2 * blockDim",
      "the scalar row reduction skips every other stride", emu("rownorm")),
    E("rn_onepass_16th_chunk", K + "rownorm.cu",
      "for (int k = 0; k < RN_ELEMS; ++k) {\n            const int j = threadIdx.x + k * nt;\n"
      "            if (j < n) yr[j]",
      "RN_ELEMS", "RN_ELEMS - 1",
      "the onepass scalar path never stores its 16th register chunk (hidden 15361-16383)",
      (COVERAGE, "-k", "onepass and scalar"), cls="size-path"),
    E("rn_onepass_8th_pack", K + "rownorm.cu",
      "for (int k = 0; k < RN_PACKS; ++k) {\n            const int p = threadIdx.x + k * nt;\n"
      "            if (p < nvec) {\n                A f[V];",
      "RN_PACKS", "RN_PACKS - 1",
      "the onepass vector path never stores its 8th register pack",
      (COVERAGE, "-k", "onepass and vector"), cls="size-path"),
    E("rn_rsqrt_block_stride", K + "rownorm.cu",
      "const i64 stride = (i64)gridDim.x * blockDim.x;", "gridDim.x * blockDim", "blockDim",
      "rn_rsqrt's grid-stride loop strides one block: blocks redo each other's rows",
      TWICE + ("-k", "rownorm"), cls="repeated-work"),
    E("rn_rowsum_thread1", K + "rownorm.cu",
      "if (threadIdx.x == 0) sums[blockIdx.x] = s;", "0", "1",
      "thread 1 stores the row sum", emu("rownorm"),
      equivalent="block_sum hands every thread the sum: thread 1 stores the same value once"),
    E("rn_no_eps", K + "rownorm.cu",
      "scale[i] = acc_rsqrt(sums[i] + acc_##SUF(eps));", " + acc_##SUF(eps)", "",
      "rsqrt without eps", emu("rownorm"),
      equivalent="eps (1e-6) against sums of ~0.4 h changes the scale by ~1e-9 relative, "
      "below every dtype's tolerance; only an all-zero row tells them apart"),
    # ----------------------------------------------------------------------- gemm.cu
    E("gemm_naive_k_from_1", K + "gemm.cu",
      "for (int k = 0; k < K; ++k) acc += to_acc(A[(i64)row * K + k])",
      "0", "1",
      "the naive dot product skips k = 0", emu("gemm-naive")),
    E("gemm_tiled_a_guard", K + "gemm.cu",
      "As[r][tx] = (ar < M && ak < K)", " < M", " <= M",
      "the tiled A-tile edge guard off by one (row M read past the end)", emu("gemm-tiled"),
      cls="oob"),
    E("gemm_tiled_no_second_barrier", K + "gemm.cu",
      "            for (int i = 0; i < 4; ++i) acc[i] += As[ty + 8 * i][k] * b;\n        }\n"
      "        __syncthreads();\n",
      "        __syncthreads();\n", "",
      "the tiled loop refills its tiles while other threads still read them",
      emu("gemm-tiled"), cls="race"),
    E("gemm_regblock_same_buffer", K + "gemm.cu",
      "        if (more) stash(buf ^ 1);  // the other buffer",
      "buf ^ 1", "buf",
      "the prefetched tile stashed into the buffer being read", emu("gemm-regblock")),
    E("gemm_regblock_c_guard", K + "gemm.cu",
      "if (c < N) C[(i64)r * N + c] = from_acc<T>(acc[i][j]);",
      "< ", "<= ",
      "the C store guard off by one: column N lands on the next row", emu("gemm-regblock")),
    E("gemm_regblock_b_vec_misaligned", K + "gemm.cu",
      "b_vec = (N % 4) == 0;", "4", "2",
      "B vector loads allowed on rows that are not 16-byte aligned", counted("gemm-regblock"),
      cls="alignment"),
    E("gemm_tensor_a_kstep", K + "gemm.cu",
      "&As[buf][(wm * 64 + mi * 16 + g) * TC_ROWW + ks * 8 + t];",
      "8", "4",
      "the tensor kernel's A fragments read the wrong k step", emu("gemm-tensor_mma")),
    E("gemm_tensor_b_row_guard", K + "gemm.cu",
      "ld_chunk(pb[p], B + (i64)k * N, n0 + ng * 8, N, k < K, b_vec);",
      " K", "= K - 2",
      "the last k row of B zero-filled", emu("gemm-tensor_mma")),
    E("gemm_tensor_b_vec_n4", K + "gemm.cu",
      "b_vec = (N % 8) == 0;", "8", "4",
      "the mma GEMM's B vector path (16 B fp16, 8 B fp8) when N % 8 == 4: misaligned",
      (WORK + "::test_vector_paths_are_aligned_at_every_residue", "-k", "tensor_mma"),
      cls="alignment"),
    # ----------------------------------------------------------------------- mma.cuh
    E("mma_fp8_as_half", K + "mma.cuh",
      'RB_MMA_16BIT(fp8_t, "mma.sync', "fp8_t", "__half",
      "fp8 fragments multiplied as fp16 (m16n8k16 for m16n8k32)", emu("tensor_mma and fp8")),
    E("mma_bf16_as_f16", K + "mma.cuh",
      "m16n8k16.row.col.f32.bf16.bf16.f32", "bf16.bf16", "f16.f16",
      "the bf16 mma.sync's PTX string says .f16.f16 (garbage on a GPU, exact emulated)",
      PTX_TYPES + emu("tensor_mma and bf16"), cls="asm-type"),
    E("mma_fp16_as_bf16", K + "mma.cuh",
      "m16n8k16.row.col.f32.f16.f16.f32", "f16.f16", "bf16.bf16",
      "the fp16 mma.sync's PTX string says .bf16.bf16", PTX_TYPES, cls="asm-type"),
    # ----------------------------------------------------------------------- gemv.cu
    E("gemv_lane_stride", K + "gemv.cu",
      "for (i64 j = lane; j < K; j += 32) acc +=", "32", "16",
      "the scalar gemv path counts half the row twice", emu("gemv")),
    E("gemv_x_pack", K + "gemv.cu",
      "unpack(ld_pack(x + p * VW + q * VX), fx);", "VW + q * VX", "VW",
      "fp8 W with fp16 x: the second x pack of a W pack never read", emu("gemv")),
    E("gemv_lane1_stores", K + "gemv.cu",
      "if (lane == 0) y[row] = from_acc<TX>(acc);", "0", "1",
      "lane 1 stores the row", emu("gemv"),
      equivalent="warp_sum leaves the sum in every lane: lane 1 stores the same value once"),
    E("gemv_act_dtype_acc", K + "gemv.cu",
      "for (int i = 0; i < VX; ++i) acc += fw[q * VX + i] * A(fx[i]);",
      "+= fw[q * VX + i] * A(fx[i]", "= to_acc(from_acc<TX>(acc + fw[q * VX + i] * A(fx[i]))",
      "gemv accumulating in the activation's dtype (fp16/bf16), not FP32",
      NUMERICS + ("-k", "gemv"), cls="numerics"),
    # ------------------------------------------------------------------ attention.cu
    E("att_causal_extra_tile", K + "attention.cu",
      "tiles = (i64)blockIdx.x + 1;  // BM == BN", "1", "2",
      "causal flash reads one key tile past the diagonal (masked: values unchanged)",
      counted("attention_causal and flash"), cls="bytes"),
    E("att_rescale_row", K + "attention.cu",
      "oacc[dn][2] *= c1;", "c1", "c0",
      "the online softmax rescales row g + 8 by row g's factor", emu("flash")),
    E("att_softmax_mask", K + "attention.cu",
      "if (CAUSAL && j > i) v[k] = fminf(v[k], ATT_NEG);",
      ">", ">=",
      "the causal softmax masks the diagonal", emu("attention_causal and naive")),
    E("att_vt_row_past_n", K + "attention.cu",
      "if (k0 + 1 < n) b.u", "<", "<=",
      "the V tile loads the row after the last key (its P is zero: values unchanged)",
      emu("attention"), cls="bytes"),
    E("att_max_not_carried", K + "attention.cu",
      "const float mn0 = fmaxf(m0, att_quad_max(mx0)), mn1 = fmaxf(m1, att_quad_max(mx1));",
      "fmaxf(m0, att_quad_max(mx0)), mn1 = fmaxf(m1, att_quad_max(mx1)",
      "att_quad_max(mx0), mn1 = att_quad_max(mx1",
      "the flash softmax's running max not carried across tiles (exact until exp2 overflows)",
      (COVERAGE, "-k", "spread"), cls="numerics"),
    E("att_store_one_sum", K + "attention.cu",
      "att_store_o<T, D>(O, oacc, q0, n, 1.f / l0, 1.f / l1);",
      "l1", "l0",
      "flash normalizes row g + 8 by row g's sum", emu("flash")),
    E("att_softmax_partial_warp", "kernels/attention.py",
      "cu.ceil_div(cu.ceil_div(n, GPU_ROW_VALS), 32) * 32",
      "cu.ceil_div(n, GPU_ROW_VALS), 32) * 32", "n, GPU_ROW_VALS)",
      "the softmax block not rounded up to whole warps for rows past 4096 (full-mask "
      "shuffles on a partial warp)",
      (WORK, "-k", "block_size_rule or softmax_block"), cls="partial-warp"),
    E("scalar_arg_int32", "kernels/cuda_impl.py",
      "return np.int64(value)", "int64", "int32",
      "integer kernel arguments handed over as 4 bytes to `long long` parameters",
      TWICE + ("-k", "vector_add and scalar and fp32"), cls="scalar-width"),
    E("tma_scalar_int32", "bench/backends/tma_launch.py",
      "out.append(scalar_bytes(a))", "scalar_bytes(a", 'int(a).to_bytes(4, "little"',
      "the driver path packs integer kernel arguments as 4-byte ints for the wgmma GEMM's "
      "`long long` M, N, K", DRIVER_ARGS, cls="scalar-width"),
    # ------------------------------------------------------------------- stream.cu
    E("stream_read_quarter", P + "stream.cu",
      "ilp_loop(nv, [&](long long i) { return av[i]; }, [&](long long, V x)",
      "nv", "nv / 4",
      "the read probe reads a quarter of what it counts", STREAM, cls="bytes"),
    E("stream_copy_half", P + "stream.cu",
      "ilp_loop(nv, [&](long long i) { return av[i]; }, [&](long long i, V x) { cv[i] = x; });",
      "nv", "nv / 2",
      "the copy probe copies half of what it counts", STREAM, cls="bytes"),
    E("stream_ilp_overlap", P + "stream.cu",
      "i += STREAM_ILP * stride) {", "STREAM_ILP * stride", "stride",
      "the ILP loop advances one stride per trip of four: re-reads", STREAM, cls="bytes"),
    E("stream_triad_tail", P + "stream.cu",
      "a[i] = b[i] + s * c[i];", "c", "b",
      "the triad tail uses b for c", STREAM),
    E("stream_read_one_warp", P + "stream.cu",
      "if ((threadIdx.x & 31) == 0) atomicAdd(out, acc);",
      "(threadIdx.x & 31)", "threadIdx.x",
      "only the first warp of a block adds its sum", STREAM),
    # --------------------------------------------------------------------- cache.cu
    E("l2_read_half_chunk", P + "cache.cu",
      "const uint4* p = buf + (long long)(blockIdx.x % nchunks) * chunk_vecs + threadIdx.x;",
      "chunk_vecs", "(chunk_vecs / 2)",
      "the L2 read probe's chunks overlap by half", L2),
    M("l2_copy_no_tail", P + "cache.cu",
      "for (; r < rows; ++r) dst[base + r * step] = l2_load<CG>(src + base + r * step);", "",
      "the L2 copy probe drops the rows after its last ILP batch", L2, cls="bytes"),
    # -------------------------------------------------------------------- wgmma.cu
    E("wgmma_probe_b_is_a", P + "wgmma.cu",
      "gmma_desc(base + WGMMA_TILE_A + 32 * k, 16, 1024)", "WGMMA_TILE_A + 32", "32",
      "the probe's B descriptor points at A", WGMMA_PROBE, cls="descriptors"),
    M("wgmma_probe_no_final_wait", P + "wgmma.cu",
      "    wgmma_wait<0>();" + " " * 75 + "\\\n", "",
      "the probe reads its accumulators without the last wait_group", WGMMA_PROBE),
    # ------------------------------------------------------------------------ fma.cu
    E("fma_half_chains", P + "fma.cu",
      "for (int j = 0; j < FMA_CHAINS; ++j) y[j] = fma_step(y[j], a, b);",
      "FMA_CHAINS", "FMA_CHAINS / 2",
      "the FMA probe runs half the FMAs it counts", FMA_SASS, cls="sass"),
    E("fma_half_iters", P + "fma.cu",
      "    for (int i = 0; i < iters; ++i) {\n#pragma unroll",
      "++i", "i += 2",
      "the FP32/FP64 FMA probe runs half the iterations it counts (roof 2x too high)",
      FMA_COUNT, cls="probe-count"),
    E("fma_packed_half_iters", P + "fma.cu",
      "    for (int i = 0; i < iters; ++i) {" + " " * 58 + "\\",
      "iters; ++i) {    ", "iters / 2; ++i) {",
      "the packed FMA probe runs half the iterations it counts", FMA_COUNT, cls="probe-count"),
    # ------------------------------------------------------------------------ mma.cu
    E("mma_probe_half_acc", P + "mma.cu",
      '_Pragma("unroll") for (int k = 0; k < MMA_ACC; ++k) {',
      "MMA_ACC", "MMA_ACC / 2",
      "the mma probe issues half the mma.sync it counts", MMA_SASS, cls="sass"),
    # ------------------------------------------------------------------------ ert.cu
    E("ert_half_k", P + "ert.cu",
      "for (int k = 0; k < K; ++k) y = fmaf(y, x, c);",
      "K", "K / 2",
      "the fp32 ERT kernel runs half the FMAs per element it counts", ERT_SASS, cls="sass"),
    # ---------------------------------------------------------------- gemm_wgmma.cu
    E("wg_a_desc_lbo_sbo", K + "gemm_wgmma.cu",
      "const unsigned long long da = gmma_desc(sa + 32 * kk, 16, 1024);",
      "16, 1024", "1024, 16",
      "A descriptor's LBO and SBO swapped", WGMMA, cls="descriptors"),
    E("wg_c_column", K + "gemm_wgmma.cu",
      "const int c0 = n0 + 2 * (lane & 3);", "2 * ", "",
      "the epilogue's column of a lane's pair", WGMMA),
    E("wg_empty_parity", K + "gemm_wgmma.cu",
      "mbar_wait(empty0 + 8 * s, ((kt / STAGES) & 1) ^ 1, \"empty\", s);\n"
      "                    mbar_expect_tx(full, WG_STAGE_BYTES);",
      "(kt / STAGES) & 1) ^", "kt / STAGES) &",
      "the producer waits for the wrong parity of the empty barrier", WGMMA + RING,
      cls="hang"),
    E("wg_c_row_guard", K + "gemm_wgmma.cu",
      "if (r0 + 8 < M) Store2<T>::run", "< ", "<= ",
      "the C store's lower-row guard off by one (row M written past the end)", WGMMA,
      cls="oob"),
    E("wg_no_proxy_fence", K + "gemm_wgmma.cu",
      "                fence_proxy_async();\n                named_barrier_sync(1, 128);",
      "fence_proxy_async();\n                named_barrier_sync", "named_barrier_sync",
      "no fence.proxy.async between the fp8 transpose and wgmma", WGMMA, cls="proxy-fence"),
    E("wg_fp8_tma_past_k", K + "gemm_wgmma.cu",
      "if (kt + 1 < ktiles) {  // next B tile", "<", "<=",
      "the fp8 producer issues one B TMA past K that no one waits for (in flight at exit)",
      WGMMA, cls="in-flight"),
    M("wg_no_init_fence", K + "gemm_wgmma.cu",
      "        mbar_init_fence();\n", "",
      "no fence.mbarrier_init after the barriers' init", WGMMA, cls="init-fence"),
    E("wg_no_transpose_barrier", K + "gemm_wgmma.cu",
      "                fence_proxy_async();\n                named_barrier_sync(1, 128);",
      "\n                named_barrier_sync(1, 128);", "",
      "the producer arrives before every thread's transpose is done", WGMMA, cls="race"),
    # ---------------------------------------------------------------- hopper_ops.cuh
    E("desc_lbo_shift", K + "hopper_ops.cuh",
      "((unsigned long long)((lbo & 0x3FFFF) >> 4) << 16)",
      "16", "17",
      "the descriptor's LBO field one bit off", WGMMA, cls="descriptors"),
    # ------------------------------------------------------------- wgmma_layout.cuh
    E("fp8_store_swizzle", K + "wgmma_layout.cuh",
      "((kc ^ (n & 7)) << 4)", "7", "3",
      "the fp8 transpose's 128-byte swizzle over 4 rows instead of 8",
      WGMMA + ("tests/kernels/test_wgmma.py::test_fp8_transpose_lands_in_the_swizzled_k_major_"
               "layout",), cls="descriptors"),
)
