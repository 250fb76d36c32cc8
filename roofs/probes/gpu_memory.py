"""Bandwidth probes: HBM (STREAM kernels against the libraries' own copies), the L2
working-set sweep and shared memory."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import asdict
from typing import Any

import numpy as np

from roofbench.schema import Roof

from .gpu_device import GiB, Gpu, MiB, ProbeUnavailable
from .gpu_run import SUSTAIN_WINDOW, ConfigResult, ProbeRun, pick_best_config, scale_iters

# STREAM kernels: (arrays read, arrays written) per element, STREAM's byte convention.
STREAM_RW: dict[str, tuple[int, int]] = {
    "copy": (1, 1), "scale": (1, 1), "add": (2, 1), "triad": (2, 1), "read": (1, 0),
    "fill": (0, 1),
}
STREAM_DTYPES = {"fp32": ("f32", 4), "fp64": ("f64", 8)}
# Library bandwidth references (in the same process as the probes): (library, kernel).
LIBRARY_STREAMS = (("cupy", "copy"), ("cupy", "add"), ("torch", "copy"), ("torch", "add"),
                   ("torch", "triad"))
SMEM_UNROLL, SMEM_VEC_BYTES = 16, 16


def stream_bytes(kernel: str, n: int, itemsize: int) -> int:
    r, w = STREAM_RW[kernel]
    return (r + w) * n * itemsize


def bandwidth_configs(quick: bool) -> list[tuple[int, int]]:
    """(block size, blocks per SM) candidates for the bandwidth probes. Grid-stride kernels:
    more blocks than fit at once run as later waves."""
    if quick:
        return [(256, 8), (512, 4), (1024, 2), (256, 4), (512, 2), (1024, 1)]
    return [(b, tps // b) for b in (128, 256, 512, 1024) for tps in (1024, 2048, 4096)]


def array_bytes(gpu: Gpu, quick: bool, arrays: int) -> int:
    """Bytes per array of a memory probe: the larger of 16x L2 and 1 GiB (quick or not: a
    launch over 1 GiB arrays still takes about a millisecond), capped so all ``arrays`` fit in
    a quarter of the free memory; never under 4x L2."""
    l2 = gpu.l2_bytes or 64 * MiB
    want = max(16 * l2, 1 * GiB)
    cap = gpu.free_bytes // (4 * arrays)
    if cap < 4 * l2:
        raise ProbeUnavailable(f"not enough free memory for {arrays} arrays of 4x L2 "
                               f"({gpu.free_bytes / GiB:.1f} GiB free)")
    return int(min(want, cap)) // 64 * 64


def _stream(run: ProbeRun) -> dict[str, Any]:
    """STREAM kernels FP32/FP64, config search; returns the per-kernel results."""
    gpu = run.gpu
    mod = run.module("stream.cu")
    nbytes = array_bytes(gpu, run.quick, 3)
    results: dict[str, Any] = {}
    best_cfg: ConfigResult | None = None
    for prec, (suf, isz) in STREAM_DTYPES.items():
        n = nbytes // isz
        kind = "f32" if isz == 4 else "f64"
        a, b, c = gpu.random(n, kind), gpu.random(n, kind), gpu.random(n, kind)
        out = gpu.empty(1, kind)
        s = np.float32(0.5) if isz == 4 else np.float64(0.5)
        nn = np.int64(n)  # `long long n` in the kernels: never leave the width to the launcher
        args = {"copy": (a, c, nn), "scale": (c, b, s, nn), "add": (a, b, c, nn),
                "triad": (a, b, c, s, nn), "read": (a, out, nn), "fill": (a, s, nn)}
        order = ["triad"] + [k for k in STREAM_RW if k != "triad"]
        for kname in order:
            run.progress(f"HBM stream {kname} {prec}")
            k = gpu.kernel(mod, f"stream_{kname}_{suf}")
            work = stream_bytes(kname, n, isz)
            search = not run.quick or best_cfg is None
            cands = bandwidth_configs(run.quick) if search else [
                (best_cfg.block, best_cfg.blocks_per_sm)]
            tried: list[ConfigResult] = []
            stats_by: dict[tuple[int, int], dict] = {}
            for block, bps in cands:
                grid = gpu.sm_count * bps
                kargs = args[kname]
                value, stats = run.timed(lambda k=k, g=grid, bl=block, ka=kargs:
                                         k((g,), (bl,), ka), work)
                tried.append(ConfigResult(block, bps, grid, stats["median_s"], value,
                                          stats["cv"], stats["n"]))
                stats_by[(block, bps)] = stats
            best = pick_best_config(tried)
            if kname == "triad" and prec == "fp32":
                best_cfg = best
            entry = {"kernel": kname, "dtype": prec, "bytes_per_launch": work,
                     "array_bytes": nbytes, "n": n, "bytes_per_s": best.rate,
                     "config": best.config(), "timing": stats_by[(best.block,
                                                                    best.blocks_per_sm)],
                     "searched": [asdict(r) for r in tried] if search else "reused best "
                     "fp32 triad config (quick)"}
            if kname == "triad":
                entry["validated"] = _check_triad(gpu, a, b, c, 0.5, n)
            results[f"{kname}_{prec}"] = entry
            run.rows.append({"probe": f"stream {kname} {prec}", "kind": "memory",
                             "key": "dram", "value": best.rate, "config": best.config()})
    return results


def _check_triad(gpu: Gpu, a: Any, b: Any, c: Any, s: float, n: int) -> bool | None:
    """The last triad wrote a = b + s c: check the first elements (None if not readable)."""
    m = min(n, 4096)
    ha, hb, hc = gpu.to_host(a, m), gpu.to_host(b, m), gpu.to_host(c, m)
    if ha is None or hb is None or hc is None:
        return None
    return bool(np.allclose(ha, hb + s * hc, rtol=1e-6, atol=0))


_LIBRARY_WHAT = {("cupy", "copy"): "cudaMemcpyAsync device-to-device",
                 ("cupy", "add"): "cupy.add(a, b, out=c)",
                 ("torch", "copy"): "torch.Tensor.copy_", ("torch", "add"): "torch.add",
                 ("torch", "triad"): "torch.add(a, b, alpha=0.5, out=c)"}


def _library_streams(run: ProbeRun, nbytes: int) -> dict[str, Any]:
    """The libraries' own copy/add/triad in this process, FP32 arrays of ``nbytes`` each:
    the figures the HBM roof must not fall below. Keyed "<lib>_<op>"."""
    out: dict[str, Any] = {}
    for lib, op in LIBRARY_STREAMS:
        run.progress(f"reference {lib} {op}")
        key = f"{lib}_{op}"
        try:
            fn = run.gpu.library_stream(lib, op, nbytes)
        except ProbeUnavailable as e:
            out[key] = {"unavailable": str(e)}
            continue
        work = stream_bytes(op, nbytes // 4, 4)
        median_rate, stats = run.timed(fn, work)
        out[key] = {"bytes_per_s": stats["rate_sustained"], "median_bytes_per_s": median_rate,
                    "bytes": nbytes, "bytes_per_launch": work, "timing": stats,
                    "what": _LIBRARY_WHAT[(lib, op)]}
    return out


def probe_hbm(run: ProbeRun) -> None:
    stream = _stream(run)
    run.rs.info["stream"] = stream
    nbytes = next(iter(stream.values()))["array_bytes"]
    refs = _library_streams(run, nbytes)
    run.rs.info["reference_copies"] = refs
    # Every figure at its sustained rate (best run of SUSTAIN_WINDOW samples); the roof is
    # the best of the probes and the libraries, so no library in this run moves more.
    cands = [(v["timing"]["rate_sustained"], f"stream {v['kernel']} {v['dtype']}", v)
             for v in stream.values()]
    cands += [(v["bytes_per_s"], f"{key.replace('_', ' ')}", v) for key, v in refs.items()
              if "bytes_per_s" in v]
    best_rate, best_name, best = max(cands, key=lambda t: t[0])
    lib_best = max((v["bytes_per_s"] for v in refs.values() if "bytes_per_s" in v),
                   default=None)
    ratios = {}
    for key, v in refs.items():
        if "bytes_per_s" in v:
            for probe in ("triad_fp32", "copy_fp32"):
                if probe in stream:
                    ratios[f"{probe}/{key}"] = (stream[probe]["timing"]["rate_sustained"]
                                                / v["bytes_per_s"])
    if lib_best:
        ratios["hbm_roof/best_library"] = best_rate / lib_best
    run.rs.info["probe_library_ratio"] = ratios
    run.rs.add(Roof(name=f"HBM ({best_name})", kind="memory", level="dram", value=best_rate,
                    source="measured",
                    evidence={"probe": best_name, "config": best.get("config"),
                              "array_bytes": nbytes, "timing": best.get("timing"),
                              "all_probes": {k: v["bytes_per_s"] for k, v in stream.items()},
                              "library_references": {k: v.get("bytes_per_s") for k, v in
                                                     refs.items()},
                              "rate": "sustained: best median of "
                                      f"{SUSTAIN_WINDOW} consecutive samples",
                              "ratios": ratios}))
    for key, v in refs.items():
        if "bytes_per_s" in v:
            run.rows.append({"probe": f"{key.replace('_', ' ')} (library)", "kind": "memory",
                             "key": "dram", "value": v["bytes_per_s"]})


def probe_l2(run: ProbeRun) -> None:
    gpu = run.gpu
    l2 = gpu.l2_bytes
    if not l2:
        raise ProbeUnavailable("L2 size unknown")
    mod = run.module("cache.cu")
    k = gpu.kernel(mod, "l2_read")
    fracs = (1 / 16, 1 / 8, 1 / 4, 1 / 2, 1, 2, 4) if run.quick else \
        (1 / 32, 1 / 16, 1 / 8, 1 / 4, 3 / 8, 1 / 2, 3 / 4, 1, 1.5, 2, 3, 4)
    block, bps = 512, 4
    grid = gpu.sm_count * bps
    biggest = int(4 * l2) // 16
    buf = gpu.random(biggest * 4, "u32")
    out = gpu.empty(grid * block, "u32")
    target = (1 if run.quick else 2) * GiB
    sweep = []
    for f in fracs:
        nv = max(grid * block, int(l2 * f) // 16)
        reps = max(1, int(target // (nv * 16)))
        run.progress(f"L2 sweep {nv * 16 / MiB:.0f} MiB")
        value, stats = run.timed(lambda nv=nv, r=reps: k((grid,), (block,),
                                                        (buf, np.int64(nv), np.int32(r), out)),
                                 float(nv * 16 * reps))
        sweep.append({"working_set_bytes": nv * 16, "reps": reps, "bytes_per_s": value,
                      "timing": stats})
    run.rs.info["l2_sweep"] = [[p["working_set_bytes"], p["bytes_per_s"]] for p in sweep]
    inside = [p for p in sweep if p["working_set_bytes"] <= l2 / 2]
    best = max(inside, key=lambda p: p["bytes_per_s"])
    beyond = [p for p in sweep if p["working_set_bytes"] >= 2 * l2]
    run.rs.add(Roof(name="L2 (ld.global.cg working-set sweep)", kind="memory", level="l2",
                    value=best["bytes_per_s"], source="measured",
                    evidence={"probe": "l2_read", "config": {"block": block,
                                                             "blocks_per_sm": bps,
                                                             "grid": grid},
                              "working_set_bytes": best["working_set_bytes"],
                              "l2_bytes": l2, "timing": best["timing"],
                              "beyond_l2_bytes_per_s": beyond[-1]["bytes_per_s"] if beyond
                              else None}))
    run.rows.append({"probe": "L2 read sweep", "kind": "memory", "key": "l2",
                     "value": best["bytes_per_s"]})


def probe_smem(run: ProbeRun) -> None:
    gpu = run.gpu
    k = gpu.kernel(run.module("cache.cu"), "smem_read")
    block, bps = 1024, 2
    grid = gpu.sm_count * bps
    out = gpu.empty(grid * block, "u32")
    reps = 256

    def launch(r: int) -> Callable[[], None]:
        return lambda: k((grid,), (block,), (np.int32(r), np.uint32(0x9E3779B9), out))
    reps = scale_iters(reps, gpu.trial_seconds(launch(reps)), 0.004 if run.quick else 0.01,
                       hi=1 << 22)
    run.progress("shared memory")
    work = float(grid) * block * reps * SMEM_UNROLL * SMEM_VEC_BYTES
    value, stats = run.timed(launch(reps), work)
    run.rs.add(Roof(name="shared memory (LDS.128)", kind="memory", level="smem", value=value,
                    source="measured",
                    evidence={"probe": "smem_read", "config": {"block": block,
                                                               "blocks_per_sm": bps,
                                                               "grid": grid},
                              "reps": reps, "timing": stats}))
    run.rows.append({"probe": "shared memory read", "kind": "memory", "key": "smem",
                     "value": value})
