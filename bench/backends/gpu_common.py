"""What the CUDA C backends (CuPy, PyCUDA) share: storage types, poison values, launch plans,
the backend facts recorded per case (registers, shared memory, occupancy), and the prepared
case that holds a case's device buffers and launches."""

from __future__ import annotations

import contextlib
import math
from abc import abstractmethod
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

import numpy as np
from roofbench.kernels.arrays import DEVICE_STORAGE, np_dtype
from roofbench.kernels.cuda_impl import (
    NOT_VALIDATED_ON_HARDWARE,
    CudaKernel,
    CudaLibrary,
    DeviceProps,
    LaunchCtx,
    TensorMapSpec,
    scalar_arg,
)
from roofbench.kernels.spec import Buf, Case
from roofbench.kernels.wgmma_gemm import TmaKernel

from roofbench.errors_text import first_line
from roofbench.records import LaunchFacts, OccupancyLevel

from .base import Backend, BackendUnavailable, CaseUnsupported, LaunchListPrepared
from .occupancy_calc import occupancy, smem_for_blocks

# Dynamic shared memory a launch gets without opting in (cudaFuncSetAttribute).
DEFAULT_DYNAMIC_SMEM = 48 * 1024

# Device storage: CuPy/PyCUDA have no bf16/fp8 arrays, so those live as raw 16/8-bit words
# (the kernels reinterpret them); the bits are ml_dtypes' on the host.
STORAGE: dict[str, np.dtype] = DEVICE_STORAGE
# NaN bit patterns used to poison outputs before a validation run.
POISON: dict[str, Any] = {
    "fp64": np.nan, "fp32": np.nan, "fp16": np.nan,
    "bf16": 0x7FC0,  # bfloat16 quiet NaN
    "fp8": 0x7F,  # e4m3fn NaN (S.1111.111)
}


def to_storage(host: np.ndarray, buf: Buf) -> np.ndarray:
    """Host array of the buffer's dtype -> contiguous array of its device storage type."""
    a = np.ascontiguousarray(host, dtype=np_dtype(buf.dtype))
    return a.view(STORAGE[buf.dtype])


def from_storage(raw: np.ndarray, buf: Buf) -> np.ndarray:
    return np.ascontiguousarray(raw).view(np_dtype(buf.dtype)).reshape(buf.shape)


def device_reason(library: str, install: str, load: Callable[[], Any],
                  count: Callable[[Any], int]) -> str | None:
    """None when ``load()`` (the library's import) works and ``count(module)`` finds a CUDA
    device, else why not in one line (``install``: how to get the library)."""
    try:
        module = load()
    except Exception as e:
        return f"{library} is not importable ({first_line(e)}); {install}"
    try:
        n = count(module)
    except Exception as e:
        return f"no CUDA device ({first_line(e)})"
    return None if n > 0 else "no CUDA device (CUDA reports 0 devices)"


@dataclass
class PlannedLaunch:
    """One launch resolved for a device: the implementation, its function and geometry."""

    kernel: str  # the launch's kernel name in the workload
    impl: CudaKernel | CudaLibrary | TmaKernel
    function: str | None
    grid: tuple[int, int, int] | None
    block: tuple[int, int, int] | None
    smem: int
    args: tuple[Any, ...]  # buffer names (str) and device-typed scalars
    # Tensor maps passed before ``args`` (a TMA kernel's; encoded by the launcher).
    tensor_maps: tuple[TensorMapSpec, ...] = ()


# How implementations are launched (their ``launcher``): what every CUDA C backend can, and
# what the CuPy backend adds through cuda-python.
RUNTIME_LAUNCHERS = ("runtime", "library")
ALL_LAUNCHERS = (*RUNTIME_LAUNCHERS, "driver")


def plan_launches(case: Case, dev: DeviceProps, family: str = "cuda",
                  launchers: tuple[str, ...] = RUNTIME_LAUNCHERS) -> list[PlannedLaunch]:
    """Resolve every launch of ``case`` against its CUDA table (a per-arch choice resolved for
    this device); CaseUnsupported with the reason when a kernel lacks the dtype or the device
    lacks the compute capability, or when the caller has none of the implementation's
    ``launcher`` (the CuPy backend adds "driver": tensor-map kernels through cuda-python)."""
    table = case.variant.impls.get(family) or {}
    ctx = LaunchCtx(case.size, case.dtype, dev)
    out = []
    for la in case.launches():
        entry = table.get(la.kernel)
        if entry is None:
            raise CaseUnsupported(f"no {family} kernel for launch {la.kernel}")
        impl = entry.resolve(dev.cc)
        why = impl.unsupported(case.dtype, dev.cc)
        if why:
            raise CaseUnsupported(why)
        if impl.launcher not in launchers:
            raise CaseUnsupported(f"{impl.name(case.dtype)} (TMA tensor maps) launches through "
                                  "the cuda backend (CuPy + cuda-python) only")
        args = tuple(a if isinstance(a, str) else scalar_arg(a) for a in la.args)
        if impl.launcher == "library":
            out.append(PlannedLaunch(la.kernel, impl, None, None, None, 0, args))
            continue
        try:
            grid, block, smem = impl.grid(ctx), impl.block(ctx), impl.smem(ctx)
        except ValueError as e:
            raise CaseUnsupported(str(e)) from None
        out.append(PlannedLaunch(la.kernel, impl, impl.name(case.dtype), grid, block, smem,
                                 args, impl.tensor_maps(ctx)))
    return out


def launch_facts(pl: PlannedLaunch, registers: int | None, static_smem: int | None,
                 local_bytes: int | None, cc: tuple[int, int]) -> LaunchFacts:
    """How one planned launch runs: geometry, resources, the occupancy they give, and whether
    its function has run on hardware before (NOT_VALIDATED_ON_HARDWARE)."""
    arch = f"sm_{cc[0]}{cc[1]}"
    if pl.function is None or pl.grid is None or pl.block is None:  # a library call
        return LaunchFacts(library=getattr(pl.impl, "op", "library"), arch=arch)
    threads = pl.block[0] * pl.block[1] * pl.block[2]
    smem = (static_smem or 0) + pl.smem
    return LaunchFacts(
        function=pl.function, arch=arch, grid=list(pl.grid), block=list(pl.block),
        dynamic_smem=pl.smem, static_smem=static_smem, registers=registers,
        local_bytes=local_bytes,
        occupancy=occupancy(threads, registers, smem, cc) if registers is not None else None,
        validated_on_hardware=not any(pl.function.startswith(p)
                                      for p in NOT_VALIDATED_ON_HARDWARE))


def function_facts(pl: PlannedLaunch, fn: Any, cc: tuple[int, int]) -> LaunchFacts:
    """launch_facts of a compiled function: CuPy's RawKernel and PyCUDA's Function name their
    resources alike (num_regs, shared_size_bytes, local_size_bytes)."""
    return launch_facts(pl, fn.num_regs, fn.shared_size_bytes, fn.local_size_bytes, cc)


class CudaCPrepared(LaunchListPrepared):
    """A case of a CUDA C backend (CuPy, PyCUDA): its buffers on the device in their storage
    types, one ready call per planned launch, and each launch's facts.

    A subclass says how its library allocates, fills and launches (``_upload``, ``_empty``,
    ``_fill``, ``_call``) and, when its calls need it, which stream they enter (``_on_stream``).
    """

    compiler = ""  # recorded in extra()

    def __init__(self, backend: Any, case: Case, inputs: dict[str, np.ndarray]) -> None:
        plans = backend.plan(case)  # refuses before allocating
        self.case, self.backend = case, backend
        self.bufs = case.buffers()
        self.arrays: dict[str, Any] = {}
        with self._on_stream():
            for name, buf in self.bufs.items():
                if buf.role == "input":
                    self.arrays[name] = self._input(inputs[name], buf)
                else:
                    self.arrays[name] = self._empty(buf.shape, STORAGE[buf.dtype])
        self.facts: list[LaunchFacts] = []
        self._calls: list[Callable[[], None]] = [self._call(pl) for pl in plans]

    def _on_stream(self) -> contextlib.AbstractContextManager[Any]:
        return contextlib.nullcontext()

    def _input(self, x: Any, buf: Buf) -> Any:
        """One input on the device: host arrays are uploaded in their storage type."""
        return self._upload(to_storage(x, buf))

    @abstractmethod
    def _upload(self, host: np.ndarray) -> Any: ...

    @abstractmethod
    def _empty(self, shape: tuple[int, ...], dtype: np.dtype) -> Any: ...

    @abstractmethod
    def _fill(self, array: Any, dtype: str) -> None:
        """Fill with the NaN pattern of ``dtype`` (POISON) in its storage type."""

    @staticmethod
    def poison_value(dtype: str) -> Any:
        """The NaN pattern of ``dtype`` (POISON) as a scalar of its storage type."""
        return STORAGE[dtype].type(POISON[dtype])

    @abstractmethod
    def _call(self, pl: PlannedLaunch) -> Callable[[], None]:
        """The ready call of one launch; appends the launch's facts to ``self.facts``."""

    @abstractmethod
    def _opt_in(self, fn: Any, smem: int) -> None:
        """Let ``fn`` take ``smem`` bytes of dynamic shared memory (past the default 48 KB)."""

    def _runtime_function(self, pl: PlannedLaunch) -> Any:
        """The compiled function of a runtime-API launch, opted in to the dynamic shared
        memory an occupancy level asks for; its facts appended to ``self.facts``."""
        assert pl.function is not None and not isinstance(pl.impl, CudaLibrary)
        fn = self.backend.function(pl.impl.source, pl.function)
        if pl.smem > DEFAULT_DYNAMIC_SMEM:
            self._opt_in(fn, pl.smem)
        self.facts.append(function_facts(pl, fn, self.backend.props.cc))
        return fn

    def poison(self) -> None:
        with self._on_stream():
            for name, buf in self.bufs.items():
                if buf.role != "input":
                    self._fill(self.arrays[name], buf.dtype)

    def outputs(self) -> dict[str, np.ndarray]:
        self.backend.stream.synchronize()
        return {n: from_storage(self.arrays[n].get(), b) for n, b in self.bufs.items()
                if b.role == "output"}

    def device_outputs(self) -> dict[str, Any]:
        return {n: self.arrays[n] for n, b in self.bufs.items() if b.role == "output"}

    def extra(self) -> dict[str, Any]:
        return {"arch": self.backend.props.arch, "compiler": self.compiler}

    def launch_facts(self) -> list[LaunchFacts]:
        return list(self.facts)


class CudaCBackend(Backend):
    """What the CUDA C backends share beyond their prepared cases: compiled functions by
    source, the device's name and L2, and refusing before allocating whatever ``plan`` refuses.
    A subclass sets ``props`` and provides ``module(source)``; ``_reason`` (None or why not)
    says whether it can run here, and its ``__init__`` refuses with that reason."""

    family = "cuda"
    kind = "gpu"
    exact_kernel_names = True
    props: DeviceProps

    @staticmethod
    def _reason() -> str | None:
        return None

    @classmethod
    def unavailable_reason(cls) -> str | None:
        return cls._reason()

    def __init__(self, device: int = 0) -> None:
        why = self.unavailable_reason()
        if why:
            raise BackendUnavailable(why)
        self.index = device
        self._modules: dict[str, Any] = {}  # compiled sources, by name
        self._flush_buf: Any = None  # the last-level-cache flush buffer, made on first use

    def module(self, source: str) -> Any:
        raise NotImplementedError

    def function(self, source: str, name: str) -> Any:
        return self.module(source).get_function(name)

    def plan(self, case: Case) -> list[PlannedLaunch]:
        return self.limit_residency(case, plan_launches(case, self.props))

    # -- occupancy scans --------------------------------------------------------------------
    def _blocks_per_sm(self, pl: PlannedLaunch) -> tuple[int, int]:
        """(blocks of ``pl`` an SM holds as planned, its static shared memory), from the
        compiled function's registers and shared memory."""
        if not isinstance(pl.impl, CudaKernel) or pl.function is None:
            raise CaseUnsupported(f"{pl.kernel}: not a CUDA C kernel of its own")
        fn = self.function(pl.impl.source, pl.function)
        threads = math.prod(pl.block or (1,))
        occ = occupancy(threads, fn.num_regs, fn.shared_size_bytes + pl.smem, self.props.cc)
        return occ.blocks_per_sm, fn.shared_size_bytes

    def occupancy_levels(self, case: Case) -> list[OccupancyLevel]:
        """Resident blocks per SM 1 .. the most any of its kernels reaches as planned (those
        that shared memory can set exactly); a vendor-library or tensor-map launch sizes its
        own resources, so it cannot be scanned."""
        plans = plan_launches(case, self.props, launchers=(*RUNTIME_LAUNCHERS, "driver"))
        fixed = [pl.kernel for pl in plans if pl.impl.launcher != "runtime"]
        if fixed:
            raise CaseUnsupported(f"{case.key}: launch {', '.join(fixed)} is a library or "
                                  "tensor-map call that sizes its own resources, so its "
                                  "occupancy cannot be limited")
        held = [self._blocks_per_sm(pl) for pl in plans]
        top = max(h for h, _ in held)
        optin = self.props.smem_per_block_optin
        # The counts shared memory can set exactly for every kernel that would hold more.
        return [OccupancyLevel("blocks_per_sm", b, top) for b in range(1, top + 1)
                if all(b >= h or smem_for_blocks(b, st, self.props.cc, optin) is not None
                       for h, st in held)]

    def limit_residency(self, case: Case, plans: list[PlannedLaunch]) -> list[PlannedLaunch]:
        """``plans`` at the case's occupancy level: each kernel that would hold more blocks
        per SM gets the dynamic shared memory that lets exactly that many reside, and a
        grid-stride kernel a grid of at most that many blocks per SM (one wave)."""
        if case.occupancy_level is None:
            return plans
        want = case.occupancy_level.value
        out = []
        for pl in plans:
            if pl.impl.launcher != "runtime":
                out.append(pl)
                continue
            held, static = self._blocks_per_sm(pl)
            if want >= held:
                out.append(pl)
                continue
            dyn = smem_for_blocks(want, static, self.props.cc, self.props.smem_per_block_optin)
            if dyn is None:
                raise CaseUnsupported(f"{pl.function}: {want} block(s) per SM needs more "
                                      "shared memory per block than the device allows")
            grid = pl.grid
            if getattr(pl.impl, "grid_stride", False) and grid and grid[1] == grid[2] == 1:
                grid = (min(grid[0], want * self.props.sm_count), 1, 1)
            out.append(replace(pl, smem=max(dyn, pl.smem), grid=grid))
        return out

    def has_kernel(self, case: Case) -> bool:
        table = case.variant.impls.get(self.family) or {}
        entries = [table.get(la.kernel) for la in case.launches()]
        return all(e is None or case.dtype in e.resolve(self.props.cc).dtypes for e in entries)

    def isolated(self, case: Case) -> bool:
        try:
            return any(getattr(pl.impl, "isolated", False) for pl in self.plan(case))
        except CaseUnsupported:
            return False

    def warm(self, case: Case) -> None:
        """Compile (or find in the cache) every CUDA C module the case launches."""
        for pl in self.plan(case):
            if pl.impl.launcher == "runtime":
                assert pl.function is not None  # only a library call has none
                self.function(pl.impl.source, pl.function)

    def device_name(self) -> str:
        return self.props.name

    def last_level_cache(self) -> int:
        return self.props.l2_bytes or (40 << 20)

    def supports(self, case: Case) -> str | None:
        """Also refuse, before allocating, what this device cannot run (dtype, arch)."""
        why = super().supports(case)
        if why is None:
            try:
                self.plan(case)
            except CaseUnsupported as e:
                return str(e)
        return why
