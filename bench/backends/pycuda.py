"""The PyCUDA backend (``--backend pycuda``): the same ``.cu`` sources as the CuPy backend,
compiled by nvcc through ``pycuda.compiler.SourceModule`` and launched with PyCUDA, so the two
launchers can be compared on identical kernels in one results table.

Optional (``pip install roofbench[pycuda]`` needs the CUDA toolkit and a driver to build).
It runs on the device's primary context, so it can share a process with CuPy. The vendor
library baseline (cuBLAS) is not reachable from PyCUDA: that case is recorded as unsupported.
"""

from __future__ import annotations

import importlib
import shutil
from collections.abc import Callable
from functools import cache
from typing import Any

import numpy as np
from roofbench.kernels.cuda_impl import (
    DeviceProps,
    compile_options,
    cuda_include_dirs,
    load_source,
)
from roofbench.kernels.spec import Case

from roofbench.roof_records import RoofSet
from roofbench.timing import RoofPair, TimerConfig, Timing

from .base import (
    CaseUnsupported,
    Hooks,
    LaunchListPrepared,
)
from .cuda_timer import EventOps, cuda_time
from .gpu_common import (
    CudaCBackend,
    CudaCPrepared,
    PlannedLaunch,
    device_reason,
    plan_launches,
)
from .gpu_roofs import CupyRoofPairs


def _count_devices(drv: Any) -> int:
    drv.init()
    return int(drv.Device.count())


@cache
def _pycuda_reason() -> str | None:
    why = device_reason("PyCUDA", "pip install roofbench[pycuda]",
                        lambda: importlib.import_module("pycuda.driver"), _count_devices)
    if why:
        return why
    if _nvcc() is None:
        return "nvcc not found (PATH or the nvidia-cuda-nvcc wheel): PyCUDA compiles with nvcc"
    return None


@cache
def _nvcc() -> str | None:
    found = shutil.which("nvcc")
    if found:
        return found
    try:
        from cuda.pathfinder import find_nvidia_binary_utility

        p = find_nvidia_binary_utility("nvcc")
        return str(p) if p else None
    except Exception:
        return None


class PycudaPrepared(CudaCPrepared):
    compiler = "nvcc (pycuda SourceModule)"

    def _upload(self, host: np.ndarray) -> Any:
        import pycuda.gpuarray as gpuarray

        return gpuarray.to_gpu(host)

    def _empty(self, shape: tuple[int, ...], dtype: np.dtype) -> Any:
        import pycuda.gpuarray as gpuarray

        return gpuarray.empty(shape, dtype=dtype)

    def _fill(self, array: Any, dtype: str) -> None:
        array.fill(self.poison_value(dtype), stream=self.backend.stream)

    def _call(self, pl: PlannedLaunch) -> Callable[[], None]:
        # plan refuses library calls; plan_launches leaves out the "driver" launcher by default
        assert pl.impl.launcher == "runtime" and pl.function is not None
        fn = self._runtime_function(pl)
        args = tuple(self.arrays[a].gpudata if isinstance(a, str) else a for a in pl.args)
        stream = self.backend.stream
        return lambda: fn(*args, grid=pl.grid, block=pl.block, shared=pl.smem, stream=stream)

    def _opt_in(self, fn: Any, smem: int) -> None:
        fn.set_attribute(self.backend.drv.function_attribute.MAX_DYNAMIC_SHARED_SIZE_BYTES, smem)

    def close(self) -> None:
        self.backend.stream.synchronize()
        for a in self.arrays.values():
            a.gpudata.free()
        self.arrays.clear()


class PycudaBackend(CupyRoofPairs, CudaCBackend):
    name = "pycuda"
    _reason = staticmethod(_pycuda_reason)

    def __init__(self, device: int = 0) -> None:
        super().__init__(device)
        import pycuda.driver as drv

        self.drv = drv
        self.dev = drv.Device(device)
        self.ctx = self.dev.retain_primary_context()  # shared with CuPy / the runtime API
        self.ctx.push()
        a = drv.device_attribute
        self.props = DeviceProps(
            cc=self.dev.compute_capability(),
            sm_count=self.dev.get_attribute(a.MULTIPROCESSOR_COUNT),
            max_threads_per_sm=self.dev.get_attribute(a.MAX_THREADS_PER_MULTIPROCESSOR),
            regs_per_sm=self.dev.get_attribute(a.MAX_REGISTERS_PER_MULTIPROCESSOR),
            smem_per_sm=self.dev.get_attribute(a.MAX_SHARED_MEMORY_PER_MULTIPROCESSOR),
            smem_per_block_optin=self.dev.get_attribute(a.MAX_SHARED_MEMORY_PER_BLOCK_OPTIN),
            l2_bytes=self.dev.get_attribute(a.L2_CACHE_SIZE),
            name=self.dev.name(),
        )
        self.stream = drv.Stream()

    def module(self, source: str) -> Any:
        from pycuda.compiler import SourceModule

        if source not in self._modules:
            self._modules[source] = SourceModule(
                load_source(source), nvcc=_nvcc() or "nvcc", options=list(compile_options()),
                include_dirs=cuda_include_dirs(), no_extern_c=True, arch=self.props.arch)
        return self._modules[source]

    def info(self) -> dict[str, Any]:
        import pycuda
        from roofbench.roofs.probes import nvml

        free, total = self.drv.mem_get_info()
        return {"kind": "gpu", "name": self.props.name, "index": self.index,
                "compute_capability": f"{self.props.cc[0]}.{self.props.cc[1]}",
                "sm_count": self.props.sm_count, "l2_bytes": self.props.l2_bytes,
                "mem_total": total, "mem_free": free, "pycuda_version": pycuda.VERSION_TEXT,
                "cuda_driver_version": self.drv.get_driver_version(), "nvcc": _nvcc(),
                "nvml": nvml.device_facts(self.index)}

    def memory_budget(self) -> int:
        free, _ = self.drv.mem_get_info()
        return int(free // 2)

    def plan(self, case: Case) -> list[PlannedLaunch]:
        """plan_launches, refusing the library baseline (PyCUDA has no cuBLAS binding)."""
        plans = plan_launches(case, self.props)
        if any(pl.impl.launcher == "library" for pl in plans):
            raise CaseUnsupported("PyCUDA has no cuBLAS binding: the library baseline runs on "
                                  "--backend cuda")
        return self.limit_residency(case, plans)

    def prepare(self, case: Case, inputs: dict[str, np.ndarray]) -> LaunchListPrepared:
        return PycudaPrepared(self, case, inputs)

    def profiler_hooks(self) -> Hooks:
        return self.drv.start_profiler, self.drv.stop_profiler

    def _flush_l2(self) -> None:
        if self._flush_buf is None:  # allocated once, outside every timed window
            self._flush_buf = self.drv.mem_alloc(2 * self.last_level_cache())
        self.drv.memset_d8_async(self._flush_buf, 0, 2 * self.last_level_cache(), self.stream)

    def time(self, fn: Callable[[], None], cfg: TimerConfig,
             pair: RoofPair | None = None) -> Timing:
        drv, stream = self.drv, self.stream
        ops = EventOps(new_event=drv.Event, record=lambda ev: ev.record(stream),
                       wait=lambda ev: ev.synchronize(),
                       elapsed_s=lambda a, b: b.time_since(a) / 1e3, flush_l2=self._flush_l2)
        return cuda_time(fn, cfg, ops, device_index=self.index, pair=pair)

    def measure_roofs(self, quick: bool = False,
                      progress: Callable[[str], None] | None = None,
                      checkpoint: Callable[[RoofSet], None] | None = None) -> RoofSet:
        from .gpu_roofs import roofs_through_cupy

        return roofs_through_cupy(quick, progress, checkpoint)

    def close(self) -> None:
        self.stream.synchronize()
        if self._flush_buf is not None:
            self._flush_buf.free()
            self._flush_buf = None
        self.ctx.pop()
