"""Compile, load and launch tensor-map kernels (the sm_90a wgmma GEMM) through cuda-python.

Why not CuPy's RawModule: CuPy compiles for the device's plain arch (sm_90), while wgmma,
setmaxnreg and the TMA forms the kernel uses exist only in the arch-specific target sm_90a; and
a ``CUtensorMap`` is a 128-byte struct passed by value (``__grid_constant__``), which CuPy takes
only as a NumPy record. Here NVRTC (cuda.bindings.nvrtc) builds a cubin for sm_90a, the driver
API (cuda.bindings.driver) loads it into the context CuPy made current, encodes the tensor maps
(cuTensorMapEncodeTiled) with the device pointers of the CuPy arrays, and cuLaunchKernel runs it
on the backend's stream, so CUDA events time it like every other launch.

Kernel parameters are built here as bytes (the tensor map's 128 bytes, a pointer's 8, an int64
scalar's 8) and handed to the driver as a ``void*[]`` of their addresses: that packing is plain
Python and tested without a GPU (tests/test_wgmma.py).
"""

from __future__ import annotations

import ctypes
import struct
from collections.abc import Callable, Sequence
from functools import cache
from typing import Any

import numpy as np
from roofbench.kernels.cuda_impl import (
    TensorMapSpec,
    compile_options,
    cuda_include_dirs,
    load_source,
)


class KernelParams:
    """A ``void*[]`` of argument slots for cuLaunchKernel, each slot a private copy of the
    argument's bytes. Keep the object alive while launches that use it may be enqueued
    (cuLaunchKernel copies the values at the call, so once the call returns is enough)."""

    def __init__(self, values: Sequence[bytes]) -> None:
        self._slots = [ctypes.create_string_buffer(bytes(v), len(v)) for v in values]
        self._array = (ctypes.c_void_p * len(values))(
            *(ctypes.addressof(s) for s in self._slots))

    @property
    def address(self) -> int:
        return ctypes.addressof(self._array)

    def read_back(self, sizes: Sequence[int]) -> list[bytes]:
        """The bytes the driver will read: slot i, ``sizes[i]`` bytes, through the pointer
        array (what a launch sees; used by the tests)."""
        ptrs = ctypes.cast(self.address, ctypes.POINTER(ctypes.c_void_p))
        return [ctypes.string_at(ptrs[i], n) for i, n in enumerate(sizes)]


def pointer_bytes(ptr: int) -> bytes:
    return struct.pack("<Q", int(ptr))


def scalar_bytes(value: np.generic) -> bytes:
    return np.asarray(value).tobytes()


def param_bytes(args: Sequence[Any], pointer: Callable[[str], int],
                maps: dict[str, bytes]) -> list[bytes]:
    """The kernel's parameter values: a buffer name with a tensor map becomes the map, any
    other buffer name its device pointer, a scalar its bytes (the scalar_arg convention)."""
    out: list[bytes] = []
    for a in args:
        if isinstance(a, str):
            out.append(maps[a] if a in maps else pointer_bytes(pointer(a)))
        else:
            out.append(scalar_bytes(a))
    return out


# ------------------------------------------------------------------------------ driver

def _drv() -> Any:
    from cuda.bindings import driver

    return driver


def check(result: Any) -> Any:
    """Unwrap a cuda-python (err, *values) result; RuntimeError naming the error otherwise."""
    drv = _drv()
    err, *rest = result if isinstance(result, tuple) else (result,)
    if err != drv.CUresult.CUDA_SUCCESS:
        _, name = drv.cuGetErrorName(err)
        raise RuntimeError(f"CUDA driver error {name.decode() if name else err}")
    return rest[0] if len(rest) == 1 else tuple(rest)


def tensor_map_enums(spec: TensorMapSpec) -> tuple[Any, Any]:
    """The driver enum members a spec names (data type, swizzle): AttributeError if none."""
    drv = _drv()
    return (getattr(drv.CUtensorMapDataType, f"CU_TENSOR_MAP_DATA_TYPE_{spec.data_type}"),
            getattr(drv.CUtensorMapSwizzle, f"CU_TENSOR_MAP_SWIZZLE_{spec.swizzle}"))


def encode_tensor_map(spec: TensorMapSpec, ptr: int) -> bytes:
    """cuTensorMapEncodeTiled for ``spec`` over the device buffer at ``ptr``: the 128 bytes of
    the CUtensorMap. Out-of-bounds box elements are zero-filled by TMA (FLOAT_OOB_FILL_NONE
    means zeros, not NaN), which is what the kernel's edge handling relies on."""
    drv = _drv()
    dtype, swizzle = tensor_map_enums(spec)
    rank = len(spec.dims)
    tmap = check(drv.cuTensorMapEncodeTiled(
        dtype, rank, int(ptr),
        [drv.cuuint64_t(d) for d in spec.dims],
        [drv.cuuint64_t(s) for s in spec.strides],
        [drv.cuuint32_t(b) for b in spec.box],
        [drv.cuuint32_t(1)] * rank,
        drv.CUtensorMapInterleave.CU_TENSOR_MAP_INTERLEAVE_NONE,
        swizzle,
        drv.CUtensorMapL2promotion.CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
        drv.CUtensorMapFloatOOBfill.CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE))
    return ctypes.string_at(tmap.getPtr(), 128)


def nvrtc_options(arch: str) -> list[bytes]:
    opts = [f"--gpu-architecture={arch}", *compile_options()]
    opts += [f"-I{d}" for d in cuda_include_dirs()]
    return [o.encode() for o in opts]


@cache
def compile_cubin(source: str, arch: str = "sm_90a") -> bytes:
    """NVRTC (cuda.bindings) -> cubin for ``arch``; RuntimeError with the log on failure."""
    from cuda.bindings import nvrtc

    text = load_source(source).encode()
    err, prog = nvrtc.nvrtcCreateProgram(text, source.encode(), 0, [], [])
    if err != nvrtc.nvrtcResult.NVRTC_SUCCESS:
        raise RuntimeError(f"nvrtcCreateProgram failed for {source}: {err}")
    try:
        opts = nvrtc_options(arch)
        (err,) = nvrtc.nvrtcCompileProgram(prog, len(opts), opts)
        if err != nvrtc.nvrtcResult.NVRTC_SUCCESS:
            _, n = nvrtc.nvrtcGetProgramLogSize(prog)
            log = b" " * n
            nvrtc.nvrtcGetProgramLog(prog, log)
            raise RuntimeError(f"NVRTC failed for {source} ({arch}):\n"
                               f"{log.decode(errors='replace')}")
        _, size = nvrtc.nvrtcGetCUBINSize(prog)
        cubin = b" " * size
        (err,) = nvrtc.nvrtcGetCUBIN(prog, cubin)
        if err != nvrtc.nvrtcResult.NVRTC_SUCCESS:
            raise RuntimeError(f"nvrtcGetCUBIN failed for {source}: {err}")
        return cubin
    finally:
        nvrtc.nvrtcDestroyProgram(prog)


class DriverFunction:
    """One kernel of a cubin loaded into the current context, with the resource facts the
    CuPy functions expose (num_regs, shared_size_bytes, local_size_bytes)."""

    def __init__(self, module: Any, name: str, dynamic_smem: int) -> None:
        drv = _drv()
        self.name = name
        self.fn = check(drv.cuModuleGetFunction(module, name.encode()))
        attr = drv.CUfunction_attribute
        if dynamic_smem > 48 * 1024:
            check(drv.cuFuncSetAttribute(
                self.fn, attr.CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, dynamic_smem))
        self.num_regs = int(check(drv.cuFuncGetAttribute(attr.CU_FUNC_ATTRIBUTE_NUM_REGS,
                                                         self.fn)))
        self.shared_size_bytes = int(check(drv.cuFuncGetAttribute(
            attr.CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES, self.fn)))
        self.local_size_bytes = int(check(drv.cuFuncGetAttribute(
            attr.CU_FUNC_ATTRIBUTE_LOCAL_SIZE_BYTES, self.fn)))

    def launch(self, grid: Sequence[int], block: Sequence[int], smem: int, stream_ptr: int,
               params: KernelParams) -> None:
        drv = _drv()
        check(drv.cuLaunchKernel(self.fn, *(int(g) for g in grid), *(int(b) for b in block),
                                 int(smem), drv.CUstream(int(stream_ptr)), params.address, 0))


class TmaModules:
    """Cubins loaded once per source (per backend, i.e. per context)."""

    def __init__(self, arch: str = "sm_90a") -> None:
        self.arch = arch
        self._modules: dict[str, Any] = {}
        self._functions: dict[tuple[str, str, int], DriverFunction] = {}

    def function(self, source: str, name: str, dynamic_smem: int) -> DriverFunction:
        drv = _drv()
        if source not in self._modules:
            check(drv.cuInit(0))
            self._modules[source] = check(drv.cuModuleLoadData(compile_cubin(source,
                                                                             self.arch)))
        key = (source, name, dynamic_smem)
        if key not in self._functions:
            self._functions[key] = DriverFunction(self._modules[source], name, dynamic_smem)
        return self._functions[key]


def tma_unavailable() -> str | None:
    """Why tensor-map kernels cannot be launched here (cuda-python missing), or None."""
    try:
        from cuda.bindings import driver, nvrtc  # noqa: F401
    except Exception as e:  # ImportError, or a broken install
        return (f"the wgmma kernel launches through cuda-python, which is not importable "
                f"({type(e).__name__}: {e}); pip install cuda-bindings")
    return None
