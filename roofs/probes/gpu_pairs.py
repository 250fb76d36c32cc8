"""Short samples of a GPU roof, taken beside each timed sample of a case (``timing.sample_loop``'s
``pair``): the kernel that measured the roof, at the roof's own launch, timed by CUDA events.

A GPU's clocks move under a case (boost, power and thermal limits, a neighbour's work on a
shared device), so a roof measured at calibration is not the roof a case ran under. A sample
of the roof right after each sample of the case sees the same state; the case's efficiency is
then the median of the pairs' ratios (``roofline.apply_roofs``), as on the CPU
(``cpu_pairs.py``).

- ``HbmPair``: the HBM roof's STREAM kernel (its kernel, dtype and launch configuration) over
  arrays of the roof's own size (less where the device has less free memory now), or the
  library copy/add that set the roof: one launch (about a millisecond on an H200).
- ``L2Pair``: the L2 roof's kernel at its launch (form, loads, ILP, block, grid, chunks):
  one untimed launch that brings its working set back into L2, then one timed.
- ``FmaPair``: the FMA roof's kernel at its configuration, its loop shortened to about
  ``FMA_PAIR_S`` (the calibration's launches last 20 ms).

``sampler_of(roof)`` says which one a roof gets, or None: a roof not measured by these probes
(a datasheet's, a tensor-core ceiling, a shared-memory roof). A sampler allocates and compiles
on its first call; each call returns one rate (bytes/s or FLOP/s). They run on a
``PairDevice``: the probes' adapter (``gpu_device.Gpu``) and the device seconds of a call's
work, which the backend measures with CUDA events on its stream.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from roofbench.roof_records import Roof

from .gpu_device import Gpu
from .gpu_math import FMA_KERNELS, fma_args, fma_flops
from .gpu_memory import (
    L2_FORMS,
    L2_ILPS,
    L2_LOADS,
    LIBRARY_STREAMS,
    STREAM_DTYPES,
    STREAM_RW,
    L2Launch,
    array_bytes,
    l2_args,
    l2_kernel,
    stream_args,
    stream_bytes,
)
from .gpu_run import CUDA_DIR, scale_iters

# One FMA sample: long beside a launch's few microseconds of ramp (0.2% at 2 ms), short beside
# a naive or tiled GEMM's sample at the suite's sizes (milliseconds)
FMA_PAIR_S = 0.002

Timed = Callable[[Callable[[], None]], float]  # device seconds of the work a call enqueues


@dataclass
class PairDevice:
    """Where a GPU roof's samples run: the probes' adapter (compile, allocate, launch on the
    current stream), the device seconds of one call's work (CUDA events around it, waited
    for), and a key naming the device (its samplers are kept under it)."""

    gpu: Gpu
    timed: Timed
    key: str


class GpuSampler:
    """What the three samplers share: the roof, the device, the probe source compiled once."""

    def __init__(self, roof: Roof, device: PairDevice) -> None:
        self.roof, self.device = roof, device
        # Re-pointed by the case that uses it (bench/measure/pairs.py): each backend times on
        # its own stream, while the arrays stay the device's.
        self.timed = device.timed
        self.launch: Callable[[], None] | None = None
        self.work = 0.0  # bytes or FLOPs a launch moves or does

    @property
    def name(self) -> str:
        return self.roof.name

    def module(self, source: str) -> Any:
        return self.device.gpu.compile((CUDA_DIR / source).read_text(), source)

    def start(self) -> None:
        raise NotImplementedError

    def __call__(self) -> float:
        if self.launch is None:
            self.start()
        assert self.launch is not None
        return self.work / self.timed(self.launch)

    def close(self) -> None:
        self.launch = None  # the arrays go with the closure that holds them


class HbmPair(GpuSampler):
    def start(self) -> None:
        gpu, ev = self.device.gpu, self.roof.evidence
        words = str(ev["probe"]).split()
        nbytes = min(int(ev.get("array_bytes") or 1 << 62), array_bytes(gpu, False, 3))
        if words[0] != "stream":  # a library's copy / add set the roof: sample it
            lib, op = words
            self.launch = gpu.library_stream(lib, op, nbytes)
            self.work = float(stream_bytes(op, nbytes // 4, 4))
            return
        kernel, prec = words[1], words[2]
        suf, isz = STREAM_DTYPES[prec]
        n = nbytes // isz
        a, b, c = gpu.random(n, suf), gpu.random(n, suf), gpu.random(n, suf)
        s = np.float32(0.5) if isz == 4 else np.float64(0.5)
        args = stream_args(kernel, a, b, c, gpu.empty(1, suf), s, n)
        k = gpu.kernel(self.module("stream.cu"), f"stream_{kernel}_{suf}")
        cfg = ev["config"]
        grid, block = (int(cfg["grid"]),), (int(cfg["block"]),)
        self.launch = lambda: k(grid, block, args)
        self.work = float(stream_bytes(kernel, n, isz))


class L2Pair(GpuSampler):
    def start(self) -> None:
        gpu, ev = self.device.gpu, self.roof.evidence
        cfg = ev["config"]
        la = L2Launch(str(ev["form"]), int(cfg["block"]), int(cfg["chunk_bytes"]) // 16,
                      int(cfg["chunks"]), int(cfg["grid"]))
        words = la.chunk_vecs * la.nchunks * 4  # one buffer's 32-bit words
        src = gpu.random(words, "u32")
        dst = gpu.empty(words, "u32") if la.form == "copy" else None
        args = l2_args(la, src, dst, gpu.empty(1, "u32"))
        k = gpu.kernel(self.module("cache.cu"), str(ev["probe"]))
        grid, block = (la.grid,), (la.block,)
        self.launch = lambda: k(grid, block, args)
        self.work = float(la.bytes_per_launch)

    def __call__(self) -> float:
        if self.launch is None:
            self.start()
        assert self.launch is not None
        # The case's data evicted the working set: one launch brings it back (its first pass
        # would come from HBM), then the timed one streams from L2 as the roof's samples did.
        self.launch()
        return super().__call__()


class FmaPair(GpuSampler):
    def start(self) -> None:
        gpu, ev, prec = self.device.gpu, self.roof.evidence, str(self.roof.precision)
        cfg = ev["config"]
        grid, block = int(cfg["grid"]), int(cfg["block"])
        iters = int(ev["iters"])
        # The roof's launch shortened to FMA_PAIR_S at the roof's rate; never lengthened
        per_launch = float(ev["flops_per_launch"]) / self.roof.value
        it = np.int32(scale_iters(iters, per_launch, FMA_PAIR_S, hi=iters))
        a, b, out = fma_args(gpu, prec, grid * block)
        k = gpu.kernel(self.module("fma.cu"), FMA_KERNELS[prec])
        self.launch = lambda: k((grid,), (block,), (a, b, it, out))
        self.work = fma_flops(grid * block, int(it), prec in ("fp16", "bf16"))


Sampler = Callable[[PairDevice], GpuSampler]


def sampler_of(roof: Roof) -> tuple[str, Sampler] | None:
    """The pair key (``kind:key:probe``, as ``Timing.roof_probe`` stores it) and the sampler
    of ``roof``, or None: a roof these probes did not measure, or whose evidence lacks the
    launch it was measured at (a file of another version)."""
    ev = roof.evidence
    probe = str(ev.get("probe", ""))
    got = ev.get("config")
    cfg: dict[str, Any] = got if isinstance(got, dict) else {}
    if roof.source != "measured":
        return None
    if roof.kind == "memory" and roof.level == "dram":
        words = probe.split()
        stream = (len(words) == 3 and words[0] == "stream" and words[1] in STREAM_RW
                  and words[2] in STREAM_DTYPES and {"grid", "block"} <= set(cfg))
        library = len(words) == 2 and tuple(words) in LIBRARY_STREAMS
        if stream or library:
            return f"memory:dram:{probe}", lambda d: HbmPair(roof, d)
        return None
    if roof.kind == "memory" and roof.level == "l2":
        known = {l2_kernel(f, lo, i) for f in L2_FORMS for lo in L2_LOADS for i in L2_ILPS}
        if (probe in known and ev.get("form") in L2_FORMS
                and {"block", "grid", "chunk_bytes", "chunks"} <= set(cfg)):
            return f"memory:l2:{probe}", lambda d: L2Pair(roof, d)
        return None
    prec = roof.precision
    if (roof.kind == "compute" and prec in FMA_KERNELS and probe == FMA_KERNELS[prec]
            and {"grid", "block"} <= set(cfg) and ev.get("iters")
            and ev.get("flops_per_launch") and roof.value > 0):
        return f"compute:{prec}:{probe}", lambda d: FmaPair(roof, d)
    return None
