"""Launch tensor-map kernels (the sm_90a wgmma GEMM) from the CuPy backend.

Why not CuPy's RawModule: CuPy compiles for the device's plain arch (sm_90), while wgmma,
setmaxnreg and the TMA forms the kernel uses exist only in the arch-specific target sm_90a; and
a ``CUtensorMap`` is a 128-byte struct passed by value (``__grid_constant__``), which CuPy takes
only as a NumPy record. So the kernel is built by NVRTC for sm_90a and launched through
cuda-python's driver API (roofs.cuda_driver) on the backend's stream; the tensor maps are
encoded here (cuTensorMapEncodeTiled) over the device pointers of the CuPy arrays.

Kernel parameters are bytes (the tensor map's 128, a pointer's 8, an int64 scalar's 8) handed
to the driver as a ``void*[]`` of their addresses: plain Python, tested without a GPU.
"""

from __future__ import annotations

import ctypes
from collections.abc import Callable, Sequence
from typing import Any

from roofbench.kernels.cuda_impl import (
    TensorMapSpec,
    compile_options,
    cuda_include_dirs,
    load_source,
)
from roofbench.roofs.probes.cuda_driver import (
    DriverFunction,
    check,
    driver_module,
    driver_unavailable,
    load_module,
    pointer_bytes,
    scalar_bytes,
)
from roofbench.roofs.probes.cuda_driver import compile_cubin as _compile_text


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


def tensor_map_enums(spec: TensorMapSpec) -> tuple[Any, Any]:
    """The driver enum members a spec names (data type, swizzle): AttributeError if none."""
    drv = driver_module()
    return (getattr(drv.CUtensorMapDataType, f"CU_TENSOR_MAP_DATA_TYPE_{spec.data_type}"),
            getattr(drv.CUtensorMapSwizzle, f"CU_TENSOR_MAP_SWIZZLE_{spec.swizzle}"))


def encode_tensor_map(spec: TensorMapSpec, ptr: int) -> bytes:
    """cuTensorMapEncodeTiled for ``spec`` over the device buffer at ``ptr``: the 128 bytes of
    the CUtensorMap. Out-of-bounds box elements are zero-filled by TMA (FLOAT_OOB_FILL_NONE
    means zeros, not NaN), which the kernel's edge handling relies on."""
    drv = driver_module()
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


def compile_cubin(source: str, arch: str = "sm_90a") -> bytes:
    """NVRTC -> cubin of a kernels/cuda source (includes inlined) for ``arch``."""
    opts = (*compile_options(), *(f"-I{d}" for d in cuda_include_dirs()))
    return _compile_text(load_source(source), source, arch, opts)


class TmaModules:
    """Cubins loaded once per source (per backend, i.e. per context)."""

    def __init__(self, arch: str = "sm_90a") -> None:
        self.arch = arch
        self._modules: dict[str, Any] = {}
        self._functions: dict[tuple[str, str, int], DriverFunction] = {}

    def function(self, source: str, name: str, dynamic_smem: int) -> DriverFunction:
        if source not in self._modules:
            self._modules[source] = load_module(compile_cubin(source, self.arch))
        key = (source, name, dynamic_smem)
        if key not in self._functions:
            self._functions[key] = DriverFunction(self._modules[source], name, dynamic_smem)
        return self._functions[key]


def tma_unavailable() -> str | None:
    """Why tensor-map kernels cannot be launched here (cuda-python missing), or None."""
    why = driver_unavailable()
    return f"the wgmma kernel launches through cuda-python: {why}" if why else None
