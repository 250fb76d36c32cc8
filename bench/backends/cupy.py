"""The CuPy backend (``--backend cuda``): the CUDA C sources compiled by NVRTC for the device's
arch through ``cupy.RawModule``, launched on one non-default stream, timed with CUDA events.

CuPy is imported only when this backend is asked for; without CuPy or without a device,
``unavailable_reason()`` says so in one line. Buffers live on the device in their storage type
(bf16/fp8 as raw 16/8-bit words, see gpu_common). The library GEMM baseline is
``cupy.matmul`` (cuBLAS) on the same stream; the attention baseline is torch's
scaled_dot_product_attention on DLPack views, when torch is importable.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from functools import cache
from typing import Any

import numpy as np
from roofbench.kernels.arrays import Arrays
from roofbench.kernels.cuda_impl import (
    CudaLibrary,
    DeviceProps,
    compile_options,
    cuda_include_dirs,
    load_source,
)
from roofbench.kernels.spec import Case

from roofbench.roof_records import RoofSet
from roofbench.timing import RoofPair, TimerConfig, Timing, probe_timers

from .base import BackendUnavailable, CaseUnsupported, Hooks, Prepared
from .cuda_timer import EventOps, cuda_time
from .gpu_common import (
    ALL_LAUNCHERS,
    POISON,
    STORAGE,
    CudaCBackend,
    CudaCPrepared,
    PlannedLaunch,
    device_reason,
    function_facts,
    launch_facts,
    plan_launches,
)
from .gpu_roofs import CupyRoofPairs


@cache
def _cupy_reason() -> str | None:
    return device_reason("CuPy", "install roofbench[cuda13] or [cuda12]",
                         lambda: importlib.import_module("cupy"),
                         lambda cupy: cupy.cuda.runtime.getDeviceCount())


def device_props(index: int = 0) -> DeviceProps:
    import cupy

    p = cupy.cuda.runtime.getDeviceProperties(index)
    name = p.get("name", b"")
    return DeviceProps(
        cc=(int(p["major"]), int(p["minor"])),
        sm_count=int(p["multiProcessorCount"]),
        max_threads_per_sm=int(p.get("maxThreadsPerMultiProcessor", 2048)),
        regs_per_sm=int(p.get("regsPerMultiprocessor", 65536)),
        smem_per_sm=int(p.get("sharedMemPerMultiprocessor", 228 * 1024)),
        smem_per_block_optin=int(p.get("sharedMemPerBlockOptin", 48 * 1024)),
        l2_bytes=int(p.get("l2CacheSize", 0)),
        name=name.decode() if isinstance(name, bytes) else str(name),
    )


class EventTimer:
    """Device seconds of a stretch of work on one stream: an event at ``start()``, another at
    ``stop()``, waited for."""

    def __init__(self, e0: Any, e1: Any, stream: Any, elapsed_ms: Any) -> None:
        self.e0, self.e1, self.stream, self.elapsed_ms = e0, e1, stream, elapsed_ms

    def start(self) -> None:
        self.e0.record(self.stream)

    def stop(self) -> float:
        self.e1.record(self.stream)
        self.e1.synchronize()
        return self.elapsed_ms(self.e0, self.e1) / 1e3


class CupyPrepared(CudaCPrepared):
    compiler = "nvrtc (cupy.RawModule)"

    def _on_stream(self) -> Any:
        return self.backend.stream

    def _input(self, x: Any, buf: Any) -> Any:
        """A device input (drawn there) is copied on the device, so the variants sharing it
        each start from the same values; a host array is uploaded."""
        import cupy

        if isinstance(x, cupy.ndarray):
            return cupy.array(x, dtype=STORAGE[buf.dtype], copy=True)
        return super()._input(x, buf)

    def _upload(self, host: np.ndarray) -> Any:
        import cupy

        return cupy.asarray(host)

    def _empty(self, shape: tuple[int, ...], dtype: np.dtype) -> Any:
        import cupy

        return cupy.empty(shape, dtype=dtype)

    def _fill(self, array: Any, dtype: str) -> None:
        array.fill(POISON[dtype])

    def _call(self, pl: PlannedLaunch) -> Callable[[], None]:
        args = tuple(self.arrays[a] if isinstance(a, str) else a for a in pl.args)
        if pl.impl.launcher == "library":
            call = self._library(pl.impl, args)
            self.facts.append(launch_facts(pl, None, None, None, self.backend.props.cc))
            return call
        if pl.impl.launcher == "driver":
            return self._tma(pl)
        fn = self._runtime_function(pl)
        return lambda: fn(pl.grid, pl.block, args, shared_mem=pl.smem)

    def _opt_in(self, fn: Any, smem: int) -> None:
        fn.max_dynamic_shared_size_bytes = max(smem, fn.max_dynamic_shared_size_bytes)

    def _tma(self, pl: Any) -> Callable[[], None]:
        """A tensor-map kernel (the sm_90a wgmma GEMM) through cuda-python: maps encoded once
        over this case's arrays, parameters packed once, launched on the backend's stream."""
        from roofbench.roofs.probes.cuda_driver import KernelParams

        from .tma_launch import encode_tensor_map, param_bytes

        fn = self.backend.tma.function(pl.impl.source, pl.function, pl.smem)
        maps = {m.buffer: encode_tensor_map(m, self.arrays[m.buffer].data.ptr)
                for m in pl.tensor_maps}
        params = KernelParams(param_bytes(pl.args, lambda b: self.arrays[b].data.ptr, maps))
        stream = self.backend.stream
        facts = function_facts(pl, fn, self.backend.props.cc)
        facts.compiler = f"nvrtc {pl.impl.arch} (cuda-python driver launch)"
        self.facts.append(facts)
        return lambda: fn.launch(pl.grid, pl.block, pl.smem, stream.ptr, params)

    def _library(self, impl: CudaLibrary, args: tuple[Any, ...]) -> Callable[[], None]:
        import cupy

        if impl.op in ("sdpa", "sdpa_causal"):
            return _sdpa(args[:4], self.case.dtype, self.backend.stream,
                         causal=impl.op == "sdpa_causal")
        if impl.op != "matmul":
            raise CaseUnsupported(f"unknown library op {impl.op}")
        a, b, c = args[:3]
        return lambda: cupy.matmul(a, b, out=c)

    def run(self) -> None:
        with self.backend.stream:
            for call in self._calls:
                call()

    def launch_fns(self) -> list[Callable[[], None]]:
        def on_stream(call: Callable[[], None]) -> Callable[[], None]:
            def f() -> None:
                with self.backend.stream:
                    call()
            return f
        return [on_stream(c) for c in self._calls]

    def close(self) -> None:
        import cupy

        self.backend.stream.synchronize()
        self.arrays.clear()
        # Give the pool's blocks back, so that memGetInfo (the next case's budget) sees them.
        cupy.get_default_memory_pool().free_all_blocks()


def _sdpa(arrays: tuple[Any, ...], dtype: str, stream: Any, causal: bool) -> Callable[[], None]:
    """torch's scaled_dot_product_attention on the case's CuPy arrays Q, K, V -> O: zero-copy
    DLPack views (bf16 lives as raw 16-bit words, reinterpreted), run on the backend's stream so
    that its CUDA events time it. Its default scale is 1/sqrt(d), the workload's."""
    import torch
    import torch.nn.functional as F

    want = {"fp16": torch.float16, "bf16": torch.bfloat16}[dtype]
    q, k, v, o = (torch.from_dlpack(a).view(want) for a in arrays)
    ts = torch.cuda.ExternalStream(stream.ptr, device=q.device)

    def call() -> None:
        with torch.cuda.stream(ts):
            o.copy_(F.scaled_dot_product_attention(q, k, v, is_causal=causal))

    return call


class CupyBackend(CupyRoofPairs, CudaCBackend):
    name = "cuda"
    _reason = staticmethod(_cupy_reason)

    def __init__(self, device: int = 0) -> None:
        super().__init__(device)
        import cupy

        cupy.cuda.Device(device).use()
        self.props = device_props(device)
        self.stream = cupy.cuda.Stream(non_blocking=True)
        self._tma: Any = None
        self._arrays: Arrays | None = None

    @property
    def tma(self) -> Any:
        """Loader of the tensor-map (sm_90a) kernels, made on first use."""
        if self._tma is None:
            from .tma_launch import TmaModules

            self._tma = TmaModules()
        return self._tma

    def plan(self, case: Case) -> list[Any]:
        """plan_launches with tensor-map kernels allowed when cuda-python is importable."""
        from .tma_launch import tma_unavailable

        plans = plan_launches(case, self.props, launchers=ALL_LAUNCHERS)
        if any(pl.impl.launcher == "driver" for pl in plans):
            why = tma_unavailable()
            if why:
                raise CaseUnsupported(why)
        return self.limit_residency(case, plans)

    # -- compilation ------------------------------------------------------------------
    def module(self, source: str) -> Any:
        """One RawModule per source, compiled by NVRTC for this device's arch (CuPy picks
        the arch of the current device and caches the binary on disk)."""
        import cupy

        if source not in self._modules:
            opts = compile_options() + tuple(f"-I{d}" for d in cuda_include_dirs())
            self._modules[source] = cupy.RawModule(code=load_source(source), options=opts,
                                                   backend="nvrtc")
        return self._modules[source]

    # -- facts --------------------------------------------------------------------------
    def info(self) -> dict[str, Any]:
        import cupy
        from roofbench.roofs.probes import nvml

        rt = cupy.cuda.runtime
        d: dict[str, Any] = {
            "kind": "gpu", "name": self.props.name, "index": self.index,
            "compute_capability": f"{self.props.cc[0]}.{self.props.cc[1]}",
            "sm_count": self.props.sm_count, "l2_bytes": self.props.l2_bytes,
            "max_threads_per_sm": self.props.max_threads_per_sm,
            "regs_per_sm": self.props.regs_per_sm, "smem_per_sm": self.props.smem_per_sm,
            "mem_total": rt.memGetInfo()[1], "mem_free": rt.memGetInfo()[0],
            "cupy_version": cupy.__version__,
            "cuda_runtime_version": rt.runtimeGetVersion(),
            "cuda_driver_version": rt.driverGetVersion(),
            "nvrtc_version": ".".join(map(str, cupy.cuda.nvrtc.getVersion())),
        }
        d["nvml"] = nvml.device_facts(self.index)
        return d

    def memory_budget(self) -> int:
        import cupy

        free, _ = cupy.cuda.runtime.memGetInfo()
        return int(free // 2)

    def dtypes(self) -> tuple[str, ...]:
        return ("fp64", "fp32", "fp16", "bf16", "fp8")

    # -- running ------------------------------------------------------------------------
    def arrays(self) -> Arrays:
        """Inputs, reference and validation on the device, through CuPy."""
        if self._arrays is None:
            import cupy

            self._arrays = Arrays(cupy, device=True)
        return self._arrays

    def device_context(self) -> Any:
        return self.stream

    def device_timer(self) -> EventTimer:
        import cupy

        return EventTimer(cupy.cuda.Event(), cupy.cuda.Event(), self.stream,
                          cupy.cuda.get_elapsed_time)

    def warm(self, case: Case) -> None:
        """Compile and load what the case launches: NVRTC modules, the sm_90a TMA kernels."""
        for pl in self.plan(case):
            if pl.impl.launcher == "driver":
                self.tma.function(pl.impl.source, pl.function, pl.smem)
            elif pl.function is not None:
                self.function(pl.impl.source, pl.function)

    def prepare(self, case: Case, inputs: dict[str, Any]) -> Prepared:
        return CupyPrepared(self, case, inputs)

    def profiler_hooks(self) -> Hooks:
        from cupy.cuda import runtime

        return runtime.profilerStart, runtime.profilerStop

    def _event_ops(self) -> EventOps:
        import cupy

        stream = self.stream

        def record(ev: Any) -> None:
            ev.record(stream)

        return EventOps(new_event=cupy.cuda.Event, record=record,
                        wait=lambda ev: ev.synchronize(),
                        elapsed_s=lambda a, b: cupy.cuda.get_elapsed_time(a, b) / 1e3,
                        flush_l2=self._flush_l2)

    def _flush_l2(self) -> None:
        import cupy

        if self._flush_buf is None:  # allocated once, outside every timed window
            self._flush_buf = cupy.empty(2 * self.last_level_cache(), dtype=np.uint8)
        buf = self._flush_buf
        cupy.cuda.runtime.memsetAsync(buf.data.ptr, 0, buf.nbytes, self.stream.ptr)

    def time(self, fn: Callable[[], None], cfg: TimerConfig,
             pair: RoofPair | None = None) -> Timing:
        return cuda_time(fn, cfg, self._event_ops(), device_index=self.index, pair=pair)

    def pair_stream(self) -> Any:
        return self.stream  # the roof's samples are timed where the case's are

    def measure_roofs(self, quick: bool = False,
                      progress: Callable[[str], None] | None = None,
                      checkpoint: Callable[[RoofSet], None] | None = None) -> RoofSet:
        try:
            from roofbench.roofs.probes.gpu import measure_gpu_roofs
        except ImportError as e:
            raise BackendUnavailable(
                f"GPU roof probes are not available (roofbench.roofs.probes.gpu: {e}); "
                "pass --roofs FILE with calibrated roofs") from None
        cfg, search_cfg = probe_timers(quick)

        def time_fn(fn: Callable[[], None], search: bool = False) -> Timing:
            return self.time(fn, search_cfg if search else cfg)
        # The probes launch on CuPy's current stream: make it ours, where the events are.
        with self.stream:
            return measure_gpu_roofs(time_fn, quick=quick, progress=progress,
                                     device=self.index, checkpoint=checkpoint)

    def close(self) -> None:
        self.stream.synchronize()
        self._flush_buf = None
