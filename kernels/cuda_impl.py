"""How a launch of a workload runs as hand-written CUDA C: one description for CuPy and PyCUDA.

The ``.cu`` sources in ``kernels/cuda/`` follow three conventions (see ``cuda/common.cuh``):
every kernel is an ``extern "C"`` wrapper named ``<prefix>_<dtype>`` around a template (so NVRTC
and nvcc users look up the same plain names, no name mangling); integer scalars are ``long
long`` and floating scalars ``float``; math is FP32 (FP64 for fp64) whatever the storage type.

A :class:`CudaKernel` says which source and function run a launch, its grid/block/shared memory
as a function of the case and the device, and the compute capability it needs. A
:class:`CudaLibrary` is a vendor-library call (cuBLAS through ``cupy.matmul``) in the same table.
A TMA kernel (wgmma_gemm.TmaKernel: built for sm_90a, fed by :class:`TensorMapSpec` tensor
maps, launched through cuda-python) sits in the same tables, and :class:`ByArch` picks an
implementation per compute capability (the ``tensor`` GEMM: wgmma on 9.0, mma.sync elsewhere).
Each says how a backend launches it (``launcher``). NOT_VALIDATED_ON_HARDWARE lists the
kernels that have not run on a GPU yet.

This module is the generic machinery only (descriptors, launch-shape helpers, sources and
compile options); the wgmma GEMM's model is wgmma_gemm.py, and each workload's table of
launches (``CUDA``) lives in its own module, kernels/<workload>.py. It imports nothing from
CuPy or PyCUDA: the workload modules use it at import time.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Any, ClassVar, Literal

import numpy as np

from .arrays import itemsize
from .spec import Size

CUDA_DIR = Path(__file__).resolve().parent / "cuda"
ALL_DTYPES = ("fp64", "fp32", "fp16", "bf16", "fp8")
THREADS = 256  # default block size of the elementwise and row-wise kernels


@dataclass(frozen=True)
class DeviceProps:
    """The device facts a launch configuration depends on."""

    cc: tuple[int, int]
    sm_count: int
    max_threads_per_sm: int = 2048
    regs_per_sm: int = 65536
    smem_per_sm: int = 228 * 1024
    smem_per_block_optin: int = 227 * 1024
    l2_bytes: int = 50 << 20
    name: str = ""

    @property
    def arch(self) -> str:
        return f"sm_{self.cc[0]}{self.cc[1]}"


@dataclass(frozen=True)
class LaunchCtx:
    size: Size
    dtype: str
    dev: DeviceProps


Dim3 = tuple[int, int, int]


class PerDtype:
    """A kernel family with one function per dtype: ``<prefix>_<dtype>``."""

    prefix: str

    def name(self, dtype: str) -> str:
        return f"{self.prefix}_{dtype}"


def no_dtype_kernel(name: str, dtype: str, dtypes: tuple[str, ...]) -> str:
    """The reason a kernel family has no function for ``dtype``."""
    return f"{name}: no {dtype} kernel (has {', '.join(dtypes)})"


@dataclass(frozen=True)
class CudaKernel(PerDtype):
    """One launch as a CUDA C kernel of ``kernels/cuda/<source>``."""

    # How a backend launches it: "runtime" (compiled for the device's arch and launched by
    # CuPy or PyCUDA), "driver" (TmaKernel: arch-specific cubin through cuda-python), or
    # "library" (CudaLibrary: a vendor call). Each implementation says which; no backend
    # tells them apart by type (the Literal types let a type checker narrow by it).
    launcher: ClassVar[Literal["runtime"]] = "runtime"

    source: str
    prefix: str  # function name is f"{prefix}_{dtype}"
    grid: Callable[[LaunchCtx], Dim3]
    block: Callable[[LaunchCtx], Dim3]
    smem: Callable[[LaunchCtx], int] = lambda ctx: 0  # dynamic shared memory (bytes)
    dtypes: tuple[str, ...] = ALL_DTYPES
    min_cc: dict[str, tuple[int, int]] = field(default_factory=dict)  # per dtype, default 8.0
    note: str = ""
    # Run its cases in a process of their own (bench/suite/isolation.py): a kernel that can
    # hang or fault stickily costs one case, never the run.
    isolated: bool = False
    # Correct at any grid (a grid-stride loop): an occupancy scan may launch fewer blocks.
    grid_stride: bool = False

    def resolve(self, cc: tuple[int, int]) -> CudaKernel:
        return self

    def tensor_maps(self, ctx: LaunchCtx) -> tuple[TensorMapSpec, ...]:
        return ()

    def unsupported(self, dtype: str, cc: tuple[int, int]) -> str | None:
        """Why this kernel cannot run ``dtype`` on a device of compute capability ``cc``."""
        if dtype not in self.dtypes:
            return no_dtype_kernel(self.name(dtype), dtype, self.dtypes)
        need = self.min_cc.get(dtype, (8, 0))
        if tuple(cc) < need:
            return (f"{self.name(dtype)} needs compute capability {need[0]}.{need[1]}+, "
                    f"device has {cc[0]}.{cc[1]}")
        return None


@dataclass(frozen=True)
class CudaLibrary:
    """A vendor-library call standing in for a launch (the baseline in the same table)."""

    op: str  # "matmul" (cuBLAS via CuPy), "sdpa" / "sdpa_causal" (torch)
    dtypes: tuple[str, ...] = ("fp64", "fp32", "fp16")
    note: str = ""
    module: str = ""  # a Python package the call needs beyond CuPy (e.g. "torch")
    launcher: ClassVar[Literal["library"]] = "library"
    isolated: ClassVar[bool] = False

    def resolve(self, cc: tuple[int, int]) -> CudaLibrary:
        return self

    def unsupported(self, dtype: str, cc: tuple[int, int]) -> str | None:
        if dtype not in self.dtypes:
            return f"library {self.op} is not run for {dtype} (runs {', '.join(self.dtypes)})"
        if self.module:
            import importlib.util

            if importlib.util.find_spec(self.module) is None:
                return f"library {self.op} needs {self.module}, which is not importable here"
            if _cpu_build(self.module):
                return (f"library {self.op} needs {self.module} built for CUDA; this one is "
                        "a CPU build")
        return None


def _cpu_build(package: str) -> bool:
    """Whether an installed package is a CPU-only build (torch's `+cpu` local version), read
    from its metadata: importing torch to ask it costs seconds."""
    from importlib import metadata

    try:
        return metadata.version(package).endswith("+cpu")
    except metadata.PackageNotFoundError:
        return False


# ------------------------------------------------------------------------------ sources

_INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"\s*$', re.M)


def expand_includes(text: str) -> str:
    """``text`` with every ``#include "x"`` of a header in kernels/cuda expanded inline (each
    once: the headers use #pragma once); other includes are left as they are."""
    seen: set[str] = set()

    def sub(m: re.Match[str]) -> str:
        fname = m.group(1)
        if not (CUDA_DIR / fname).is_file():
            return m.group(0)
        if fname in seen:
            return ""
        seen.add(fname)
        return _INCLUDE.sub(sub, (CUDA_DIR / fname).read_text())

    return _INCLUDE.sub(sub, text)


@cache
def load_source(name: str) -> str:
    """The source text with local ``#include "..."`` expanded inline, so that a compiler cache
    keyed on the text (CuPy's) sees header changes, and no include path to our folder is needed.
    """
    return expand_includes(f'#include "{name}"\n')


def sources() -> list[str]:
    return sorted(p.name for p in CUDA_DIR.glob("*.cu"))


def compile_options() -> tuple[str, ...]:
    """Options both NVRTC and nvcc accept (plus an -I for the CUDA headers, added by callers)."""
    return ("-std=c++17",)


BOUNDED_WAIT_ENV = "ROOFBENCH_BOUNDED_WAIT"


def bounded_wait_options() -> tuple[str, ...]:
    """The check build of the sm_90a kernels (the wgmma GEMM and probe): with
    ROOFBENCH_BOUNDED_WAIT=1 in the environment every mbarrier wait traps after
    RB_WAIT_LIMIT_CYCLES with a message naming the barrier and phase (kernels/cuda/hopper_ops.cuh)
    instead of hanging. Left out of timed runs: the message's printf gives the kernels a stack
    frame and local stores that the inspected release build does not have."""
    import os

    return ("-DRB_BOUNDED_WAIT",) if os.environ.get(BOUNDED_WAIT_ENV, "0") not in ("", "0") \
        else ()


def cuda_include_dirs() -> list[str]:
    """Directories holding cuda_fp16.h / cuda_fp8.h: NVRTC does not bundle them.

    The CUDA pip wheels (found with cuda-pathfinder), then CUDA_PATH / CUDA_HOME, then
    /usr/local/cuda.
    """
    import os

    found: list[str] = []
    try:
        from cuda.pathfinder import find_nvidia_header_directory

        d = find_nvidia_header_directory("cudart")
        if d:
            found.append(str(d))
    except Exception:  # cuda-pathfinder absent or no wheel headers
        pass
    import sys

    for sp in (p for p in sys.path if p.endswith("site-packages")):
        # CUDA 13 wheels (nvidia/cu13/include) and CUDA 12 wheels (nvidia/cuda_runtime/include)
        found += [str(Path(sp) / "nvidia" / "cu13" / "include"),
                  str(Path(sp) / "nvidia" / "cuda_runtime" / "include")]
    for env in ("CUDA_PATH", "CUDA_HOME"):
        if os.environ.get(env):
            found.append(str(Path(os.environ[env]) / "include"))
    found.append("/usr/local/cuda/include")
    out: list[str] = []
    for d in found:
        if (Path(d) / "cuda_fp16.h").is_file() and d not in out:
            out.append(d)
    return out


def scalar_arg(value: int | float) -> np.generic:
    """The device type of a scalar argument (see the conventions above)."""
    if isinstance(value, (bool, np.bool_)):
        raise TypeError("boolean kernel arguments are not part of the convention")
    if isinstance(value, (int, np.integer)):
        return np.int64(value)
    return np.float32(value)


# ------------------------------------------------------------------------ launch configs

def ceil_div(a: int, b: int) -> int:
    return -(-int(a) // int(b))


def pack_values(dtype: str) -> int:
    """Values per 16-byte pack."""
    return 16 // itemsize(dtype)


def one_wave(ctx: LaunchCtx, threads: int = THREADS) -> int:
    """Blocks of ``threads`` that fit on the device at once: a grid-stride kernel's grid."""
    return ctx.dev.sm_count * max(ctx.dev.max_threads_per_sm // threads, 1)


def grid_stride(elems: Callable[[Size], int], vector: bool) -> Callable[[LaunchCtx], Dim3]:
    """Enough blocks to give every thread one item, at most one full wave of the device."""

    def grid(ctx: LaunchCtx) -> Dim3:
        items = ceil_div(elems(ctx.size), pack_values(ctx.dtype) if vector else 1)
        return (max(1, min(ceil_div(items, THREADS), one_wave(ctx))), 1, 1)

    return grid


def block1d(threads: int = THREADS) -> Callable[[LaunchCtx], Dim3]:
    return lambda ctx: (threads, 1, 1)


def per_row(ctx: LaunchCtx) -> Dim3:
    return (int(ctx.size[0]), 1, 1)


def n_elems(size: Size) -> int:
    return int(math.prod(size))


def n_rows(size: Size) -> int:
    return int(size[0])


def elementwise(source: str, prefix: str, elems: Callable[[Size], int] = n_elems,
                vector: bool = True, note: str = "") -> CudaKernel:
    """A grid-stride kernel over ``elems(size)`` items, THREADS per block (vector: one 16-byte
    pack per item)."""
    return CudaKernel(source, prefix, grid=grid_stride(elems, vector), block=block1d(),
                      note=note, grid_stride=True)


@dataclass(frozen=True)
class TensorMapSpec:
    """The arguments of cuTensorMapEncodeTiled for one operand, as plain data (tested without a
    GPU; the backend passes them to the driver). Dimensions and boxes innermost first."""

    buffer: str  # the workload buffer it describes
    data_type: str  # CUtensorMapDataType member suffix: FLOAT16, BFLOAT16, UINT8
    dims: tuple[int, int]
    strides: tuple[int]  # bytes between rows (rank - 1 strides)
    box: tuple[int, int]
    swizzle: str  # CUtensorMapSwizzle member suffix: 128B, NONE

    @property
    def box_bytes(self) -> int:
        return self.box[0] * self.box[1] * (1 if self.data_type == "UINT8" else 2)



@dataclass(frozen=True)
class NotRunHere:
    """What a per-arch choice resolves to on a device it has no implementation for."""

    reason: str
    launcher: ClassVar[Literal["none"]] = "none"
    isolated: ClassVar[bool] = False

    def resolve(self, cc: tuple[int, int]) -> NotRunHere:
        return self

    def unsupported(self, dtype: str, cc: tuple[int, int]) -> str | None:
        return self.reason


@dataclass(frozen=True)
class ByArch:
    """One launch implemented per compute capability: ``exact`` maps a capability to its
    implementation; any other device gets ``default`` (an implementation, or the reason it is
    not run there)."""

    exact: tuple[tuple[tuple[int, int], Any], ...]
    default: Any

    def pick(self, cc: tuple[int, int]) -> Any:
        for want, impl in self.exact:
            if tuple(cc) == want:
                return impl
        return self.default

    def resolve(self, cc: tuple[int, int]) -> Any:
        """The implementation for capability ``cc`` (a reason becomes NotRunHere)."""
        impl = self.pick(cc)
        return NotRunHere(impl) if isinstance(impl, str) else impl

    def unsupported(self, dtype: str, cc: tuple[int, int]) -> str | None:
        """Why ``dtype`` cannot run on a device of capability ``cc`` (as CudaKernel's)."""
        return self.resolve(cc).unsupported(dtype, cc)

    def choices(self) -> list[Any]:
        """Every implementation it may resolve to (reasons left out)."""
        out = [impl for _, impl in self.exact] + [self.default]
        return [i for i in out if not isinstance(i, str)]


# Kernel functions (name prefixes, as recorded per launch in results.json) that have not yet
# run on hardware: compiled and inspected (SASS, registers, CPU model of the schedule) only.
# The report marks the cases that launched them; remove an entry once a GPU run validated it.
NOT_VALIDATED_ON_HARDWARE: frozenset[str] = frozenset({
    "gemm_wgmma",
    "attn_scores", "attn_softmax", "attn_pv", "attn_flash",  # kernels/cuda/attention.cu
    "gemv_warp",  # kernels/cuda/gemv.cu
})
