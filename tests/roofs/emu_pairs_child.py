"""The child of tests/roofs/test_emu_pairs.py: the GPU roof samplers (roofs/probes/gpu_pairs.py)
run under the CuPy stand-in (tests/standins/fake_cupy), whose kernels execute under the CPU
emulation of CUDA. In a process of its own: the stand-in must never meet the real CuPy.

    python emu_pairs_child.py OUT.json     ($RB_EMU_LIBDIR: the check builds of stream.cu,
                                             cache.cu and fma.cu; $RB_EMU_COUNT: the counting
                                             builds of stream.cu and cache.cu)

1. The real probes calibrate the emulated device (probe_hbm, probe_l2, probe_fma at each
   precision), each launch timed once by the pair device's events: the roofs are the ones the
   calibration records (the device's L2 and free memory made small for the HBM probe, and the
   L2 probe's per-launch target cut to 256 KiB, so the emulation takes seconds).
2. From them, one roof per thing a roof can name: the HBM roof with each STREAM kernel and
   dtype (at the configuration the probe timed it at) and each library copy, the L2 roof of
   each form, the FMA roof of each precision.
3. Each roof's sampler (``sampler_of``) made on the pair device (``pair_device_through_cupy``)
   and called twice; written to OUT.json per roof: the launches and events of each call
   (cupy.cuda.LOG), the rates, the work the sampler divides by, what its outputs hold, and
   the bytes (a second sampler of the roof on the counting builds) or FMAs (the emulation's
   counters) its launch really moved or did. The test judges them.
"""

from __future__ import annotations

import ctypes
import dataclasses
import json
import os
import sys
from pathlib import Path
from typing import Any

import cuda_tools as ct
import cupy
import numpy as np
from cupy import cuda as fake_cuda
from emu_run import guarded
from roofbench.bench.backends.gpu_roofs import pair_device_through_cupy
from roofbench.roofs.probes import gpu_math as gm
from roofbench.roofs.probes import gpu_memory as gmem
from roofbench.roofs.probes import gpu_pairs as gp
from roofbench.roofs.probes.gpu_run import ProbeRun

from roofbench.roof_records import Roof, RoofSet

ALLOC: list[np.ndarray] = []  # every device array made, in order (guarded, registered)
POISON = {np.dtype(np.float32): np.nan, np.dtype(np.float64): np.nan,
          np.dtype(np.uint32): 0xA5A5A5A5}


def _guarded_copy(x: Any, poison: bool) -> Any:
    g = guarded(x.shape, x.dtype).view(cupy.ndarray)
    g[...] = POISON.get(np.dtype(x.dtype), 0) if poison else x
    ALLOC.append(g)
    return g


_EMPTY = cupy.empty


def _empty(shape: Any, dtype: Any = np.float64) -> Any:
    """Every device array in guard bytes of its own (an access past it fails the launch) and
    poisoned (an element never written stays NaN or 0xA5A5A5A5)."""
    return _guarded_copy(_EMPTY(shape, dtype=dtype), poison=True)


cupy.empty = _empty


class _Samples:
    def __init__(self, samples: list[float]) -> None:
        self.samples = samples

    def summary(self) -> dict[str, Any]:
        return {}


def calibrate(dev: Any) -> RoofSet:
    gpu = dev.gpu

    def time_fn(fn: Any, search: bool = False) -> _Samples:
        return _Samples([max(dev.timed(fn), 1e-9)])  # one sample: the emulation is slow

    rs = RoofSet(device=gpu.name)
    run = ProbeRun(gpu=gpu, time_fn=time_fn, quick=True, progress=lambda s: None, rs=rs)
    l2, free = gpu.l2_bytes, gpu.free_bytes
    gpu.l2_bytes, gpu.free_bytes = 16 << 10, 1 << 20  # arrays of 85 KiB
    run.attempt("hbm", lambda: gmem.probe_hbm(run))
    gpu.l2_bytes, gpu.free_bytes = l2, free
    giB = gmem.GiB
    gmem.GiB = 256 << 10  # the L2 probe's bytes per launch (its working sets are L2's)
    try:
        run.attempt("l2", lambda: gmem.probe_l2(run))
    finally:
        gmem.GiB = giB
    # The FMA probe's trial launch (64 iterations) only sizes its loop: skipped, and said to
    # have taken what sizes the roof's launch to 4 iterations (the sampler shortens it)
    trial = gpu.trial_seconds
    gpu.trial_seconds = lambda fn: 64 * 0.005 / 4
    try:
        for prec in gm.FMA_KERNELS:
            run.attempt(f"fma {prec}", lambda p=prec: gm.probe_fma(run, p))
    finally:
        gpu.trial_seconds = trial
    assert not run.failed, run.failed
    return rs


def roofs_to_sample(rs: RoofSet) -> list[Roof]:
    """Every roof the probes can record: the HBM roof naming each STREAM kernel and dtype at
    the configuration the probe timed it at, or a library copy (no configuration, as
    probe_hbm records a library's win), the L2 roof of each form, each FMA roof."""
    hbm = rs.memory("dram", "measured")
    l2 = rs.memory("l2", "measured")
    assert hbm is not None and l2 is not None
    out = []
    for v in rs.info["stream"].values():
        probe = f"stream {v['kernel']} {v['dtype']}"
        out.append(dataclasses.replace(hbm, name=f"HBM ({probe})", evidence={
            **hbm.evidence, "probe": probe, "config": v["config"], "timing": v["timing"]}))
    for lib, op in gmem.LIBRARY_STREAMS:
        probe = f"{lib} {op}"
        out.append(dataclasses.replace(hbm, name=f"HBM ({probe})", evidence={
            **hbm.evidence, "probe": probe, "config": None}))
    out.append(l2)
    # the other form, as probe_l2 records it had it won: its best sweep point inside L2, at
    # the launch the sweep ran (its search's best loads, ILP and block)
    other = next(f for f in gmem.L2_FORMS if f != l2.evidence["form"])
    b = max(rs.info["l2_search"][other], key=lambda r: r["rate_sustained"])
    top = max((p for p in rs.info["l2_sweep"] if p["form"] == other
               and p["where"] != "beyond L2"), key=lambda p: p["rate_sustained"])
    per_buffer = top["working_set_bytes"] // (2 if other == "copy" else 1)
    la = gmem.L2Launch(other, b["block"], per_buffer // top["chunks"] // 16, top["chunks"],
                       top["grid"])
    out.append(dataclasses.replace(l2, name=f"L2 ({other}, {b['loads']} loads)", evidence={
        **l2.evidence, "probe": gmem.l2_kernel(other, b["loads"], b["ilp"]), "form": other,
        "config": {"block": b["block"], "ilp": b["ilp"], "loads": b["loads"], "grid": la.grid,
                   "chunk_bytes": la.chunk_vecs * 16, "chunks": la.nchunks},
        "working_set_bytes": la.working_set_bytes, "bytes_per_launch": la.bytes_per_launch}))
    out += [r for r in rs.roofs if r.kind == "compute"]
    return out


def host(a: Any) -> np.ndarray:
    return np.array(a, copy=True).view(np.ndarray)


def outputs_hold(roof: Roof, arrays: list[np.ndarray], work: float) -> str:
    """'ok', or what the sampler's launch left wrong in its arrays (inputs made on start:
    the arrays of the first call, checked after it)."""
    probe = str(roof.evidence["probe"]).split()
    if roof.kind == "memory" and roof.level == "dram":
        if probe[0] == "stream":
            kernel, s = probe[1], 0.5
            a, b, c = (host(x) for x in arrays[:3])
            want = {"copy": (c, a), "scale": (b, s * c), "add": (c, a + b),
                    "triad": (a, b + s * c), "fill": (a, np.full_like(a, s))}.get(kernel)
            if want is None:  # read: atomics into a one-element sink, no output array (the
                return "ok"  # sampler's sink is uninitialized, as the probe's: no value)
            got, exp = want
            return "ok" if np.allclose(got, exp, rtol=1e-6) else f"{kernel} wrote wrong values"
        if probe[0] == "cupy":
            a, b, c = (host(x) for x in arrays[:3])
            exp = a if probe[1] == "copy" else a + b
            return "ok" if np.array_equal(c, exp) else f"{probe[1]} wrote wrong values"
        return "no arrays"
    if roof.kind == "memory":  # L2
        if roof.evidence["form"] == "copy":
            src, dst = host(arrays[0]), host(arrays[1])
            return "ok" if np.array_equal(src, dst) else "the copy's destination differs"
        return "ok"  # the read form XORs into a sink it writes only on an impossible value
    out = host(arrays[0])
    prec = str(roof.precision)
    packed = prec in ("fp16", "bf16")
    threads = out.size
    iters = round(work / gm.fma_flops(threads, 1, packed))
    if packed:
        ok = not (out == 0xA5A5A5A5).any() and len(set(out.tolist())) > 1
        return "ok" if ok else "packed outputs unwritten or all equal"
    t = np.arange(threads)[:, None] + np.arange(gm.FMA_CHAINS)[None, :]
    y = t * 1e-7
    for _ in range(iters * gm.FMA_UNROLL):
        y = y * 0.999 + 0.001
    tol = 1e-5 if prec == "fp32" else 1e-12
    return "ok" if np.allclose(out, y.sum(axis=1), rtol=tol) else "chains' sums differ"


def counted(roof: Roof, make: Any, dev: Any, count_dir: Path) -> dict[str, Any] | None:
    """The bytes one launch of a second sampler of ``roof``, built on the counting builds,
    reads and writes per array (in the order the sampler made them); None for a library's
    form (no kernel of ours) and a compute roof."""
    if roof.kind != "memory" or (roof.level == "dram"
                                 and not str(roof.evidence["probe"]).startswith("stream ")):
        return None
    src = "stream" if roof.level == "dram" else "cache"
    lib = ctypes.CDLL(str(count_dir / f"count_{src}.so"))
    before = len(ALLOC)
    os.environ["RB_EMU_LIBDIR"], check = str(count_dir), os.environ["RB_EMU_LIBDIR"]
    try:
        s = make(dev)
        s.start()
    finally:
        os.environ["RB_EMU_LIBDIR"] = check
    arrays = ALLOC[before:]
    counter = ct.ByteCounter(lib)
    counter.watch({f"array {i}": a for i, a in enumerate(arrays)})
    got = counter.count(s.launch)
    s.close()
    return {"work": s.work, "read": [t.read for t in got.values()],
            "written": [t.written for t in got.values()],
            "misaligned": sum(t.misaligned for t in got.values()),
            "nbytes": [int(a.nbytes) for a in arrays]}


def sample(roof: Roof, dev: Any, count_dir: Path, fma_lib: ctypes.CDLL) -> dict[str, Any]:
    found = gp.sampler_of(roof)
    rec: dict[str, Any] = {"name": roof.name, "kind": roof.kind, "level": roof.level,
                           "precision": roof.precision, "evidence": {
                               k: roof.evidence.get(k) for k in ("probe", "config", "form",
                                                                 "array_bytes", "iters",
                                                                 "bytes_per_launch")}}
    if found is None:
        rec["key"] = None
        return rec
    rec["key"], make = found
    s = make(dev)
    before = len(ALLOC)
    calls = []
    try:
        for _ in range(2):
            fake_cuda.LOG.clear()
            rate = s()
            fma = (ctypes.c_longlong * 4)()
            fma_lib.rb_emu_fma_counts(fma, 4)
            calls.append({"rate": rate, "log": [[e[0], *(list(x) if isinstance(x, tuple) else
                                                         str(x) for x in e[1:])]
                                                for e in fake_cuda.LOG],
                          "fma_counts": list(fma)})
            if len(calls) == 1:
                rec["outputs"] = outputs_hold(roof, ALLOC[before:], s.work)
    except Exception as e:
        rec["error"] = f"{type(e).__name__}: {e}"
        s.close()
        return rec
    rec["work"] = s.work
    rec["calls"] = calls
    rec["arrays"] = [[str(a.dtype), int(a.size)] for a in ALLOC[before:]]
    s.close()
    rec["counted"] = counted(roof, make, dev, count_dir)
    return rec


def main() -> None:
    out = Path(sys.argv[1])
    count_dir = Path(os.environ["RB_EMU_COUNT"])
    dev = pair_device_through_cupy(0)
    assert dev is not None
    gpu = dev.gpu
    orig_random = gpu.random
    gpu.random = lambda n, kind: _guarded_copy(orig_random(n, kind), poison=False)
    fake_cuda.LOG.clear()
    rs = calibrate(dev)
    probe_launches = sorted({(e[1], e[2], e[3]) for e in fake_cuda.LOG if e[0] == "launch"})
    fma_lib = ctypes.CDLL(str(Path(os.environ["RB_EMU_LIBDIR"]) / "fma.so"))
    result = {"device": gpu.name, "l2_bytes": gpu.l2_bytes,
              "probe_launches": [[n, list(g), list(b)] for n, g, b in probe_launches],
              "roofs": [sample(r, dev, count_dir, fma_lib) for r in roofs_to_sample(rs)]}
    out.write_text(json.dumps(result, indent=1))


if __name__ == "__main__":
    main()
