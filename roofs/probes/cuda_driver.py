"""Kernels built for an arch-specific target (sm_90a: wgmma, setmaxnreg, TMA) and launched
through cuda-python's driver API, beside CuPy.

CuPy's RawModule compiles for the device's plain arch (sm_90), where those instructions do not
exist, and passes by-value structs (a 128-byte CUtensorMap) only as NumPy records. Here NVRTC
(cuda.bindings.nvrtc) builds a cubin for the exact target, the driver (cuda.bindings.driver)
loads it into the context CuPy made current, and cuLaunchKernel runs it on a CuPy stream, so
CUDA events time it like every other launch. cuda-python is imported lazily: importing this
module needs nothing. Used by the probes (roofs.probes.gpu_device) and the CuPy backend
(bench.backends.tma_launch); the argument packing is plain Python, tested without a GPU.
"""

from __future__ import annotations

import ctypes
import struct
from collections.abc import Sequence
from functools import cache
from typing import Any

import numpy as np


class KernelParams:
    """A ``void*[]`` of argument slots for cuLaunchKernel, each slot a private copy of the
    argument's bytes (cuLaunchKernel copies the values during the call)."""

    def __init__(self, values: Sequence[bytes]) -> None:
        self._slots = [ctypes.create_string_buffer(bytes(v), len(v)) for v in values]
        # what each slot holds: the driver reads its parameter's width, whatever is there
        self.sizes = tuple(len(v) for v in values)
        self._array = (ctypes.c_void_p * max(1, len(values)))(
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


def arg_bytes(arg: Any) -> bytes:
    """A launch argument as bytes: a NumPy scalar as itself, a device array (CuPy's
    ``.data.ptr``) or a raw int as a 64-bit pointer, bytes as given (a struct)."""
    if isinstance(arg, (bytes, bytearray)):
        return bytes(arg)
    if isinstance(arg, np.generic):
        return scalar_bytes(arg)
    data = getattr(arg, "data", None)
    if data is not None and hasattr(data, "ptr"):
        return pointer_bytes(data.ptr)
    if isinstance(arg, int):
        return pointer_bytes(arg)
    raise TypeError(f"cannot pass {type(arg).__name__} to a driver launch "
                    "(NumPy scalars, device arrays, pointers or bytes)")


def driver_module() -> Any:
    """cuda-python's driver module (``cuda.bindings.driver``), imported on first use; the
    one place it is taken from (the CPU emulation's tests hand a stand-in here)."""
    from cuda.bindings import driver

    return driver


def check(result: Any) -> Any:
    """Unwrap a cuda-python (err, *values) result; RuntimeError naming the error otherwise."""
    drv = driver_module()
    err, *rest = result if isinstance(result, tuple) else (result,)
    if err != drv.CUresult.CUDA_SUCCESS:
        _, name = drv.cuGetErrorName(err)
        raise RuntimeError(f"CUDA driver error {name.decode() if name else err}")
    if not rest:
        return None
    return rest[0] if len(rest) == 1 else tuple(rest)


def compile_cubin(text: str, name: str, arch: str, options: tuple[str, ...] = ()) -> bytes:
    """NVRTC (cuda.bindings) -> cubin of ``text`` for ``arch`` (e.g. sm_90a); RuntimeError with
    the compiler log on failure. Headers of kernels/cuda that ``text`` includes (the probes
    share hopper_ops.cuh with the kernels) are inlined first: NVRTC gets no include path. With
    ROOFBENCH_BOUNDED_WAIT=1 it is the check build (cuda_impl.bounded_wait_options)."""
    from roofbench.kernels.cuda_impl import bounded_wait_options, expand_includes

    return _compile_cubin(expand_includes(text), name, arch,
                          (*options, *bounded_wait_options()))


@cache
def _compile_cubin(text: str, name: str, arch: str, options: tuple[str, ...]) -> bytes:
    from cuda.bindings import nvrtc

    err, prog = nvrtc.nvrtcCreateProgram(text.encode(), name.encode(), 0, [], [])
    if err != nvrtc.nvrtcResult.NVRTC_SUCCESS:
        raise RuntimeError(f"nvrtcCreateProgram failed for {name}: {err}")
    try:
        opts = [o.encode() for o in (f"--gpu-architecture={arch}", *options)]
        (err,) = nvrtc.nvrtcCompileProgram(prog, len(opts), opts)
        if err != nvrtc.nvrtcResult.NVRTC_SUCCESS:
            _, n = nvrtc.nvrtcGetProgramLogSize(prog)
            # A buffer of its own: b" " * 1 is CPython's shared one-byte object, and NVRTC
            # writing the empty log's NUL into it turns every b" " of the process into b"\0".
            log = bytearray(n)
            nvrtc.nvrtcGetProgramLog(prog, log)
            text_log = bytes(log).rstrip(b"\0").decode(errors="replace")
            raise RuntimeError(f"NVRTC failed for {name} ({arch}):\n{text_log}")
        _, size = nvrtc.nvrtcGetCUBINSize(prog)
        cubin = bytearray(size)
        (err,) = nvrtc.nvrtcGetCUBIN(prog, cubin)
        if err != nvrtc.nvrtcResult.NVRTC_SUCCESS:
            raise RuntimeError(f"nvrtcGetCUBIN failed for {name}: {err}")
        return bytes(cubin)
    finally:
        nvrtc.nvrtcDestroyProgram(prog)


class ParamMismatch(TypeError):
    """A launch's parameter array does not hold what the kernel's parameters take."""


# cuFuncGetParamInfo asked past this many parameters means a driver answering every index
MAX_PARAMS = 1024


def param_sizes(fn: Any) -> tuple[int, ...] | None:
    """The byte size of each parameter of ``fn`` as its compiled image lays them out
    (cuFuncGetParamInfo, CUDA 12.4+), or None where the driver cannot say (older bindings or
    driver, or a kernel without parameters)."""
    drv = driver_module()
    info = getattr(drv, "cuFuncGetParamInfo", None)
    if info is None:
        return None
    sizes: list[int] = []
    for i in range(MAX_PARAMS):
        try:
            err, _offset, size = info(fn, i)
        except Exception:  # a binding whose driver lacks the call
            return None
        if err != drv.CUresult.CUDA_SUCCESS:
            break
        sizes.append(int(size))
    return tuple(sizes) or None


def check_params(name: str, want: tuple[int, ...] | None, got: tuple[int, ...]) -> None:
    """ParamMismatch unless the slots have the widths the kernel's parameters take: a 4-byte
    int in the slot of a ``long long`` leaves the driver reading 4 bytes of whatever follows
    it (a kernel on garbage), a missing slot a garbage pointer. ``want`` None: unknown."""
    if want is None or want == got:
        return
    if len(got) != len(want):
        raise ParamMismatch(f"{name}: {len(got)} kernel parameters handed over for "
                            f"{len(want)} (sizes {list(got)}, the kernel takes {list(want)})")
    i = next(i for i, (g, w) in enumerate(zip(got, want, strict=True)) if g != w)
    raise ParamMismatch(f"{name}: argument {i} is handed over as {got[i]} bytes for a "
                        f"parameter of {want[i]} bytes (the driver reads the parameter's "
                        "width: a narrower value leaves bytes of garbage)")


class DriverFunction:
    """One kernel of a loaded cubin, with the resource facts CuPy's functions expose
    (num_regs, shared_size_bytes, local_size_bytes), and its parameters' sizes from the
    image (``param_sizes``), which every launch's parameter array is checked against."""

    def __init__(self, module: Any, name: str, dynamic_smem: int = 0) -> None:
        drv = driver_module()
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
        self.param_sizes = param_sizes(self.fn)
        self._checked: KernelParams | None = None  # the last array found right

    def launch(self, grid: Sequence[int], block: Sequence[int], smem: int, stream_ptr: int,
               params: KernelParams) -> None:
        if params is not self._checked:  # once per array: a timed loop relaunches one
            check_params(self.name, self.param_sizes, params.sizes)
            self._checked = params
        drv = driver_module()
        g = [int(x) for x in grid] + [1] * (3 - len(grid))
        b = [int(x) for x in block] + [1] * (3 - len(block))
        check(drv.cuLaunchKernel(self.fn, *g, *b, int(smem), drv.CUstream(int(stream_ptr)),
                                 params.address, 0))


def load_module(cubin: bytes) -> Any:
    """Load a cubin into the current context (the one CuPy made current)."""
    drv = driver_module()
    check(drv.cuInit(0))
    return check(drv.cuModuleLoadData(cubin))


def driver_unavailable() -> str | None:
    """Why driver launches cannot be made here (cuda-python missing), or None."""
    try:
        from cuda.bindings import driver, nvrtc  # noqa: F401
    except Exception as e:  # ImportError, or a broken install
        return (f"cuda-python is not importable ({type(e).__name__}: {e}); it builds and "
                "launches the sm_90a kernels: pip install cuda-bindings")
    return None
