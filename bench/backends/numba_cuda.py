"""Numba CUDA backends: ``--backend numba`` (a real GPU) and ``--backend sim`` (Numba's CUDA
simulator, no GPU needed). Both run the "numba_cuda" twins of ``kernels/numba_cuda_twins.py``.

The simulator is chosen by ``NUMBA_ENABLE_CUDASIM=1``, which numba reads when ``numba.cuda`` is
first imported: a process can hold one or the other, never both. SimBackend therefore works
only in a process that has not imported ``numba.cuda`` yet (it sets the variable and imports
it), or one started with ``NUMBA_ENABLE_CUDASIM=1``; the tests run it in their own pytest
process. Simulator timings measure Python, not a GPU: they are recorded but flagged, and the
simulator has no roofs.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from functools import partial
from typing import Any

import numpy as np
from roofbench.kernels import numba_compat  # noqa: F401  (numpy 2.5 vs numba-cuda 0.30)
from roofbench.kernels.arrays import np_dtype
from roofbench.kernels.numba_cuda_twins import DTYPES, NumbaTwin, build
from roofbench.kernels.spec import Case

from roofbench.errors_text import first_line
from roofbench.records import LaunchFacts
from roofbench.roof_records import RoofSet
from roofbench.timing import RoofPair, TimerConfig, Timing, host_timer

from .base import (
    Backend,
    BackendUnavailable,
    CaseUnsupported,
    Hooks,
    LaunchListPrepared,
)
from .cuda_timer import EventOps, cuda_time
from .gpu_roofs import CupyRoofPairs

FAMILY = "numba_cuda"
SIM_MAX_BLOCKS = 2  # simulator grid-stride grids: each simulated thread is a Python thread


def _sim_enabled_env() -> bool:
    return os.environ.get("NUMBA_ENABLE_CUDASIM", "0") not in ("", "0")


def enable_simulator() -> None:
    """Select the simulator for this process; only possible before numba.cuda is imported."""
    if "numba.cuda" in sys.modules:
        from numba.cuda.core import config

        if not config.ENABLE_CUDASIM:
            raise BackendUnavailable(
                "the CUDA simulator must be chosen before numba.cuda is imported: run in a "
                "fresh process (e.g. NUMBA_ENABLE_CUDASIM=1 roofbench run --backend sim)")
        return
    os.environ["NUMBA_ENABLE_CUDASIM"] = "1"
    from numba.core import config

    config.reload_config()  # numba read its environment at import; numba.cuda reads this one


class NumbaPrepared(LaunchListPrepared):
    def __init__(self, backend: _NumbaBase, case: Case, inputs: dict[str, np.ndarray]) -> None:
        from numba import cuda

        self.case, self.backend = case, backend
        table = case.variant.impls.get(FAMILY) or {}
        if case.dtype not in DTYPES:
            raise CaseUnsupported(f"no Numba CUDA twin for {case.dtype}")
        self.bufs = case.buffers()
        stream = backend.stream
        self.arrays: dict[str, Any] = {}
        for name, buf in self.bufs.items():
            if buf.role == "input":
                host = np.ascontiguousarray(inputs[name], dtype=np_dtype(buf.dtype))
                self.arrays[name] = cuda.to_device(host, stream=stream)
            else:
                self.arrays[name] = cuda.device_array(buf.shape, dtype=np_dtype(buf.dtype),
                                                      stream=stream)
        self._calls: list[Callable[[], None]] = []
        self.facts: list[LaunchFacts] = []
        for la in case.launches():
            twin = table.get(la.kernel)
            if not isinstance(twin, NumbaTwin):
                raise CaseUnsupported(f"no Numba CUDA twin for launch {la.kernel}")
            kern = build(twin.name, case.dtype)
            grid, block = twin.geometry(case.size, backend.sm_count, backend.max_blocks)
            args = tuple(self.arrays[a] if isinstance(a, str) else a for a in la.args)
            launch = kern[grid, block, stream]
            self._calls.append(partial(launch, *args))
            self.facts.append(LaunchFacts(function=twin.name, grid=list(grid),
                                          block=list(block)))

    def poison(self) -> None:
        for name, buf in self.bufs.items():
            if buf.role != "input":
                self.arrays[name].copy_to_device(
                    np.full(buf.shape, np.nan, dtype=np_dtype(buf.dtype)),
                    stream=self.backend.stream)

    def outputs(self) -> dict[str, np.ndarray]:
        self.backend.stream.synchronize()
        return {n: self.arrays[n].copy_to_host() for n, b in self.bufs.items()
                if b.role == "output"}

    def extra(self) -> dict[str, Any]:
        return {"runtime": self.backend.name}

    def launch_facts(self) -> list[LaunchFacts]:
        return list(self.facts)

    def close(self) -> None:
        self.backend.stream.synchronize()
        self.arrays.clear()


class _NumbaBase(Backend):
    family = FAMILY
    kind = "gpu"
    max_blocks: int | None = None

    def __init__(self) -> None:
        from numba import cuda

        self.cuda = cuda
        self.stream = cuda.stream()
        self.sm_count = 1

    def dtypes(self) -> tuple[str, ...]:
        return DTYPES

    def prepare(self, case: Case, inputs: dict[str, np.ndarray]) -> LaunchListPrepared:
        return NumbaPrepared(self, case, inputs)


class NumbaCudaBackend(CupyRoofPairs, _NumbaBase):
    name = "numba"

    @classmethod
    def unavailable_reason(cls) -> str | None:
        if _sim_enabled_env():
            return "NUMBA_ENABLE_CUDASIM is set in this process: use --backend sim"
        try:
            from numba import cuda
        except Exception as e:
            return f"numba-cuda is not importable ({first_line(e)})"
        try:
            if not cuda.is_available():
                return "no CUDA device (numba.cuda.is_available() is False)"
        except Exception as e:
            return f"no CUDA device ({first_line(e)})"
        return None

    def __init__(self) -> None:
        super().__init__()
        dev = self.cuda.get_current_device()
        self.dev = dev
        self.index = int(getattr(dev, "id", 0))
        self.sm_count = int(dev.MULTIPROCESSOR_COUNT)
        self._flush_buf: Any = None
        name = dev.name
        self._name = name.decode() if isinstance(name, bytes) else str(name)

    def device_name(self) -> str:
        return self._name

    def profiler_hooks(self) -> Hooks:
        return self.cuda.profile_start, self.cuda.profile_stop

    def info(self) -> dict[str, Any]:
        import numba
        from roofbench.roofs.probes import nvml

        free, total = self.cuda.current_context().get_memory_info()
        return {"kind": "gpu", "name": self._name,
                "compute_capability": ".".join(map(str, self.dev.compute_capability)),
                "sm_count": self.sm_count, "l2_bytes": self.last_level_cache(),
                "mem_total": total, "mem_free": free, "numba_version": numba.__version__,
                "nvml": nvml.device_facts(0)}

    def memory_budget(self) -> int:
        free, _ = self.cuda.current_context().get_memory_info()
        return int(free // 2)

    def last_level_cache(self) -> int:
        try:
            return int(self.dev.L2_CACHE_SIZE)
        except Exception:
            return 40 << 20

    def _flush_l2(self) -> None:
        if self._flush_buf is None:  # allocated once, outside every timed window
            self._flush_buf = self.cuda.device_array(2 * self.last_level_cache(), np.uint8)
        self._flush_buf[:] = 0  # a device-side fill, outside the timed window
        self.cuda.synchronize()

    def time(self, fn: Callable[[], None], cfg: TimerConfig,
             pair: RoofPair | None = None) -> Timing:
        cuda, stream = self.cuda, self.stream
        ops = EventOps(new_event=cuda.event, record=lambda ev: ev.record(stream),
                       wait=lambda ev: ev.synchronize(),
                       elapsed_s=lambda a, b: cuda.event_elapsed_time(a, b) / 1e3,
                       flush_l2=self._flush_l2)
        return cuda_time(fn, cfg, ops, pair=pair)

    def measure_roofs(self, quick: bool = False,
                      progress: Callable[[str], None] | None = None,
                      checkpoint: Callable[[RoofSet], None] | None = None) -> RoofSet:
        from .gpu_roofs import roofs_through_cupy

        return roofs_through_cupy(quick, progress, checkpoint)


class SimBackend(_NumbaBase):
    """Numba's CUDA simulator: correctness of the twins without a GPU, never performance."""

    name = "sim"
    kind = "cpu"  # sizes scale like a CPU run (small); its times are Python's
    max_blocks = SIM_MAX_BLOCKS

    @classmethod
    def unavailable_reason(cls) -> str | None:
        # No side effect here: asking must not switch this process into simulator mode.
        import importlib.util

        if importlib.util.find_spec("numba_cuda") is None:
            return "numba-cuda is not installed"
        if "numba.cuda" in sys.modules:
            from numba.cuda.core import config

            if not config.ENABLE_CUDASIM:
                return ("the CUDA simulator must be chosen before numba.cuda is imported: run "
                        "in a fresh process (NUMBA_ENABLE_CUDASIM=1 roofbench run --backend sim)")
        return None

    def __init__(self) -> None:
        enable_simulator()
        super().__init__()

    def device_name(self) -> str:
        return "numba-cuda-simulator"

    def info(self) -> dict[str, Any]:
        import numba

        return {"kind": "simulator", "name": self.device_name(),
                "numba_version": numba.__version__,
                "note": "NUMBA_ENABLE_CUDASIM=1: threads are Python threads; times are not "
                        "GPU times"}

    def memory_budget(self) -> int:
        return 64 << 20  # the simulator is for small cases only

    def last_level_cache(self) -> int:
        return 1 << 20

    def time(self, fn: Callable[[], None], cfg: TimerConfig) -> Timing:
        t = host_timer(fn, cfg, sync=self.stream.synchronize)
        t.flags.append("simulator: Python time, not GPU time")
        return t

    def measure_roofs(self, quick: bool = False,
                      progress: Callable[[str], None] | None = None,
                      checkpoint: Callable[[RoofSet], None] | None = None) -> RoofSet:
        # No roofs: the simulator measures Python. Cases are validated, never placed.
        return RoofSet(device=self.device_name(), roofs=[],
                       info={"note": "CUDA simulator: no roofs (times are Python's)"})
