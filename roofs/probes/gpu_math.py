"""Compute probes: CUDA-core FMA peaks, tensor-core ceilings (library GEMMs, hand-written
mma.sync and, on Hopper, hand-written wgmma) and the empirical roofline curve (ERT)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import asdict
from functools import partial
from typing import Any

import numpy as np

from roofbench.roof_records import Roof

from .. import datasheet
from .gpu_device import Gpu, ProbeUnavailable
from .gpu_memory import array_bytes
from .gpu_run import (
    LABEL,
    SUSTAIN_WINDOW,
    ConfigResult,
    ProbeRun,
    pick_best_config,
    scale_iters,
)

# ERT: FMAs per element (must match the ERT_KERNELS ladder in cuda/ert.cu).
ERT_FMAS = (0, 1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024)
# precision -> (kernel suffix, bytes per element, elements per 32-bit word or 1)
ERT_PRECISIONS = {"fp64": ("fp64", 8), "fp32": ("fp32", 4), "fp16": ("fp16x2", 2),
                  "bf16": ("bf16x2", 2)}

# CUDA-core FMA probe constants (cuda/fma.cu). FP32 and the packed FP16x2/BF16x2 forms issue
# one warp instruction per clock per SM sub-partition at peak, so the loop's own 3 instructions
# cost 3 / (UNROLL x CHAINS) of the peak: 2.3% at 16 x 8, 0.6% at 64 x 8.
FMA_CHAINS, FMA_UNROLL = 8, 64
FMA_KERNELS = {"fp64": "fma_fp64", "fp32": "fma_fp32", "fp16": "fma_fp16x2",
               "bf16": "fma_bf16x2"}

# mma.sync probes (cuda/mma.cu): precision -> (kernel, K of the m16n8kK shape, min cc).
MMA_ACC = 8
MMA_KERNELS = {"fp16_tc": ("mma_fp16", 16, (8, 0)), "bf16_tc": ("mma_bf16", 16, (8, 0)),
               "tf32_tc": ("mma_tf32", 8, (8, 0)), "fp8_tc": ("mma_fp8e4m3", 32, (8, 9))}
# wgmma probes (cuda/wgmma.cu, sm_90a only): precision -> (kernel, K of the m64n256kK shape).
# They replace the FP8 mma.sync probe on Hopper, which has no native FP8 mma.sync.
WGMMA_KERNELS = {"fp16_tc": ("wgmma_fp16", 16), "bf16_tc": ("wgmma_bf16", 16),
                 "fp8_tc": ("wgmma_fp8e4m3", 32)}
WGMMA_STEPS, WGMMA_IN_WORDS, WGMMA_ARCH = 4, (64 * 128 + 256 * 128) // 4, "sm_90a"
# Library GEMMs tried per tensor precision (the roof is the best sustained of them).
GEMM_LIBS = {"fp64_tc": ("cupy", "torch"), "tf32_tc": ("cupy", "torch"),
             "fp16_tc": ("cupy", "torch"), "bf16_tc": ("torch",), "fp8_tc": ("torch",)}


def ert_ai(fmas: int, elem_bytes: int) -> float:
    """FLOP per byte of the ERT kernel: 2 K FLOPs per element over a read and a write."""
    return 2 * fmas / (2 * elem_bytes)


def fma_flops(threads: int, iters: int, packed: bool) -> float:
    return float(threads) * iters * FMA_UNROLL * FMA_CHAINS * 2 * (2 if packed else 1)


def mma_flops(warps: int, iters: int, k: int) -> float:
    return float(warps) * iters * MMA_ACC * 2 * 16 * 8 * k


def wgmma_flops(blocks: int, threads: int, iters: int, k: int) -> float:
    """Every warpgroup: iters x WGMMA_STEPS wgmma of m64 n256 kK, 2 FLOPs per MAC."""
    return float(blocks) * (threads // 128) * iters * WGMMA_STEPS * 2 * 64 * 256 * k


def knee_from_curve(curve: Sequence[Sequence[float]]) -> dict[str, float] | None:
    """The measured ridge of an ERT curve [[ai, flop/s], ...].

    Bandwidth = the best flop/s / ai over the points (the memory-bound end), peak = the best
    flop/s (the compute-bound end); the knee is where those two lines meet, peak / bandwidth.
    Also the first intensity that reaches 90% of the peak, which is where a kernel author
    actually gets compute-bound performance.
    """
    pts = sorted((float(a), float(f)) for a, f in curve if a > 0 and f > 0)
    if len(pts) < 2:
        return None
    bw = max(f / a for a, f in pts)
    peak = max(f for _, f in pts)
    first90 = next(a for a, f in pts if f >= 0.9 * peak)
    return {"knee_ai": peak / bw, "bandwidth": bw, "peak": peak, "ai_at_90pct_peak": first90}


def pack2(x: float, kind: str) -> int:
    """Two copies of x as one 32-bit word of FP16 pairs or BF16 pairs (kernel arguments)."""
    if kind == "fp16":
        return int(np.array([x, x], dtype=np.float16).view(np.uint32)[0])
    if kind == "bf16":
        hi = int(np.array([x], dtype=np.float32).view(np.uint32)[0]) >> 16
        return (hi << 16) | hi
    raise ValueError(kind)


def fma_args(gpu: Gpu, prec: str, threads: int) -> tuple[Any, Any, Any]:
    """(a, b, out) of the FMA kernel of ``prec``: the chains' constants (packed pairs for
    FP16x2/BF16x2) and one output element per thread."""
    if prec in ("fp16", "bf16"):
        return (np.uint32(pack2(0.999, prec)), np.uint32(pack2(0.001, prec)),
                gpu.empty(threads, "u32"))
    if prec == "fp32":
        return np.float32(0.999), np.float32(0.001), gpu.empty(threads, "f32")
    return np.float64(0.999), np.float64(0.001), gpu.empty(threads, "f64")


def probe_fma(run: ProbeRun, prec: str) -> None:
    gpu = run.gpu
    if prec == "bf16" and gpu.cc < (8, 0):
        raise ProbeUnavailable(f"BF16 HFMA2 needs sm_80+, this is sm_{gpu.cc[0]}{gpu.cc[1]}")
    k = gpu.kernel(run.module("fma.cu"), FMA_KERNELS[prec])
    block, bps = 256, 8
    grid = gpu.sm_count * bps
    threads = grid * block
    packed = prec in ("fp16", "bf16")
    a, b, out = fma_args(gpu, prec, threads)

    def launch(it: int) -> Callable[[], None]:
        return lambda: k((grid,), (block,), (a, b, np.int32(it), out))
    iters = scale_iters(64, gpu.trial_seconds(launch(64)), 0.005 if run.quick else 0.02,
                        hi=1 << 20)
    run.progress(f"FMA {prec}")
    flops = fma_flops(threads, iters, packed)
    value, stats = run.timed(launch(iters), flops)
    snap = gpu.busy_snapshot(launch(iters), repeats=max(2, int(0.05 / max(
        stats["median_s"], 1e-6))))
    clk = snap.get("sm_clock_mhz")
    theo = datasheet.fma_peak(prec, gpu.sm_count, run.cc_str, clk) if clk else None
    ev = {"probe": FMA_KERNELS[prec], "config": {"block": block, "blocks_per_sm": bps,
                                                 "grid": grid},
          "iters": iters, "chains_per_thread": FMA_CHAINS, "flops_per_launch": flops,
          "timing": stats, "clocks_during": snap,
          "sm_x_lanes_x2_x_clock": theo,
          "fraction_of_clock_peak": value / theo if theo else None,
          "lanes_per_sm": datasheet.LANES[prec].get(run.cc_str)}
    run.rs.add(Roof(name=f"{LABEL[prec]} FMA (CUDA cores)", kind="compute", precision=prec,
                    value=value, source="measured", evidence=ev))
    run.rows.append({"probe": f"{FMA_KERNELS[prec]}", "kind": "compute", "key": prec,
                     "value": value, "theoretical_at_clock": theo})


def probe_mma(run: ProbeRun, prec: str) -> None:
    gpu = run.gpu
    kname, kdim, min_cc = MMA_KERNELS[prec]
    if gpu.cc < min_cc:
        raise ProbeUnavailable(f"{kname} needs sm_{min_cc[0]}{min_cc[1]}+, this is "
                               f"sm_{gpu.cc[0]}{gpu.cc[1]}")
    if prec == "fp8_tc" and gpu.cc == (9, 0):
        raise ProbeUnavailable("Hopper has no native FP8 mma.sync (ptxas lowers it to FP16 "
                               "HMMA); FP8 on sm_90 needs wgmma: see the library ceiling")
    k = gpu.kernel(run.module("mma.cu"), kname)
    block, bps = 256, 2
    grid = gpu.sm_count * bps
    warps = grid * block // 32
    rng = np.random.default_rng(7)
    if prec == "fp16_tc":
        words = rng.uniform(0.25, 0.75, 32 * 6 * 2).astype(np.float16).view(np.uint32)
    elif prec == "bf16_tc":
        hi = rng.uniform(0.25, 0.75, 32 * 6 * 2).astype(np.float32).view(np.uint32) >> 16
        words = (hi[0::2] | (hi[1::2] << 16)).astype(np.uint32)
    elif prec == "tf32_tc":
        words = rng.uniform(0.25, 0.75, 32 * 6).astype(np.float32).view(np.uint32)
    else:  # e4m3 bytes with the top exponent bit clear: finite, positive, never NaN
        words = (rng.integers(0, 2**32, 32 * 6, dtype=np.uint64).astype(np.uint32)
                 & np.uint32(0x3F3F3F3F)) | np.uint32(0x08080808)
    inp = gpu.upload(np.ascontiguousarray(words, dtype=np.uint32))
    out = gpu.empty(grid * block, "f32")

    def launch(it: int) -> Callable[[], None]:
        return lambda: k((grid,), (block,), (inp, np.int32(it), out))
    iters = scale_iters(64, gpu.trial_seconds(launch(64)), 0.005 if run.quick else 0.02,
                        hi=1 << 20)
    run.progress(f"mma.sync {prec}")
    flops = mma_flops(warps, iters, kdim)
    value, stats = run.timed(launch(iters), flops)
    note = "legacy warp-level mma.sync path"
    if gpu.cc[0] >= 9:
        note += ("; on Hopper and later it falls short of the wgmma/tcgen05 peak that the "
                 "library ceiling uses")
    run.rs.add(Roof(name=f"{LABEL[prec]} (mma.sync)", kind="compute", precision=prec,
                    value=value, source="measured",
                    evidence={"probe": kname, "ceiling": "mma.sync", "note": note,
                              "shape": f"m16n8k{kdim}", "accumulators_per_warp": MMA_ACC,
                              "config": {"block": block, "blocks_per_sm": bps, "grid": grid},
                              "iters": iters, "flops_per_launch": flops, "timing": stats}))
    run.rows.append({"probe": f"{kname} (mma.sync ceiling)", "kind": "compute", "key": prec,
                     "value": value})


def probe_gemm(run: ProbeRun, prec: str) -> None:
    gpu = run.gpu
    if prec in ("tf32_tc", "bf16_tc") and gpu.cc < (8, 0):
        raise ProbeUnavailable(f"{prec} tensor cores need sm_80+")
    if prec == "fp8_tc" and gpu.cc < (8, 9):
        raise ProbeUnavailable("FP8 tensor cores need sm_89+")
    slow_fp64 = (datasheet.FP64_LANES.get(run.cc_str) or 64) <= 2
    n = 8192 if not (prec == "fp64_tc" and slow_fp64) else 4096
    if run.quick and prec == "fp64_tc":
        n = 4096 if slow_fp64 else 8192
    flops = 2.0 * n ** 3
    tried: dict[str, Any] = {}
    best: tuple[float, dict[str, Any], dict[str, Any]] | None = None
    for lib in GEMM_LIBS[prec]:
        try:
            fn, meta = gpu.library_gemm(prec, n, lib)
        except ProbeUnavailable as e:
            tried[lib] = {"unavailable": str(e)}
            continue
        run.progress(f"library GEMM {prec} n={n} ({lib})")
        median_rate, stats = run.timed(fn, flops)
        value = stats["rate_sustained"]
        tried[lib] = {**meta, "flop_per_s": value, "median_flop_per_s": median_rate,
                      "timing": stats}
        run.rows.append({"probe": f"{meta['library']} {prec} n={n}", "kind": "compute",
                         "key": prec, "value": value})
        if best is None or value > best[0]:
            best = (value, meta, stats)
        gpu.release()  # one library's operands at a time
    if best is None:
        raise ProbeUnavailable("; ".join(f"{k}: {v['unavailable']}" for k, v in tried.items()))
    value, meta, stats = best
    run.rs.add(Roof(name=f"{LABEL[prec]} ({meta['library'].split()[0]} GEMM)", kind="compute",
                    precision=prec, value=value, source="measured",
                    evidence={"probe": "library GEMM", "ceiling": "library", "n": n,
                              "flops_per_launch": flops, **meta, "timing": stats,
                              "rate": "sustained: best median of "
                                      f"{SUSTAIN_WINDOW} consecutive samples",
                              "libraries": tried, "data": "random normal (not zeros)"}))


def wgmma_words(prec: str, rng: np.random.Generator) -> np.ndarray:
    """Operand tiles of the wgmma probe as 32-bit words: finite values of the input type."""
    n = WGMMA_IN_WORDS
    if prec == "fp16_tc":
        return rng.uniform(0.25, 0.75, 2 * n).astype(np.float16).view(np.uint32)
    if prec == "bf16_tc":
        hi = rng.uniform(0.25, 0.75, 2 * n).astype(np.float32).view(np.uint32) >> 16
        return (hi[0::2] | (hi[1::2] << 16)).astype(np.uint32)
    # e4m3 bytes with the top exponent bit clear: finite, positive, never NaN
    return ((rng.integers(0, 2**32, n, dtype=np.uint64).astype(np.uint32)
             & np.uint32(0x3F3F3F3F)) | np.uint32(0x08080808))


def probe_wgmma(run: ProbeRun, prec: str) -> None:
    """Hopper's native tensor-core ceiling, hand-written: wgmma m64n256 from shared memory
    (cuda/wgmma.cu), built for sm_90a. On Hopper it replaces the FP8 mma.sync probe."""
    gpu = run.gpu
    if gpu.cc != (9, 0):
        raise ProbeUnavailable(f"wgmma is sm_90a only, this is sm_{gpu.cc[0]}{gpu.cc[1]}")
    kname, kdim = WGMMA_KERNELS[prec]
    try:
        module = run.module("wgmma.cu", WGMMA_ARCH)
    except ProbeUnavailable as e:
        raise ProbeUnavailable(f"the wgmma probe cannot be built: {e}") from None
    k = gpu.kernel(module, kname)
    inp = gpu.upload(np.ascontiguousarray(wgmma_words(prec, np.random.default_rng(7))))
    grid = gpu.sm_count  # one block per SM (about 154 registers x 128 per warpgroup)
    tried: list[ConfigResult] = []
    by: dict[int, tuple[int, Callable[[], None]]] = {}
    for block in (256, 384):  # 2 or 3 warpgroups per SM
        out = gpu.empty(grid * block, "f32")

        def launch(it: int, block: int = block, out: Any = out) -> Callable[[], None]:
            return lambda: k((grid,), (block,), (inp, np.int32(it), out))
        iters = scale_iters(64, gpu.trial_seconds(launch(64)), 0.005 if run.quick else 0.02,
                            hi=1 << 22)
        run.progress(f"wgmma {prec} {block // 128} warpgroups")
        flops = wgmma_flops(grid, block, iters, kdim)
        median_rate, stats = run.timed(launch(iters), flops, search=True)
        tried.append(ConfigResult(block, 1, grid, stats["median_s"], stats["rate_sustained"],
                                  stats["cv"], stats["n"]))
        by[block] = (iters, launch(iters))
    best = pick_best_config(tried)
    iters, fn = by[best.block]
    run.progress(f"wgmma {prec} {best.block // 128} warpgroups (the roof)")
    _, stats = run.timed(fn, wgmma_flops(grid, best.block, iters, kdim))
    best.rate = stats["rate_sustained"]
    run.rs.add(Roof(name=f"{LABEL[prec]} (wgmma)", kind="compute", precision=prec,
                    value=best.rate, source="measured",
                    evidence={"probe": kname, "ceiling": "wgmma",
                              "note": "hand-written Hopper-native path: wgmma.mma_async "
                                      "m64n256 from shared memory, built for sm_90a",
                              "shape": f"m64n256k{kdim}", "k_steps_per_iter": WGMMA_STEPS,
                              "config": best.config(), "iters": iters,
                              "flops_per_launch": wgmma_flops(grid, best.block, iters, kdim),
                              "timing": stats, "searched": [asdict(r) for r in tried],
                              "rate": "sustained: best median of "
                                      f"{SUSTAIN_WINDOW} consecutive samples"}))
    run.rows.append({"probe": f"{kname} (wgmma ceiling)", "kind": "compute", "key": prec,
                     "value": best.rate, "config": best.config()})


def probe_ert(run: ProbeRun, prec: str) -> None:
    gpu = run.gpu
    if prec == "bf16" and gpu.cc < (8, 0):
        raise ProbeUnavailable("BF16 HFMA2 needs sm_80+")
    suf, esz = ERT_PRECISIONS[prec]
    mod = run.module("ert.cu")
    nbytes = array_bytes(gpu, run.quick, 2)
    packed = esz == 2
    n = nbytes // (4 if packed else esz)  # words for packed forms, else elements
    elements = n * 2 if packed else n
    kind = {"fp64": "f64", "fp32": "f32", "fp16": "f16x2", "bf16": "bf16x2"}[prec]
    inp = gpu.random(n, kind)
    out = gpu.empty(n, "u32" if packed else kind)
    c = {"fp64": np.float64(0.5), "fp32": np.float32(0.5)}.get(prec)
    if c is None:
        c = np.uint32(pack2(0.5, prec))
    cfg = run.rs.info.get("stream", {}).get("triad_fp32", {}).get("config") or {
        "block": 256, "blocks_per_sm": 8}
    block, grid = cfg["block"], gpu.sm_count * cfg["blocks_per_sm"]
    pts = []
    for fmas in ERT_FMAS:
        run.progress(f"ERT {prec} {fmas} FMA/elem")
        k = gpu.kernel(mod, f"ert_{suf}_k{fmas}")
        bytes_ = 2.0 * elements * esz
        bw, stats = run.timed(partial(k, (grid,), (block,), (inp, out, np.int64(n), c)),
                              bytes_, search=True)  # a curve point: the short timer
        flops = 2.0 * fmas * elements
        pts.append({"fmas": fmas, "ai": ert_ai(fmas, esz), "bytes_per_s": bw,
                    "flop_per_s": flops / stats["median_s"], "median_s": stats["median_s"],
                    "cv": stats["cv"]})
    curve = [[p["ai"], p["flop_per_s"]] for p in pts if p["fmas"] > 0]
    knee = knee_from_curve(curve)
    fma_roof = run.rs.compute(prec, "measured")
    dram = run.rs.memory("dram", "measured")
    computed = fma_roof.value / dram.value if fma_roof and dram else None
    run.rs.info.setdefault("ert_curves", {})[prec] = curve
    run.rs.info.setdefault("ert", {})[prec] = {
        "kernel": f"ert_{suf}_k<K>", "array_bytes": nbytes, "elements": elements,
        "config": {"block": block, "grid": grid}, "points": pts, "knee": knee,
        "measured_ridge": knee["knee_ai"] if knee else None, "computed_ridge": computed,
        "bandwidth_at_0_fma": pts[0]["bytes_per_s"]}
