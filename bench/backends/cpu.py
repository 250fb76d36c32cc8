"""The CPU backend: Numba-parallel kernels on every core, host-clock timing, real CPU roofs.

Not a mock: the same cases as on a GPU run here with the "cpu" implementations, are validated
the same way and placed under roofs measured on this CPU (STREAM, FMA, BLAS probes).
"""

from __future__ import annotations

import os
import platform
from collections.abc import Callable
from functools import cache, partial
from pathlib import Path
from typing import Any

import numba
import numpy as np
from numba import njit, prange
from roofbench.kernels.arrays import np_dtype
from roofbench.kernels.spec import Case
from roofbench.roofs.probes.cpu_noise import (
    NoiseProbe,
    NoiseReport,
    ThreadWaits,
    huge_page_fraction,
    noise_cause,
    outside_load,
)
from roofbench.roofs.probes.cpu_spinners import settle
from roofbench.roofs.probes.host_memory import available_memory_bytes, case_memory_budget

from roofbench.cpu_cache import last_level_cache_bytes
from roofbench.records import OccupancyLevel
from roofbench.roof_context import RoofContext
from roofbench.roof_records import DatasheetMatch, RoofSet
from roofbench.timing import ROOF_MOVED, RoofPair, TimerConfig, Timing, host_timer

from .base import Backend, CaseUnsupported, LaunchListPrepared

GiB = 1 << 30


@cache
def cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine() or "unknown CPU"


@cache
def cache_sizes() -> dict[str, int]:
    """Cache sizes in bytes by level name (L1d, L2, L3), from sysfs; per instance."""
    out: dict[str, int] = {}
    base = Path("/sys/devices/system/cpu/cpu0/cache")
    for idx in sorted(base.glob("index*")):
        try:
            level = (idx / "level").read_text().strip()
            ctype = (idx / "type").read_text().strip()
            size = (idx / "size").read_text().strip()
        except OSError:
            continue
        if ctype == "Instruction":
            continue
        mult = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}.get(size[-1], 1)
        num = int(size[:-1]) if size[-1] in "KMG" else int(size)
        out[f"L{level}" + ("d" if ctype == "Data" else "")] = num * mult
    return out


@njit(parallel=True, cache=True)
def _parallel_fill(flat, value):
    # First touch from every core with the kernels' static split: on a multi-socket machine
    # the pages of a written buffer then sit on the node of the thread that writes them.
    for i in prange(flat.shape[0]):
        flat[i] = value


class CpuPrepared(LaunchListPrepared):
    def __init__(self, case: Case, inputs: dict[str, np.ndarray],
                 backend: CpuBackend | None = None) -> None:
        self.case = case
        self.backend = backend
        self.arrays: dict[str, np.ndarray] = {}
        for name, buf in case.buffers().items():
            if buf.role == "input":
                self.arrays[name] = np.ascontiguousarray(inputs[name])
            else:
                self.arrays[name] = np.empty(buf.shape, dtype=np_dtype(buf.dtype))
        table = case.variant.impls["cpu"]
        self._calls: list[Callable[[], None]] = []
        for launch in case.launches():
            fn = table[launch.kernel]
            args = tuple(self.arrays[a] if isinstance(a, str) else a for a in launch.args)
            self._calls.append(partial(fn, *args))
        # An occupancy level is Numba's thread count from here to close(): poisoning,
        # validation and timing run with it (set_num_threads holds for this thread). Set
        # last, so that a failed allocation leaves the count as it was.
        self._threads_before: int | None = None
        if case.occupancy_level is not None:
            self._threads_before = numba.get_num_threads()
            numba.set_num_threads(case.occupancy_level.value)

    def poison(self) -> None:
        for name, buf in self.case.buffers().items():
            if buf.role != "input":
                _parallel_fill(self.arrays[name].reshape(-1), np.nan)

    def extra(self) -> dict[str, Any]:
        # What the machine did while the whole pipeline was timed (see roofs/probes/cpu_noise.py).
        out: dict[str, Any] = {}
        spans = [(a.ctypes.data, a.ctypes.data + a.nbytes) for a in self.arrays.values()
                 if a.nbytes]
        out["huge_page_fraction"] = huge_page_fraction(spans)
        out["numba_threads"] = numba.get_num_threads()  # in effect while it was timed
        noise = self.backend.last_noise if self.backend is not None else None
        if noise is not None:
            out.update(timing_environment=noise.to_dict(), noise_cause=noise_cause(noise))
        return out

    def outputs(self) -> dict[str, np.ndarray]:
        # The buffers themselves, not copies: they are host arrays already and are read
        # (validated) before the next run; a copy of a 700 MiB output was the difference
        # between a validation's peak and the resident-memory target.
        return {n: self.arrays[n] for n, b in self.case.buffers().items() if b.role == "output"}

    def close(self) -> None:
        self.arrays.clear()
        if self._threads_before is not None:
            numba.set_num_threads(self._threads_before)
            self._threads_before = None


class CpuBackend(Backend):
    name = "cpu"
    family = "cpu"
    kind = "cpu"
    pairs_roofs = True  # time() samples a roof beside each sample (bench/measure/pairs.py)

    def __init__(self) -> None:
        self._flush: np.ndarray | None = None
        self.last_noise: NoiseReport | None = None

    def device_name(self) -> str:
        return cpu_model()

    def info(self) -> dict[str, Any]:
        import numba

        return {
            "kind": "cpu",
            "name": cpu_model(),
            "machine": platform.machine(),
            "cores": os.cpu_count(),
            # numba.config sets its settings at run time: numba's types do not list them
            "numba_threads": numba.config.NUMBA_NUM_THREADS,  # type: ignore[attr-defined]
            # The features the kernels were compiled for (None: numba's default tuning, which
            # on Intel AVX-512 prefers 256-bit vectors; the FMA roof is measured in a process
            # of its own with the widest, see roofs/probes/cpu_fma_child.py).
            "numba_cpu_features": numba.config.CPU_FEATURES,  # type: ignore[attr-defined]
            "caches": cache_sizes(),
            "mem_total": _mem_total(),
            "mem_available": available_memory_bytes(),
        }

    def memory_budget(self) -> int:
        return case_memory_budget(available_memory_bytes())

    def last_level_cache(self) -> int:
        # The total over all instances (every CCD's L3): an array must outgrow them all.
        return last_level_cache_bytes()

    def dtypes(self) -> tuple[str, ...]:
        return ("fp64", "fp32")  # numba has no CPU fp16/bf16/fp8 arithmetic

    def occupancy_levels(self, case: Case) -> list[OccupancyLevel]:
        """Numba threads 1 .. the cores Numba runs on; only Numba kernels obey the count (a
        library call, numpy's BLAS, keeps a thread pool of its own: Variant.numba_threads)."""
        if not case.variant.numba_threads:
            raise CaseUnsupported(
                f"{case.key}: its launches are a library call with a thread pool of its own "
                "(not Numba's), so their threads cannot be limited")
        cores = int(vars(numba.config)["NUMBA_NUM_THREADS"])  # the pool numba started with
        return [OccupancyLevel("threads", t, cores) for t in range(1, cores + 1)]

    def prepare(self, case: Case, inputs: dict[str, np.ndarray]) -> LaunchListPrepared:
        self.last_noise = None  # a case that never gets timed must not carry the last one's
        return CpuPrepared(case, inputs, self)

    def _flush_cache(self) -> None:
        if self._flush is None:  # allocated once, outside every timed window
            self._flush = np.ones(2 * self.last_level_cache() // 8, dtype=np.float64)
        self._flush += 1.0

    def time(self, fn: Callable[[], None], cfg: TimerConfig,
             pair: RoofPair | None = None) -> Timing:
        # BLAS workers woken by the untimed reference spin on the cores the case needs
        # (roofs/probes/cpu_spinners.py): start once they sleep.
        settled = settle()
        probe = NoiseProbe()
        with ThreadWaits() as waits:  # each sample's wait for a core: the gate's load rule
            t = host_timer(fn, cfg, before=self._flush_cache if cfg.cold else None,
                           waits=waits, pair=pair)
        self.last_noise = probe.report()
        if (flag := settled.flag()) is not None:
            t.flags.append(flag)
        roof_moved = any(f.startswith(ROOF_MOVED) for f in t.flags)  # the pair said why
        if any(f.startswith("noisy") for f in t.flags) and not roof_moved:  # the counters
            t.flags.append(f"noise cause: {noise_cause(self.last_noise)}")
        # what else used the machine, spread or not (a steady neighbour stretches every
        # sample alike): compare's load rule bounds the slowdown it explains (roofbench/gate.py)
        t.outside_load = outside_load(self.last_noise)
        return t

    def measure_roofs(self, quick: bool = False,
                      progress: Callable[[str], None] | None = None,
                      checkpoint: Callable[[RoofSet], None] | None = None) -> RoofSet:
        # In a process of its own: its cores and thread counts, never the caller's
        # (roofs/probes/cpu_env.py); the FMA peak in grandchildren with the widest vectors.
        from roofbench.roofs.probes.cpu_roofs_child import isolated_cpu_roofs

        roofs, notes, pe = isolated_cpu_roofs(quick=quick, progress=progress)
        rs = RoofSet(device=self.device_name(), roofs=list(roofs), info=self.info(),
                     context=RoofContext(environment=pe))
        rs.datasheet = DatasheetMatch(None, "unknown for CPUs: no datasheet roofs are drawn")
        rs.notes.extend(notes)
        return rs


def _mem_total() -> int:
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0
