"""The interface every backend implements, and the lookup of the registry (__init__.py).

A backend runs cases (allocates the buffers of a case, uploads inputs, launches the pipeline,
reads outputs back), times them with its own clock, and measures its device's roofs. Backends
are imported only when asked for, so that a machine without CuPy never imports it.

Implementation families: a variant's ``impls`` is keyed by family ("cpu" numba-parallel code,
"cuda" CUDA C sources, "numba_cuda" Numba CUDA kernels). Several backends can share a family
(CuPy and PyCUDA both launch the "cuda" sources; Numba CUDA and its simulator share
"numba_cuda").
"""

from __future__ import annotations

import contextlib
import importlib
from abc import ABC, abstractmethod
from collections.abc import Callable
from typing import Any

import numpy as np
from roofbench.kernels.arrays import Arrays
from roofbench.kernels.spec import Case

from roofbench.errors_text import first_line
from roofbench.records import LaunchFacts, OccupancyLevel
from roofbench.roof_records import RoofSet
from roofbench.timing import TimerConfig, Timing

from ...plugins import PluginError, plugin_attr
from . import AUTO_ORDER, REGISTRY


class BackendUnavailable(RuntimeError):
    """The backend cannot run on this machine (no device, library missing)."""


class CaseUnsupported(RuntimeError):
    """This backend cannot run this case (no implementation, arch too old, too large)."""


class Prepared(ABC):
    """A case with its buffers allocated on the device and inputs uploaded."""

    @abstractmethod
    def run(self) -> None:
        """Run the whole pipeline once (may be asynchronous; the timer synchronises)."""

    @abstractmethod
    def launch_fns(self) -> list[Callable[[], None]]:
        """One callable per launch, in order, for per-launch timing of a pipeline."""

    @abstractmethod
    def poison(self) -> None:
        """Fill every output and temporary with NaN (or a sentinel) before a validation run."""

    @abstractmethod
    def outputs(self) -> dict[str, np.ndarray]:
        """Copy the outputs back to host numpy arrays."""

    def device_outputs(self) -> dict[str, Any]:
        """The outputs where they are, stored as the backend's ``arrays()`` stores them (no
        copy): what a device-side validation reads."""
        raise NotImplementedError(f"{type(self).__name__} keeps no device array module")

    def extra(self) -> dict[str, Any]:
        """Backend facts recorded with the case (compiler, machine load...), free-form."""
        return {}

    def launch_facts(self) -> list[LaunchFacts]:
        """How each launch runs here (function, geometry, resources, occupancy), one per launch
        in order, or [] where the backend knows none."""
        return []

    def close(self) -> None:  # noqa: B027 - optional hook
        """Free device memory."""


class LaunchListPrepared(Prepared):
    """A prepared case whose pipeline is a list of ready-to-call launches (``self._calls``,
    filled by the backend in launch order): run() calls them all, launch_fns() gives them."""

    _calls: list[Callable[[], None]]

    def run(self) -> None:
        for call in self._calls:
            call()

    def launch_fns(self) -> list[Callable[[], None]]:
        return list(self._calls)


Hooks = tuple[Callable[[], None], Callable[[], None]]


class Backend(ABC):
    name: str = ""
    family: str = ""  # which entry of Variant.impls this backend runs
    kind: str = "cpu"  # "cpu" or "gpu"
    # The kernels it launches carry their source names (extern "C"), so a profiler can select
    # them by exact name (ncu --kernel-name).
    exact_kernel_names: bool = False

    @classmethod
    def unavailable_reason(cls) -> str | None:
        """None when the backend can run here, else a one-line reason."""
        return None

    @abstractmethod
    def info(self) -> dict[str, Any]:
        """Device facts for the results' environment: name, memory, caches, clocks..."""

    @abstractmethod
    def device_name(self) -> str: ...

    @abstractmethod
    def memory_budget(self) -> int:
        """Bytes a run may allocate for the buffers of one case."""

    @abstractmethod
    def last_level_cache(self) -> int:
        """Bytes of the last cache before DRAM (L3 on a CPU, L2 on a GPU)."""

    @abstractmethod
    def prepare(self, case: Case, inputs: dict[str, np.ndarray]) -> Prepared: ...

    @abstractmethod
    def time(self, fn: Callable[[], None], cfg: TimerConfig) -> Timing:
        """Time ``fn`` with this backend's clock (and cache flush when cfg.cold)."""

    @abstractmethod
    def measure_roofs(self, quick: bool = False,
                      progress: Callable[[str], None] | None = None,
                      checkpoint: Callable[[RoofSet], None] | None = None) -> RoofSet:
        """Run the probes and return measured roofs (plus datasheet roofs where known).
        ``checkpoint``, where the probes take long (a GPU), hears the roofs measured so far
        after each probe, so that a killed calibration keeps them."""

    def supports(self, case: Case) -> str | None:
        """None if this backend can run the case, else the reason it cannot."""
        if self.family not in case.variant.impls:
            why = case.variant.unsupported.get(self.family) or case.variant.unsupported.get(
                self.name)
            return why or f"no {self.family} implementation of {case.workload.name}/" \
                          f"{case.variant.name}"
        table = case.variant.impls[self.family]
        missing = [la.kernel for la in case.launches() if la.kernel not in table]
        if missing:
            return f"no {self.family} kernel for launch(es) {', '.join(missing)}"
        if case.dtype not in self.dtypes():
            return f"{self.name} backend does not run {case.dtype}"
        return case.variant.refuse(case.size, case.dtype, self.name)

    def dtypes(self) -> tuple[str, ...]:
        return ("fp64", "fp32", "fp16", "bf16", "fp8")

    def occupancy_levels(self, case: Case) -> list[OccupancyLevel]:
        """The levels of an occupancy scan of ``case`` on this backend, lowest first (each run
        as ``dataclasses.replace(case, occupancy_level=level)``); CaseUnsupported with the reason
        where it cannot limit what runs the case."""
        raise CaseUnsupported(f"the {self.name} backend cannot limit its occupancy")

    def has_kernel(self, case: Case) -> bool:
        """Whether this backend's implementation of the case's variant exists in its dtype. A
        default run selects only these; a dtype asked for by name gets the reason instead."""
        return True

    # -- where a case's inputs, reference and validation run ------------------------------
    def arrays(self) -> Arrays | None:
        """The device array module the runner draws inputs, computes the reference and
        validates with (kernels/arrays.py), or None: numpy on the host."""
        return None

    def device_context(self) -> contextlib.AbstractContextManager[Any]:
        """Entered around a whole case: the device work of the array module goes where the
        backend's launches and events go (its stream)."""
        return contextlib.nullcontext()

    def device_timer(self) -> Any:
        """An object with ``start()`` and ``stop() -> seconds`` (CUDA events on the backend's
        stream, the second waited for), or None."""
        return None

    def isolated(self, case: Case) -> bool:
        """Whether ``case`` runs in a process of its own (a declared property of what it
        launches: bench/suite/isolation.py)."""
        return False

    def warm(self, case: Case) -> None:  # noqa: B027 - optional hook
        """Compile and load what the case launches (the runner's compile phase)."""

    def profiler_hooks(self) -> Hooks | None:
        """(start, stop) of the profiler range (cudaProfilerStart/Stop through the backend's
        own library), or None where there is none."""
        return None

    @classmethod
    def has_profiler_range(cls) -> bool:
        """Whether it brackets a pipeline for a profiler (asked before it is opened)."""
        return cls.profiler_hooks is not Backend.profiler_hooks

    def close(self) -> None:  # noqa: B027 - optional hook
        pass


def plugin_backends() -> dict[str, type[Backend]]:
    """Backends of the plug-ins in $ROOFBENCH_PLUGINS (their ``BACKEND``), by name.
    Raises PluginError for a bad one."""
    out: dict[str, type[Backend]] = {}
    for mod, cls in plugin_attr("BACKEND"):
        if not (isinstance(cls, type) and issubclass(cls, Backend)):
            raise PluginError(f"plug-in {mod!r}: BACKEND is not a roofbench Backend subclass")
        if not cls.name or cls.name in REGISTRY or cls.name in out or cls.name == "auto":
            raise PluginError(f"plug-in {mod!r}: backend name {cls.name!r} is empty or taken")
        out[cls.name] = cls
    return out


def names() -> list[str]:
    """Every backend name: the registry's, then the plug-ins'."""
    return [*REGISTRY, *plugin_backends()]


def backend_class(name: str) -> type[Backend]:
    if name not in REGISTRY:
        plugged = plugin_backends()
        if name in plugged:
            return plugged[name]
        raise KeyError(name)
    mod_name, cls_name = REGISTRY[name].split(":")
    try:
        mod = importlib.import_module(mod_name)
    except ImportError as e:
        raise BackendUnavailable(f"backend {name!r} is not installed ({e})") from None
    return getattr(mod, cls_name)


def unavailable_reason(name: str) -> str | None:
    try:
        cls = backend_class(name)
    except BackendUnavailable as e:
        return str(e)
    return cls.unavailable_reason()


def open_backend(name: str) -> Backend:
    """Instantiate a backend by name; 'auto' picks the best available one."""
    if name == "auto":
        for cand in AUTO_ORDER:
            if unavailable_reason(cand) is None:
                return backend_class(cand)()
        raise BackendUnavailable("no backend is available")
    why = unavailable_reason(name)
    if why is not None:
        raise BackendUnavailable(f"backend {name!r} is unavailable: {why}")
    return backend_class(name)()


def open_for_user(name: str) -> Backend:
    """open_backend for the CLI: an unknown or unavailable backend is a one-line UserError."""
    from ..errors import UserError

    try:
        known = names()
    except PluginError as e:
        raise UserError(str(e)) from None
    if name != "auto" and name not in known:
        raise UserError(f"unknown backend {name!r}; choose from: auto, {', '.join(known)}")
    try:
        return open_backend(name)
    except BackendUnavailable as e:
        raise UserError(first_line(e, typed=False)) from None
