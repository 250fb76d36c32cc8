"""Measure a GPU's real roofs: HBM/L2/shared-memory bandwidth, CUDA-core FMA peaks, tensor-core
ceilings (library GEMMs, hand-written mma.sync and, on Hopper, hand-written wgmma), and the
empirical roofline curve (ERT).

Dependencies point one way: this module never imports roofbench.bench. It takes an injected
``time_fn(fn) -> Timing`` (the backend's CUDA-event timer) and talks to the GPU through a small
adapter (``CupyGpu``; CuPy is imported lazily, inside it), so the orchestration and the roof
extraction run in the tests with a fake GPU and a fake timer. The pure functions
(``pick_best_config``, ``roof_from_samples``, ``knee_from_curve``, ...) hold the arithmetic.

A probe that fails (precision unsupported on this arch, out of memory, library missing) is
recorded with its reason in ``RoofSet.failed_probes``; the others are still measured.
"""

from __future__ import annotations

import contextlib
import math
import statistics
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Protocol

import numpy as np

from .. import datasheet
from ..model import DatasheetMatch, ProbeFailure, Roof, RoofSet
from . import nvml

CUDA_DIR = Path(__file__).with_name("cuda")
MiB = 1 << 20
GiB = 1 << 30

# ---- what the probes move and compute (pure) ------------------------------------------------

# STREAM kernels: (arrays read, arrays written) per element, STREAM's byte convention.
STREAM_RW: dict[str, tuple[int, int]] = {
    "copy": (1, 1), "scale": (1, 1), "add": (2, 1), "triad": (2, 1), "read": (1, 0),
    "fill": (0, 1),
}
STREAM_DTYPES = {"fp32": ("f32", 4), "fp64": ("f64", 8)}

# ERT: FMAs per element (must match the ERT_KERNELS ladder in cuda/ert.cu).
ERT_FMAS = (0, 1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024)
# precision -> (kernel suffix, bytes per element, elements per 32-bit word or 1)
ERT_PRECISIONS = {"fp64": ("fp64", 8), "fp32": ("fp32", 4), "fp16": ("fp16x2", 2),
                  "bf16": ("bf16x2", 2)}

# CUDA-core FMA probe constants (cuda/fma.cu). FP32 and the packed FP16x2/BF16x2 forms issue
# one warp instruction per clock per SM sub-partition at peak, so the loop's own 3 instructions
# cost 3 / (UNROLL x CHAINS) of the peak: 2.3% at 16 x 8 (the H200 measured 0.937-0.958 of
# the clock peak), 0.6% at 64 x 8.
FMA_CHAINS, FMA_UNROLL = 8, 64
FMA_KERNELS = {"fp64": "fma_fp64", "fp32": "fma_fp32", "fp16": "fma_fp16x2",
               "bf16": "fma_bf16x2"}

# mma.sync probes (cuda/mma.cu): precision -> (kernel, K of the m16n8kK shape, min cc).
MMA_ACC = 8
MMA_KERNELS = {"fp16_tc": ("mma_fp16", 16, (8, 0)), "bf16_tc": ("mma_bf16", 16, (8, 0)),
               "tf32_tc": ("mma_tf32", 8, (8, 0)), "fp8_tc": ("mma_fp8e4m3", 32, (8, 9))}
SMEM_UNROLL, SMEM_VEC_BYTES = 16, 16
# wgmma probes (cuda/wgmma.cu, sm_90a only): precision -> (kernel, K of the m64n256kK shape).
# They replace the FP8 mma.sync probe on Hopper, which has no native FP8 mma.sync.
WGMMA_KERNELS = {"fp16_tc": ("wgmma_fp16", 16), "bf16_tc": ("wgmma_bf16", 16),
                 "fp8_tc": ("wgmma_fp8e4m3", 32)}
WGMMA_STEPS, WGMMA_IN_WORDS, WGMMA_ARCH = 4, (64 * 128 + 256 * 128) // 4, "sm_90a"
# Library GEMMs tried per tensor precision (the roof is the best sustained of them).
GEMM_LIBS = {"fp64_tc": ("cupy", "torch"), "tf32_tc": ("cupy", "torch"),
             "fp16_tc": ("cupy", "torch"), "bf16_tc": ("torch",), "fp8_tc": ("torch",)}
# Library bandwidth references (in the same process as the probes): (library, kernel).
LIBRARY_STREAMS = (("cupy", "copy"), ("cupy", "add"), ("torch", "copy"), ("torch", "add"),
                   ("torch", "triad"))
SUSTAIN_WINDOW = 5  # consecutive samples a "sustained" rate must hold

LABEL = {"fp64": "FP64", "fp32": "FP32", "fp16": "FP16x2", "bf16": "BF16x2",
         "fp64_tc": "FP64 tensor", "tf32_tc": "TF32 tensor", "fp16_tc": "FP16 tensor",
         "bf16_tc": "BF16 tensor", "fp8_tc": "FP8 tensor"}


def stream_bytes(kernel: str, n: int, itemsize: int) -> int:
    r, w = STREAM_RW[kernel]
    return (r + w) * n * itemsize


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


def kernel_names(cc: tuple[int, int]) -> dict[str, list[str]]:
    """Every kernel the probes launch on a device of compute capability ``cc``, per source
    file (the tests check that each one exists in the compiled cubin)."""
    names = {
        "stream.cu": [f"stream_{k}_{suf}" for suf, _ in STREAM_DTYPES.values() for k in STREAM_RW],
        "cache.cu": ["l2_read", "smem_read"],
        "fma.cu": [k for p, k in FMA_KERNELS.items() if p != "bf16" or cc >= (8, 0)],
        "mma.cu": [k for p, (k, _, mcc) in MMA_KERNELS.items()
                   if cc >= mcc and not (p == "fp8_tc" and cc == (9, 0))],
        # built for sm_90a through cuda-python; the plain archs hold trapping stubs
        "wgmma.cu": [k for k, _ in WGMMA_KERNELS.values()] if cc == (9, 0) else [],
        "ert.cu": [f"ert_{suf}_k{k}" for p, (suf, _) in ERT_PRECISIONS.items()
                   if p != "bf16" or cc >= (8, 0) for k in ERT_FMAS],
    }
    return names


def bandwidth_configs(quick: bool) -> list[tuple[int, int]]:
    """(block size, blocks per SM) candidates for the bandwidth probes. Grid-stride kernels:
    more blocks than fit at once run as later waves."""
    if quick:
        return [(256, 8), (512, 4), (1024, 2), (256, 4), (512, 2), (1024, 1)]
    return [(b, tps // b) for b in (128, 256, 512, 1024) for tps in (1024, 2048, 4096)]


def scale_iters(iters: int, seconds: float, target_s: float, lo: int = 1,
                hi: int = 1 << 24) -> int:
    """Iterations that make a compute probe last about target_s, from one trial run."""
    if seconds <= 0 or not math.isfinite(seconds):
        return min(hi, iters * 16)
    return int(min(hi, max(lo, round(iters * target_s / seconds))))


@dataclass
class ConfigResult:
    """One launch configuration of a bandwidth probe and what it achieved."""

    block: int
    blocks_per_sm: int
    grid: int
    median_s: float
    rate: float  # bytes/s (or FLOP/s) at the median
    cv: float
    n: int  # samples

    def config(self) -> dict[str, int]:
        return {"block": self.block, "blocks_per_sm": self.blocks_per_sm, "grid": self.grid}


def pick_best_config(results: Sequence[ConfigResult], tie: float = 0.005) -> ConfigResult:
    """The fastest configuration; within ``tie`` of it, the steadier (lower CV), then the one
    with fewer threads (less to schedule for the same rate)."""
    if not results:
        raise ValueError("no configuration was measured")
    top = max(r.rate for r in results)
    near = [r for r in results if r.rate >= top * (1 - tie)]
    return min(near, key=lambda r: (r.cv, r.grid * r.block))


def roof_from_samples(samples: Sequence[float], work: float) -> tuple[float, dict[str, Any]]:
    """Rate (work per second) at the median sample, with the spread the evidence keeps.

    The median, not the best sample, is the roof: a ceiling this device sustains, not one
    lucky launch. The best-sample rate is recorded beside it.
    """
    s = [float(x) for x in samples if x and x > 0 and math.isfinite(x)]
    if not s or work <= 0:
        raise ValueError("no valid samples")
    med = statistics.median(s)
    cv = statistics.stdev(s) / statistics.fmean(s) if len(s) > 1 else 0.0
    return work / med, {"median_s": med, "min_s": min(s), "max_s": max(s), "n": len(s),
                        "cv": cv, "rate_at_best_sample": work / min(s),
                        "rate_sustained": sustained_rate(s, work)}


def sustained_rate(samples: Sequence[float], work: float,
                   window: int = SUSTAIN_WINDOW) -> float:
    """The best rate the device held over ``window`` consecutive samples: the highest median of
    any run of ``window`` samples (all of them when fewer). Not one lucky launch (a median
    covers it), not the median of a whole series that a noisy neighbour or a clock dip drags
    down: what the hardware demonstrably sustains, the figure a roof must not fall below."""
    s = [float(x) for x in samples]
    if not s or work <= 0 or any(not (x > 0 and math.isfinite(x)) for x in s):
        raise ValueError("no valid samples")
    w = min(window, len(s))
    return max(work / statistics.median(s[i:i + w]) for i in range(len(s) - w + 1))


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


# ---- the GPU seen through a small adapter ---------------------------------------------------

class Timing(Protocol):  # what time_fn returns (bench.timer.Timing), structurally
    samples: list[float]

    def summary(self) -> dict[str, Any]: ...


TimeFn = Callable[[Callable[[], None]], Any]


class ProbeUnavailable(RuntimeError):
    """This probe cannot run here (arch, library); the reason is recorded, not raised."""


class Gpu(Protocol):
    name: str
    sm_count: int
    cc: tuple[int, int]
    l2_bytes: int
    free_bytes: int
    index: int

    def compile(self, source: str, name: str) -> Any: ...
    def compile_native(self, source: str, name: str, arch: str) -> Any: ...
    def kernel(self, module: Any, name: str) -> Callable[..., None]: ...
    def random(self, n: int, kind: str) -> Any: ...
    def empty(self, n: int, kind: str) -> Any: ...
    def upload(self, arr: np.ndarray) -> Any: ...
    def to_host(self, arr: Any, count: int) -> np.ndarray | None: ...
    def memcpy(self, dst: Any, src: Any, nbytes: int) -> None: ...
    def trial_seconds(self, fn: Callable[[], None]) -> float: ...
    def busy_snapshot(self, fn: Callable[[], None], repeats: int) -> dict[str, Any]: ...
    def library_gemm(self, precision: str, n: int, lib: str
                     ) -> tuple[Callable[[], None], dict]: ...
    def library_stream(self, lib: str, op: str, nbytes: int) -> Callable[[], None]: ...
    def release(self) -> None: ...


class CupyGpu:
    """The real device through CuPy (NVRTC RawModule, cuBLAS) and, when importable, PyTorch."""

    def __init__(self, index: int = 0) -> None:
        import cupy as cp  # lazy: only a machine with a GPU gets here

        self.cp = cp
        self.index = index
        self.dev = cp.cuda.Device(index)
        self.dev.use()
        p = cp.cuda.runtime.getDeviceProperties(index)
        name = p["name"]
        self.name = name.decode() if isinstance(name, bytes) else str(name)
        self.sm_count = int(p["multiProcessorCount"])
        self.cc = (int(p["major"]), int(p["minor"]))
        self.l2_bytes = int(p.get("l2CacheSize") or 0)
        self.free_bytes = int(cp.cuda.runtime.memGetInfo()[0])
        self.nvml_index = _nvml_index_for(cp, index)
        self._torch: Any = None

    _KINDS = {"f32": "float32", "f64": "float64", "u32": "uint32"}

    def compile(self, source: str, name: str) -> Any:
        mod = self.cp.RawModule(code=source, options=("-std=c++17",), backend="nvrtc")
        mod.compile()  # compile now, so a failure is this probe's, not the first launch's
        return mod

    def compile_native(self, source: str, name: str, arch: str) -> Any:
        """Build for an arch-specific target (sm_90a) and load through cuda-python: CuPy
        compiles for the plain arch only (roofs/probes/cuda_driver.py says why)."""
        from . import cuda_driver as cd

        why = cd.driver_unavailable()
        if why:
            raise ProbeUnavailable(why)
        return _DriverModule(cd.load_module(cd.compile_cubin(source, name, arch,
                                                             ("-std=c++17",))))

    def kernel(self, module: Any, name: str) -> Callable[..., None]:
        if isinstance(module, _DriverModule):
            return module.launcher(name, self.cp)
        return module.get_function(name)

    def empty(self, n: int, kind: str) -> Any:
        return self.cp.empty(n, dtype=self._KINDS[kind])

    def random(self, n: int, kind: str) -> Any:
        """Fresh random data in [0.25, 0.75) (never zeros); packed 16-bit kinds as uint32."""
        cp = self.cp
        if kind in ("f32", "f64"):
            return cp.random.random(n, dtype=self._KINDS[kind]) * 0.5 + 0.25
        x = cp.random.random(2 * n, dtype=cp.float32) * 0.5 + 0.25
        if kind == "f16x2":
            return x.astype(cp.float16).view(cp.uint32)
        if kind == "bf16x2":
            hi = x.view(cp.uint32) >> 16
            return (hi[0::2] | (hi[1::2] << 16)).astype(cp.uint32)
        if kind == "u32":
            return cp.random.randint(0, 2**31, size=n, dtype=cp.int64).astype(cp.uint32)
        raise ValueError(kind)

    def upload(self, arr: np.ndarray) -> Any:
        return self.cp.asarray(arr)

    def to_host(self, arr: Any, count: int) -> np.ndarray | None:
        return self.cp.asnumpy(arr[:count])

    def memcpy(self, dst: Any, src: Any, nbytes: int) -> None:
        dst.data.copy_from_device_async(src.data, nbytes)

    def trial_seconds(self, fn: Callable[[], None]) -> float:
        """One run timed with events: only to size a probe, never as a result."""
        cp = self.cp
        fn()  # first launch loads the module
        s, e = cp.cuda.Event(), cp.cuda.Event()
        s.record()
        fn()
        e.record()
        e.synchronize()
        return cp.cuda.get_elapsed_time(s, e) / 1e3

    def busy_snapshot(self, fn: Callable[[], None], repeats: int) -> dict[str, Any]:
        """NVML clocks read while the GPU runs ``repeats`` launches of the probe."""
        for _ in range(repeats):
            fn()
        time.sleep(0.02)  # let the clocks settle under load before reading them
        snap = nvml.snapshot(self.nvml_index) if self.nvml_index is not None else {}
        self.cp.cuda.get_current_stream().synchronize()
        return snap

    def _torch_mod(self) -> Any:
        if self._torch is None:
            try:
                import torch
            except Exception as e:
                raise ProbeUnavailable(f"PyTorch is not importable ({type(e).__name__})") \
                    from None
            if not torch.cuda.is_available():
                raise ProbeUnavailable("PyTorch has no CUDA")
            self._torch = torch
        return self._torch

    def _on_cupy_stream(self, fn: Callable[[], None]) -> Callable[[], None]:
        """Run a PyTorch op on CuPy's stream current at call time, where time_fn records its
        CUDA events (the backend may time on a stream of its own)."""
        torch = self._torch_mod()
        dev = torch.device("cuda", self.index)
        streams: dict[int, Any] = {}

        def run() -> None:
            ptr = self.cp.cuda.get_current_stream().ptr
            if not ptr:  # both on the legacy default stream
                fn()
                return
            if ptr not in streams:
                streams[ptr] = torch.cuda.ExternalStream(ptr, device=dev)
            with torch.cuda.stream(streams[ptr]):
                fn()
        return run

    def library_stream(self, lib: str, op: str, nbytes: int) -> Callable[[], None]:
        """A library's own copy / add / triad over FP32 arrays of ``nbytes`` each (bytes moved
        as STREAM counts them: stream_bytes(op, ...))."""
        n = nbytes // 4
        if lib == "cupy":
            cp = self.cp
            a, b, c = self.random(n, "f32"), self.random(n, "f32"), self.cp.empty(n, cp.float32)
            if op == "copy":
                return lambda: self.memcpy(c, a, a.nbytes)
            if op == "add":
                return lambda: cp.add(a, b, out=c)
            raise ProbeUnavailable(f"no CuPy {op} reference (one kernel, no temporaries)")
        if lib == "torch":
            torch = self._torch_mod()
            dev = torch.device("cuda", self.index)
            a = torch.rand(n, device=dev, dtype=torch.float32) * 0.5 + 0.25
            b = torch.rand(n, device=dev, dtype=torch.float32) * 0.5 + 0.25
            c = torch.empty_like(a)
            fns = {"copy": lambda: c.copy_(a), "add": lambda: torch.add(a, b, out=c),
                   "triad": lambda: torch.add(a, b, alpha=0.5, out=c)}  # c = a + 0.5 b
            return self._on_cupy_stream(fns[op])
        raise ValueError(lib)

    def library_gemm(self, precision: str, n: int, lib: str = "cupy"
                     ) -> tuple[Callable[[], None], dict]:
        """A square n GEMM of one precision through one library; (launch, what it is)."""
        cp = self.cp
        if lib == "torch":
            return self._torch_gemm(precision, n)
        if precision not in ("fp64_tc", "tf32_tc", "fp16_tc"):
            raise ProbeUnavailable(f"CuPy has no {precision} GEMM (no bf16/fp8 arrays)")
        if precision in ("fp64_tc", "tf32_tc", "fp16_tc"):
            dt = {"fp64_tc": cp.float64, "tf32_tc": cp.float32, "fp16_tc": cp.float16}[precision]
            a = cp.random.standard_normal((n, n), dtype=cp.float32).astype(dt)
            b = cp.random.standard_normal((n, n), dtype=cp.float32).astype(dt)
            c = cp.empty((n, n), dtype=dt)
            meta = {"library": "cupy.matmul (cuBLAS)", "dtype": str(np.dtype(dt))}
            if precision != "tf32_tc":
                return (lambda: cp.matmul(a, b, out=c)), meta
            from cupy._core import _routines_linalg as lin  # TF32 is CuPy's compute-type knob

            tf32 = getattr(lin, "COMPUTE_TYPE_TF32", 7)
            meta["compute_type"] = "COMPUTE_TYPE_TF32"

            def tf32_mm() -> None:
                old = lin.get_compute_type(np.float32)
                lin.set_compute_type(np.float32, tf32)
                try:
                    cp.matmul(a, b, out=c)
                finally:
                    lin.set_compute_type(np.float32, old)
            return tf32_mm, meta
        raise ProbeUnavailable(f"no CuPy GEMM for {precision}")

    def _torch_gemm(self, precision: str, n: int) -> tuple[Callable[[], None], dict]:
        torch = self._torch_mod()
        dev = torch.device("cuda", self.index)
        plain = {"fp64_tc": torch.float64, "tf32_tc": torch.float32, "fp16_tc": torch.float16}
        if precision in plain:
            dt = plain[precision]
            a = torch.randn(n, n, device=dev, dtype=dt)
            b = torch.randn(n, n, device=dev, dtype=dt)
            c = torch.empty(n, n, device=dev, dtype=dt)
            tf32 = precision == "tf32_tc"

            def mm() -> None:
                old = torch.backends.cuda.matmul.allow_tf32
                torch.backends.cuda.matmul.allow_tf32 = tf32
                try:
                    torch.matmul(a, b, out=c)
                finally:
                    torch.backends.cuda.matmul.allow_tf32 = old
            return self._on_cupy_stream(mm), {
                "library": f"torch.matmul {torch.__version__} (cuBLAS)", "dtype": str(dt),
                **({"allow_tf32": True} if tf32 else {})}
        if precision == "bf16_tc":
            a = torch.randn(n, n, device=dev, dtype=torch.bfloat16)
            b = torch.randn(n, n, device=dev, dtype=torch.bfloat16)
            c = torch.empty(n, n, device=dev, dtype=torch.bfloat16)
            return self._on_cupy_stream(lambda: torch.matmul(a, b, out=c)), {
                "library": f"torch.matmul {torch.__version__} (cuBLAS)", "dtype": "bfloat16"}
        if precision == "fp8_tc":
            if not hasattr(torch, "_scaled_mm") or not hasattr(torch, "float8_e4m3fn"):
                raise ProbeUnavailable(f"torch {torch.__version__} has no _scaled_mm / FP8")
            a = torch.randn(n, n, device=dev).to(torch.float8_e4m3fn)
            b = torch.randn(n, n, device=dev).to(torch.float8_e4m3fn).t()  # column-major B
            one = torch.tensor(1.0, device=dev)

            def mm() -> None:
                torch._scaled_mm(a, b, scale_a=one, scale_b=one, out_dtype=torch.bfloat16,
                                 use_fast_accum=True)
            mm()  # raises here (not inside the timer) when this arch/build has no FP8 GEMM
            return self._on_cupy_stream(mm), {
                "library": f"torch._scaled_mm {torch.__version__} (cuBLASLt)",
                "dtype": "float8_e4m3fn", "out_dtype": "bfloat16", "use_fast_accum": True}
        raise ProbeUnavailable(f"no library GEMM for {precision}")

    def release(self) -> None:
        self.cp.get_default_memory_pool().free_all_blocks()
        if self._torch is not None:
            self._torch.cuda.empty_cache()


class _DriverModule:
    """A cubin loaded through cuda-python; its kernels launch on CuPy's current stream with the
    (grid, block, args) call of CuPy's RawKernel (args: CuPy arrays, NumPy scalars)."""

    def __init__(self, module: Any) -> None:
        self.module = module

    def launcher(self, name: str, cp: Any) -> Callable[..., None]:
        from . import cuda_driver as cd

        fn = cd.DriverFunction(self.module, name)

        def launch(grid: Sequence[int], block: Sequence[int], args: Sequence[Any]) -> None:
            params = cd.KernelParams([cd.arg_bytes(a) for a in args])
            fn.launch(grid, block, 0, cp.cuda.get_current_stream().ptr, params)
        return launch


def _nvml_index_for(cp: Any, index: int) -> int | None:
    """NVML numbers devices by PCI order, CUDA may not (CUDA_VISIBLE_DEVICES): match bus ids."""
    if not nvml.available():
        return None
    try:
        bus = cp.cuda.runtime.deviceGetPCIBusId(index).lower()
    except Exception:
        return index
    for i in range(nvml.device_count()):
        b = (nvml.device_facts(i).get("pci_bus_id") or "").lower()
        if b and (b.endswith(bus) or bus.endswith(b[-12:])):
            return i
    return index


# ---- the probes -----------------------------------------------------------------------------

@dataclass
class _Run:
    """State shared by the probes of one calibration."""

    gpu: Gpu
    time_fn: TimeFn
    quick: bool
    progress: Callable[[str], None]
    rs: RoofSet
    failed: list[dict[str, str]] = field(default_factory=list)
    rows: list[dict[str, Any]] = field(default_factory=list)  # every probe's figure
    modules: dict[str, Any] = field(default_factory=dict)
    deadline: float | None = None  # perf_counter() after which no further probe starts
    budget_s: float | None = None

    @property
    def cc_str(self) -> str:
        return f"{self.gpu.cc[0]}.{self.gpu.cc[1]}"

    def module(self, fname: str, arch: str | None = None) -> Any:
        """A probe source compiled once: by CuPy for the device, or for an arch-specific
        target (``arch``, e.g. sm_90a) through cuda-python."""
        key = f"{fname}@{arch}" if arch else fname
        if key not in self.modules:
            src = (CUDA_DIR / fname).read_text()
            self.modules[key] = (self.gpu.compile_native(src, fname, arch) if arch
                                 else self.gpu.compile(src, fname))
        return self.modules[key]

    def attempt(self, probe: str, fn: Callable[[], None]) -> None:
        """Run one probe; a failure is recorded with its reason and the run goes on. Past the
        calibration's time budget a probe is not started, and says so."""
        t0 = time.perf_counter()
        if self.deadline is not None and t0 > self.deadline:
            self.failed.append({"probe": probe, "reason": f"not run: the calibration budget of "
                                f"{self.budget_s:.0f} s was spent by the probes before it"})
            return
        try:
            fn()
        except ProbeUnavailable as e:
            self.failed.append({"probe": probe, "reason": str(e)})
        except Exception as e:  # OOM, compile error, driver error: this probe only
            msg = str(e).strip().splitlines()[0] if str(e).strip() else ""
            self.failed.append({"probe": probe, "reason": f"{type(e).__name__}: {msg}"})
        finally:
            with contextlib.suppress(Exception):  # freeing must not hide the probe's result
                self.gpu.release()
            self.rs.info.setdefault("probe_seconds", {})[probe] = round(
                time.perf_counter() - t0, 3)

    def timed(self, fn: Callable[[], None], work: float) -> tuple[float, dict[str, Any]]:
        t = self.time_fn(fn)
        value, stats = roof_from_samples(t.samples, work)
        summary = t.summary() if hasattr(t, "summary") else {}
        stats["stopped_by"] = summary.get("stopped_by")
        stats["flags"] = summary.get("flags", [])
        stats["samples_s"] = [float(x) for x in t.samples]
        return value, stats


def _array_bytes(gpu: Gpu, quick: bool, arrays: int) -> int:
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


def _stream(run: _Run) -> dict[str, Any]:
    """STREAM kernels FP32/FP64, config search; returns the per-kernel results."""
    gpu = run.gpu
    mod = run.module("stream.cu")
    nbytes = _array_bytes(gpu, run.quick, 3)
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


def _library_streams(run: _Run, nbytes: int) -> dict[str, Any]:
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


def _hbm(run: _Run) -> None:
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


def _l2(run: _Run) -> None:
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


def _smem(run: _Run) -> None:
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


def _fma(run: _Run, prec: str) -> None:
    gpu = run.gpu
    if prec == "bf16" and gpu.cc < (8, 0):
        raise ProbeUnavailable(f"BF16 HFMA2 needs sm_80+, this is sm_{gpu.cc[0]}{gpu.cc[1]}")
    k = gpu.kernel(run.module("fma.cu"), FMA_KERNELS[prec])
    block, bps = 256, 8
    grid = gpu.sm_count * bps
    threads = grid * block
    packed = prec in ("fp16", "bf16")
    if packed:
        a, b, out = np.uint32(pack2(0.999, prec)), np.uint32(pack2(0.001, prec)), \
            gpu.empty(threads, "u32")
    elif prec == "fp32":
        a, b, out = np.float32(0.999), np.float32(0.001), gpu.empty(threads, "f32")
    else:
        a, b, out = np.float64(0.999), np.float64(0.001), gpu.empty(threads, "f64")

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


def _mma(run: _Run, prec: str) -> None:
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


def _gemm(run: _Run, prec: str) -> None:
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


def _wgmma_words(prec: str, rng: np.random.Generator) -> np.ndarray:
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


def _wgmma(run: _Run, prec: str) -> None:
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
    inp = gpu.upload(np.ascontiguousarray(_wgmma_words(prec, np.random.default_rng(7))))
    grid = gpu.sm_count  # one block per SM (about 154 registers x 128 per warpgroup)
    tried: list[ConfigResult] = []
    by: dict[int, tuple[int, dict[str, Any]]] = {}
    for block in (256, 384):  # 2 or 3 warpgroups per SM
        out = gpu.empty(grid * block, "f32")

        def launch(it: int, block: int = block, out: Any = out) -> Callable[[], None]:
            return lambda: k((grid,), (block,), (inp, np.int32(it), out))
        iters = scale_iters(64, gpu.trial_seconds(launch(64)), 0.005 if run.quick else 0.02,
                            hi=1 << 22)
        run.progress(f"wgmma {prec} {block // 128} warpgroups")
        flops = wgmma_flops(grid, block, iters, kdim)
        median_rate, stats = run.timed(launch(iters), flops)
        tried.append(ConfigResult(block, 1, grid, stats["median_s"], stats["rate_sustained"],
                                  stats["cv"], stats["n"]))
        by[block] = (iters, stats)
    best = pick_best_config(tried)
    iters, stats = by[best.block]
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


def _ert(run: _Run, prec: str) -> None:
    gpu = run.gpu
    if prec == "bf16" and gpu.cc < (8, 0):
        raise ProbeUnavailable("BF16 HFMA2 needs sm_80+")
    suf, esz = ERT_PRECISIONS[prec]
    mod = run.module("ert.cu")
    nbytes = _array_bytes(gpu, run.quick, 2)
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
        bw, stats = run.timed(lambda k=k: k((grid,), (block,), (inp, out, np.int64(n), c)),
                              bytes_)
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


def _facts(gpu: Gpu) -> dict[str, Any]:
    idx = getattr(gpu, "nvml_index", None)
    facts = nvml.device_facts(idx if idx is not None else gpu.index)
    facts.update({"sm_count": gpu.sm_count, "compute_capability": f"{gpu.cc[0]}.{gpu.cc[1]}",
                  "l2_bytes": gpu.l2_bytes, "free_bytes_at_start": gpu.free_bytes,
                  "cuda_name": gpu.name})
    if not facts.get("name"):
        facts["name"] = gpu.name
    return facts


# Wall-clock budget of one calibration: a probe that would start later is recorded as not run
# (the issue-8 target for a full calibration is 60 s on an H200; the first full one there was
# killed at 90 s). The probes run in order of what the roofline needs most.
CALIBRATION_BUDGET_S = {False: 55.0, True: 25.0}  # by quick


def measure_gpu_roofs(time_fn: TimeFn, quick: bool = False,
                      progress: Callable[[str], None] | None = None, device: int = 0,
                      gpu: Gpu | None = None, budget_s: float | None = None) -> RoofSet:
    """Run every GPU probe and return measured roofs beside datasheet and theoretical ones.

    ``time_fn(fn)`` times one launch callable and returns a Timing (raw samples kept). ``gpu``
    defaults to CuPy on ``device``; tests pass a fake. ``budget_s`` (default
    ``CALIBRATION_BUDGET_S``) bounds the wall time: HBM, the CUDA-core FMA and the library
    GEMM roofs come first; L2, shared memory, hand-written MMA and ERT curves after.
    """
    t_start = time.perf_counter()
    say = progress or (lambda _msg: None)
    gpu = gpu if gpu is not None else CupyGpu(device)
    facts = _facts(gpu)
    rs = RoofSet(device=gpu.name, info={"backend_probe": "roofbench.roofs.probes.gpu",
                                        "quick": quick, "device_facts": facts})
    budget = CALIBRATION_BUDGET_S[bool(quick)] if budget_s is None else budget_s
    run = _Run(gpu=gpu, time_fn=time_fn, quick=quick, progress=say, rs=rs,
               deadline=t_start + budget, budget_s=budget)
    run.attempt("hbm", lambda: _hbm(run))
    for prec in ("fp64", "fp32", "fp16", "bf16"):
        run.attempt(f"fma_{prec}", lambda p=prec: _fma(run, p))
    for prec in ("fp64_tc", "tf32_tc", "fp16_tc", "bf16_tc", "fp8_tc"):
        run.attempt(f"gemm_{prec}", lambda p=prec: _gemm(run, p))
    run.attempt("l2", lambda: _l2(run))
    run.attempt("smem", lambda: _smem(run))
    for prec in MMA_KERNELS:
        if prec == "fp8_tc" and gpu.cc == (9, 0):
            continue  # Hopper has no native FP8 mma.sync: the wgmma FP8 probe replaces it
        run.attempt(f"mma_{prec}", lambda p=prec: _mma(run, p))
    if gpu.cc == (9, 0):  # the wgmma probes need sm_90a exactly
        for prec in WGMMA_KERNELS:
            run.attempt(f"wgmma_{prec}", lambda p=prec: _wgmma(run, p))
    for prec in ERT_PRECISIONS:
        run.attempt(f"ert_{prec}", lambda p=prec: _ert(run, p))

    # Datasheet leads and the figures derived from the device's own facts, beside the measured.
    ds_roofs, why = datasheet.datasheet_roofs(facts.get("name") or gpu.name, gpu.sm_count,
                                              facts.get("memory_total_bytes"))
    for r in ds_roofs + datasheet.theoretical_roofs(facts):
        rs.add(r)
    m = datasheet.match(facts.get("name") or gpu.name, gpu.sm_count,
                        facts.get("memory_total_bytes"))
    rs.datasheet = DatasheetMatch(entry=m.spec.key if m.spec else None, reason=why)
    rs.failed_probes = [ProbeFailure(f["probe"], f["reason"]) for f in run.failed]
    rs.info["probes"] = run.rows
    rs.elapsed_s = time.perf_counter() - t_start
    rs.info["ceilings_note"] = ("tensor-core roofs come in two kinds: 'library' (cuBLAS through "
                                "CuPy/PyTorch: wgmma on Hopper) and 'mma.sync' (hand-written "
                                "legacy warp MMA); evidence.ceiling says which")
    return rs
