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

from . import attention_cpu as ac
from . import cuda_impl as cu
from . import spec
from .spec import Buf, Launch, Size, SizeContext, SuiteSizes, Variant, Workload
from .triton_impls import MMA_TILE_RULE, smem_rule, triton, triton_space

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
        sweep: tuple[int, ...] = GPU_SWEEP if ctx.dtype in ("fp16", "bf16") and not causal \
            else (4096,)
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


def _flash_space(causal: bool) -> spec.TuneSpace:
    """The CPU flash loop's space (kernels/attention_cpu.py says why these parameters)."""
    def build(config: Any) -> dict[str, Any]:
        qb, kb = int(config["QB"]), int(config["KB"])
        return {"flash": ac.cpu_flash(causal, qb, kb)}

    return spec.TuneSpace(
        family="cpu",
        params=(spec.TuneParam("QB", ac.FLASH_QB, ac.QB),
                spec.TuneParam("KB", ac.FLASH_KB, ac.KB)),
        build=build,
        rules=(spec.covers_rule("QB", ac.FLASH_QB, 2, "N", "larger blocks run as that one"),
               spec.covers_rule("KB", ac.FLASH_KB, 2, "N", "larger tiles run as that one")),
        note="FLOPs and bytes the same for every configuration (Q, K, V, O moved once)")


# The Triton flash kernel's space (kernels/triton_attention.py): query rows per program (BM),
# keys per K/V tile (BN), warps and pipeline stages. Counts the same for all (Q, K, V, O moved
# once: the K/V tiles each query block re-reads come from L2). Rules: tl.dot's 16 x 8 mma
# tile per warp at least, the staged K and V tiles and the Q tile within shared memory.
FLASH_TRITON = (spec.TuneParam("BM", (16, 32, 64, 128), 32),
                spec.TuneParam("BN", (16, 32, 64, 128), 32),
                spec.TuneParam("num_warps", (2, 4, 8), 4),
                spec.TuneParam("num_stages", (1, 2, 3), 3))


def flash_smem(c: Any, d: int, dtype: str) -> int:
    """Shared memory of a configuration: num_stages K and V tiles, and the Q tile (BD wide)."""
    from .arrays import itemsize

    bd = max(16, 1 << (int(d) - 1).bit_length())  # triton_attention.block_d, without triton
    return (c["num_stages"] * 2 * c["BN"] + c["BM"]) * bd * itemsize(dtype)


def _flash_triton_space(table: dict[str, Any]) -> spec.TuneSpace:
    bm, bn = FLASH_TRITON[0].values, FLASH_TRITON[1].values
    return triton_space(
        table, FLASH_TRITON,
        rules=(spec.covers_rule("BM", bm, 2, "N", "larger blocks run as that one"),
               spec.covers_rule("BN", bn, 2, "N", "larger tiles run as that one"),
               MMA_TILE_RULE,
               smem_rule("(num_stages * 2 * BN + BM) * BD * itemsize",
                         lambda c, size, dtype: flash_smem(c, size[3], dtype))),
        note="FLOPs and bytes the same for every configuration (Q, K, V, O moved once)")


def _cores(kind: str, dtype: str) -> str:
    """Both products on tensor cores on a GPU (mma.sync; torch's SDPA kernels), SIMD lanes on
    a CPU."""
    return "tensor" if kind == "gpu" and dtype in _TC else "simt"


def workload(causal: bool = False) -> Workload:
    """The attention workload, non-causal or causal."""
    cuda = _cuda_tables(causal)

    def variant(name: str, description: str, **kw: Any) -> Variant:
        # What all three share: the dtypes, the cores by where they run, no Numba CUDA twin.
        return Variant(name=name, description=description, dtypes=("fp32", "fp64", "fp16", "bf16"),
                       cores_on=_cores, unsupported={
                           "numba_cuda": "no Numba CUDA twin of the tensor-core attention kernels"},
                       **kw)

    def one_launch(name: str, description: str, note: str, cpu: Any, **kw: Any) -> Variant:
        # The whole product in one launch: on the CPU, ``cpu``; on the GPU, its CUDA table entry
        # (and the flash kernel's Triton twin).
        impls: dict[str, Any] = {"cpu": {name: cpu}, "cuda": cuda[name]}
        if name == "flash":
            impls["triton"] = triton("triton_attention", dtypes=("fp32", "fp16", "bf16"),
                                     flash="flash_causal" if causal else "flash")
        if name == "flash":
            kw["tune"] = {"cpu": _flash_space(causal),
                          "triton": _flash_triton_space(impls["triton"])}
        return variant(name, description, plan=_one_launch_plan(name, causal, note),
                       impls=impls, **kw)

    variants = {
        "naive": variant(
            "naive", "standard attention: S = QK^T, P = softmax(S), O = PV, three launches "
                     "with S and P (N x N per head) in memory",
            plan=_naive_plan(causal), temps=_naive_temps,
            impls={"cpu": {"scores": ac.cpu_scores, "softmax": ac.cpu_softmax(causal),
                           "pv": ac.cpu_pv},
                   "cuda": cuda["naive"]},
            refuse=lambda size, dtype, backend: gpu_refuse(size, dtype, backend, True)),
        "flash": one_launch(
            "flash", "one launch: K/V tiles streamed through shared memory / cache, online "
                     "softmax, S never in memory",
            "online softmax over K/V tiles", ac.cpu_flash(causal), arrow_from="naive",
            refuse=lambda size, dtype, backend: gpu_refuse(size, dtype, backend, False)),
        "library": one_launch(
            "library", "torch scaled_dot_product_attention (GPU); numpy BLAS matmuls and ufunc "
                       "softmax per block of query rows (CPU)",
            "the library's own kernels", ac.cpu_library(causal),
            numba_threads=False),  # numpy's BLAS: a thread pool of its own
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
        # batch x heads x N x d: on the CPU odd N crosses the 32-row query blocks and 64-key
        # tiles, odd d the 2 x 4 register block's leftovers; N = 1100 makes the library take
        # several row blocks.
        test_sizes=SuiteSizes(
            cpu=((1, 1, 1, 5), (1, 2, 67, 37), (2, 1, 131, 64), (1, 1, 1100, 8)),
            gpu=((1, 2, 67, 64), (2, 4, 1000, 128)),
            sanitize=({"naive": (("bf16",), (1, 1, 67, 128)),
                       "flash": (("fp16",), (2, 1, 67, 64))} if causal else
                      {"naive": (("fp16",), (1, 2, 67, 64)),
                       "flash": (("bf16",), (1, 2, 131, 128))})),
        flop_convention=(f"{name}: 4d + 4 FLOPs per score (2d QK^T, 2d PV, 4 softmax: scale, "
                         "max, subtract, sum); exp and the normalisation not counted"
                         + ("; only the N(N+1)/2 scores on or below the diagonal counted"
                            if causal else "")),
        order=5 if causal else 4,
        marker="P" if causal else "*",
    )


WORKLOAD = workload(causal=False)
