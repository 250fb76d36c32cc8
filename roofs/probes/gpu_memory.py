"""Bandwidth probes: HBM (STREAM kernels against the libraries' own copies), the L2
working-set sweep and shared memory."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import asdict, dataclass
from functools import partial
from typing import Any

import numpy as np

from roofbench.roof_records import Roof

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


def stream_args(kernel: str, a: Any, b: Any, c: Any, out: Any, s: Any, n: int
                ) -> tuple[Any, ...]:
    """The arguments of ``stream_<kernel>_<f32|f64>``: arrays a, b, c of n elements, ``out``
    (read's one-element sink), the scalar s; n as the kernels' ``long long`` (never left to the
    launcher's width)."""
    nn = np.int64(n)
    return {"copy": (a, c, nn), "scale": (c, b, s, nn), "add": (a, b, c, nn),
            "triad": (a, b, c, s, nn), "read": (a, out, nn), "fill": (a, s, nn)}[kernel]


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
        order = ["triad"] + [k for k in STREAM_RW if k != "triad"]
        for kname in order:
            run.progress(f"HBM stream {kname} {prec}")
            k = gpu.kernel(mod, f"stream_{kname}_{suf}")
            work = stream_bytes(kname, n, isz)
            kargs = stream_args(kname, a, b, c, out, s, n)
            # The launch configuration is searched on triad (the fp32 one only when quick) with
            # the short timer; every kernel is then timed in full at its dtype's best.
            search = kname == "triad" and (not run.quick or best_cfg is None)
            tried: list[ConfigResult] = []
            for block, bps in bandwidth_configs(run.quick) if search else []:
                grid = gpu.sm_count * bps
                value, stats = run.timed(partial(k, (grid,), (block,), kargs), work,
                                         search=True)
                tried.append(ConfigResult(block, bps, grid, stats["median_s"], value,
                                          stats["cv"], stats["n"]))
            if search:
                best_cfg = pick_best_config(tried)
            assert best_cfg is not None
            cfg = best_cfg.config()
            value, stats = run.timed(partial(k, (cfg["grid"],), (cfg["block"],), kargs), work)
            entry = {"kernel": kname, "dtype": prec, "bytes_per_launch": work,
                     "array_bytes": nbytes, "n": n, "bytes_per_s": value, "config": cfg,
                     "timing": stats,
                     "searched": [asdict(r) for r in tried] if search else "the best triad "
                     "configuration"}
            if kname == "triad":
                entry["validated"] = _check_triad(gpu, a, b, c, 0.5, n)
            results[f"{kname}_{prec}"] = entry
            run.rows.append({"probe": f"stream {kname} {prec}", "kind": "memory",
                             "key": "dram", "value": value, "config": cfg})
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


# The L2 probe (cuda/cache.cu): block b reads chunk b % nchunks of the working set with loads
# that skip L1; the forms, load paths, loads in flight and block sizes are searched at a
# working set inside one L2 partition (each holds half of the L2), then the best of each form
# sweeps working sets from a thirty-second of the L2 to twice it.
L2_CHUNK_BYTES = 512 * 1024  # per block: larger than an SM's L1 (256 KiB on Hopper)
L2_FORMS = ("read", "copy")
L2_LOADS = ("cg", "na")  # ld.global.cg (L2 only); ld.global.nc.L1::no_allocate (read-only path)
L2_ILPS = (4, 8)  # independent 16-byte loads per thread before the first use
L2_BLOCKS = (256, 512, 1024)
L2_SEARCH_FRACTION = 1 / 4
L2_SWEEP = {True: (1 / 16, 1 / 8, 1 / 4, 3 / 8, 1 / 2, 3 / 4, 1, 2),
            False: (1 / 32, 1 / 16, 1 / 8, 3 / 16, 1 / 4, 3 / 8, 1 / 2, 5 / 8, 3 / 4, 7 / 8, 1,
                    3 / 2, 2)}


def l2_kernel(form: str, loads: str, ilp: int) -> str:
    return f"l2_{form}_{loads}_ilp{ilp}"


@dataclass(frozen=True)
class L2Launch:
    """One launch of the L2 probe: ``nchunks`` chunks of ``chunk_vecs`` 16-byte vectors form
    the working set (per buffer: the copy form reads one and writes another as large);
    ``grid`` blocks, each reading (and, copying, writing) one chunk."""

    form: str
    block: int
    chunk_vecs: int
    nchunks: int
    grid: int

    @property
    def working_set_bytes(self) -> int:
        """Bytes the launch keeps touching: both buffers of the copy form."""
        return self.chunk_vecs * self.nchunks * 16 * (2 if self.form == "copy" else 1)

    @property
    def bytes_per_launch(self) -> int:
        """Bytes through L2: every block moves its chunk once (read, or read and written)."""
        return self.grid * self.chunk_vecs * 16 * (2 if self.form == "copy" else 1)


def l2_launch(form: str, working_set: float, block: int, target_bytes: int) -> L2Launch:
    """The launch for a working set of about ``working_set`` bytes moving about
    ``target_bytes``: chunks of L2_CHUNK_BYTES (fewer vectors, never under one row of the
    block, when the working set is small), a grid that is a whole number of passes over every
    chunk."""
    buffers = 2 if form == "copy" else 1
    vecs = max(block, int(working_set) // 16 // buffers)
    chunk = max(block, min(L2_CHUNK_BYTES // 16, vecs // 2) // block * block)
    nchunks = max(1, vecs // chunk)
    passes = max(1, -(-int(target_bytes) // (nchunks * chunk * 16 * buffers)))
    return L2Launch(form, block, chunk, nchunks, nchunks * passes)


def l2_args(la: L2Launch, src: Any, dst: Any, sink: Any) -> tuple[Any, ...]:
    """The arguments of a timed L2 launch: the read form XORs ``src`` into the one-word
    ``sink`` (out_all 0: timing mode), the copy form copies ``src`` to ``dst``."""
    ch, nc = np.int64(la.chunk_vecs), np.int32(la.nchunks)
    return (src, ch, nc, sink, np.int32(0)) if la.form == "read" else (src, dst, ch, nc)


def probe_l2(run: ProbeRun) -> None:
    gpu = run.gpu
    l2 = gpu.l2_bytes
    if not l2:
        raise ProbeUnavailable("L2 size unknown")
    mod = run.module("cache.cu")
    target = (1 if run.quick else 2) * GiB
    fracs = L2_SWEEP[bool(run.quick)]
    biggest = max(f * l2 for f in fracs)
    # the largest read working set, and at least the two chunks _check_l2 reads and copies
    # (a device with under ~500 KiB of L2 has a smaller largest working set)
    nwords = max((int(biggest) // 16 + max(L2_BLOCKS)) * 4, 2 * L2_CHUNK_BYTES // 4)
    src, dst, sink = gpu.random(nwords, "u32"), gpu.empty(nwords, "u32"), gpu.empty(1, "u32")
    kernels: dict[str, Any] = {}

    def timed(form: str, loads: str, ilp: int, la: L2Launch, search: bool
              ) -> tuple[float, dict[str, Any]]:
        name = l2_kernel(form, loads, ilp)
        k = kernels.setdefault(name, gpu.kernel(mod, name))
        args = l2_args(la, src, dst, sink)
        return run.timed(lambda: k((la.grid,), (la.block,), args), float(la.bytes_per_launch),
                         search=search)

    search: dict[str, list[dict[str, Any]]] = {}
    best: dict[str, dict[str, Any]] = {}
    for form in L2_FORMS:
        rows = []
        for loads in L2_LOADS:
            for ilp in L2_ILPS:
                for block in L2_BLOCKS:
                    la = l2_launch(form, l2 * L2_SEARCH_FRACTION, block, target)
                    run.progress(f"L2 {form} search {loads} ilp{ilp} block {block}")
                    value, stats = timed(form, loads, ilp, la, search=True)
                    rows.append({"loads": loads, "ilp": ilp, "block": block, "bytes_per_s":
                                 value, "rate_sustained": stats["rate_sustained"],
                                 "cv": stats["cv"], "n": stats["n"]})
        search[form] = rows
        best[form] = max(rows, key=lambda r: r["rate_sustained"])
    sweep: list[dict[str, Any]] = []
    for form in L2_FORMS:
        b = best[form]
        for f in fracs:
            la = l2_launch(form, f * l2, b["block"], target)
            run.progress(f"L2 {form} sweep {la.working_set_bytes / MiB:.0f} MiB")
            value, stats = timed(form, b["loads"], b["ilp"], la, search=True)
            sweep.append({"form": form, "working_set_bytes": la.working_set_bytes,
                          "where": _l2_where(la.working_set_bytes, l2), "bytes_per_s": value,
                          "rate_sustained": stats["rate_sustained"], "cv": stats["cv"],
                          "grid": la.grid, "chunks": la.nchunks})
    run.rs.info["l2_sweep"] = sweep
    run.rs.info["l2_search"] = search
    # The roof: the sweep's best point inside L2, measured again with the full timer.
    inside = [p for p in sweep if p["where"] != "beyond L2"]
    top = max(inside, key=lambda p: p["rate_sustained"])
    b = best[top["form"]]
    la = l2_launch(top["form"], top["working_set_bytes"], b["block"], target)
    run.progress(f"L2 {top['form']} at {la.working_set_bytes / MiB:.0f} MiB")
    value, stats = timed(top["form"], b["loads"], b["ilp"], la, search=False)
    by_where = {w: max((p["rate_sustained"] for p in sweep if p["where"] == w), default=None)
                for w in ("inside one partition", "across both partitions", "beyond L2")}
    name = l2_kernel(top["form"], b["loads"], b["ilp"])
    run.rs.add(Roof(name=f"L2 ({top['form']}, {b['loads']} loads, working-set sweep)",
                    kind="memory", level="l2", value=stats["rate_sustained"], source="measured",
                    evidence={"probe": name, "form": top["form"],
                              "config": {"block": b["block"], "ilp": b["ilp"],
                                         "loads": b["loads"], "grid": la.grid,
                                         "chunk_bytes": la.chunk_vecs * 16,
                                         "chunks": la.nchunks},
                              "working_set_bytes": la.working_set_bytes, "l2_bytes": l2,
                              "bytes_per_launch": la.bytes_per_launch, "timing": stats,
                              "median_bytes_per_s": value,
                              "rate": "sustained: best median of "
                                      f"{SUSTAIN_WINDOW} consecutive samples",
                              "best_by_working_set": by_where,
                              "validated": _check_l2(gpu, mod, src, dst, best)}))
    run.rows.append({"probe": f"L2 {top['form']} sweep", "kind": "memory", "key": "l2",
                     "value": stats["rate_sustained"], "config": b})


def _l2_where(ws: int, l2: int) -> str:
    if ws <= l2 // 2:
        return "inside one partition"
    return "across both partitions" if ws <= l2 else "beyond L2"


def _check_l2(gpu: Gpu, mod: Any, src: Any, dst: Any, best: dict[str, dict[str, Any]]
              ) -> bool | None:
    """One small launch of each best form, read back: every thread's XOR of its vectors (read)
    and the destination equal to the source (copy). None when the device cannot be read."""
    b = best["read"]
    la = l2_launch("read", 2 * L2_CHUNK_BYTES, b["block"], 0)
    out = gpu.empty(la.grid * la.block, "u32")
    gpu.kernel(mod, l2_kernel("read", b["loads"], b["ilp"]))(
        (la.grid,), (la.block,), (src, np.int64(la.chunk_vecs), np.int32(la.nchunks), out,
                                  np.int32(1)))
    c = best["copy"]
    lc = l2_launch("copy", 4 * L2_CHUNK_BYTES, c["block"], 0)
    gpu.kernel(mod, l2_kernel("copy", c["loads"], c["ilp"]))(
        (lc.grid,), (lc.block,), (src, dst, np.int64(lc.chunk_vecs), np.int32(lc.nchunks)))
    n = la.chunk_vecs * la.nchunks * 4
    words = gpu.to_host(src, max(n, lc.chunk_vecs * lc.nchunks * 4))
    got, copied = gpu.to_host(out, la.grid * la.block), gpu.to_host(
        dst, lc.chunk_vecs * lc.nchunks * 4)
    if words is None or got is None or copied is None:
        return None
    want = l2_read_xor(words, la)
    return bool(np.array_equal(got, want)
                and np.array_equal(copied, words[:lc.chunk_vecs * lc.nchunks * 4]))


def l2_read_xor(words: np.ndarray, la: L2Launch) -> np.ndarray:
    """What l2_read writes with out_all: per thread (block, lane), the XOR of every 32-bit word
    of the vectors it reads (block b: chunk b % nchunks, rows of blockDim vectors)."""
    n = la.nchunks * la.chunk_vecs * 4
    w = np.asarray(words[:n], dtype=np.uint32).reshape(la.nchunks, la.chunk_vecs // la.block,
                                                       la.block, 4)
    per_chunk = np.bitwise_xor.reduce(np.bitwise_xor.reduce(w, axis=3), axis=1)
    return per_chunk[np.arange(la.grid) % la.nchunks].reshape(-1)


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
