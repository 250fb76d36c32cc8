"""The GPU the probes run on, seen through a small adapter, and the facts it reports.

``Gpu`` is the protocol the probes use (compile, launch, allocate, time one trial, read the
clocks); ``CupyGpu`` is the real device through CuPy (imported lazily, inside it), cuBLAS and,
when importable, PyTorch; the tests pass a fake. ``device_facts`` gathers name, SM count,
compute capability, L2 and memory sizes, NVML clocks.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from typing import Any, Protocol

import numpy as np

from . import nvml

MiB = 1 << 20
GiB = 1 << 30


class Timing(Protocol):  # what time_fn returns (bench.measure.timer.Timing), structurally
    samples: list[float]

    def summary(self) -> dict[str, Any]: ...


# time_fn(fn) times one launch callable in full; time_fn(fn, search=True) with the short timer
# of configuration searches and curve points.
TimeFn = Callable[..., Any]


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


def device_facts(gpu: Gpu) -> dict[str, Any]:
    """NVML's facts of the device (name, clocks, memory) with those CUDA reports."""
    idx = getattr(gpu, "nvml_index", None)
    facts = nvml.device_facts(idx if idx is not None else gpu.index)
    facts.update({"sm_count": gpu.sm_count, "compute_capability": f"{gpu.cc[0]}.{gpu.cc[1]}",
                  "l2_bytes": gpu.l2_bytes, "free_bytes_at_start": gpu.free_bytes,
                  "cuda_name": gpu.name})
    if not facts.get("name"):
        facts["name"] = gpu.name
    return facts
