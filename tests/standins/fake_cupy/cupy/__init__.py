"""A stand-in for CuPy, for tests only: host memory, and RawModule kernels that run through
the CPU emulation of tests/standins/cuda_emu (shared libraries in $RB_EMU_LIBDIR). It lets the real
CupyBackend, runner and CLI run end to end on a machine without a GPU. It implements only
the calls roofbench's CuPy backend makes; never put it on a real GPU machine's path."""

from __future__ import annotations

import time
from types import SimpleNamespace
from typing import Any

import numpy as np
from emu_launch import EmuFunction, find_function

__version__ = "0.0-fake-emulated"
FAKE = True


# Every copy between host and device, as (direction, elements): the tests assert that a GPU
# case moves only scalars and small tables to the host ("d2h") and no full array to the device
# ("h2d"). Real CuPy refuses host arrays in device operations; so does this one (TypeError).
TRANSFERS: list[tuple[str, int]] = []


def transfers() -> list[tuple[str, int]]:
    return list(TRANSFERS)


def clear_transfers() -> None:
    TRANSFERS.clear()


class _Ptr:
    def __init__(self, ptr: int) -> None:
        self.ptr = ptr

    def copy_from_device_async(self, src: _Ptr, size: int, stream: Any = None) -> None:
        """MemoryPointer's device-to-device copy (the probes' library copy, gpu_device.memcpy):
        host memory here, copied at once."""
        import ctypes

        _check_sticky()
        ctypes.memmove(self.ptr, src.ptr, size)


def _dev(x: Any) -> Any:
    """A result of a device operation: numpy arrays become device arrays (no copy)."""
    if isinstance(x, tuple):
        return tuple(_dev(v) for v in x)
    if isinstance(x, np.ndarray) and not isinstance(x, ndarray):
        return x.view(ndarray)
    return x


def _host(x: Any) -> Any:
    return x.view(np.ndarray) if isinstance(x, ndarray) else x


class ndarray(np.ndarray):  # noqa: N801 - CuPy's name
    @property
    def data(self) -> _Ptr:  # type: ignore[override]
        return _Ptr(self.ctypes.data)

    def get(self) -> np.ndarray:
        TRANSFERS.append(("d2h", int(self.size)))
        return np.array(self, copy=True).view(np.ndarray)

    def __array_ufunc__(self, ufunc: Any, method: str, *inputs: Any, **kwargs: Any) -> Any:
        outs = kwargs.get("out", ())
        for a in (*inputs, *outs):
            if type(a) is np.ndarray and a.ndim > 0:
                raise TypeError(f"Unsupported type {type(a)}: a host array in a device "
                                f"operation ({ufunc.__name__})")
        if outs:
            kwargs["out"] = tuple(_host(o) for o in outs)
        r = getattr(ufunc, method)(*(_host(a) for a in inputs), **kwargs)
        if outs:
            return outs[0] if len(outs) == 1 else outs
        return _dev(r)


def asarray(a: Any, dtype: Any = None) -> ndarray:
    if isinstance(a, ndarray):
        return a if dtype is None or a.dtype == np.dtype(dtype) else a.astype(dtype)
    TRANSFERS.append(("h2d", int(np.size(a))))
    return np.array(a, dtype=dtype, copy=True).view(ndarray)


def array(a: Any, dtype: Any = None, copy: bool = True) -> ndarray:
    if isinstance(a, ndarray):
        return np.array(_host(a), dtype=dtype, copy=copy).view(ndarray)
    return asarray(a, dtype)


def asnumpy(a: Any) -> np.ndarray:
    if isinstance(a, ndarray):
        return a.get()
    return np.asarray(a)


def empty(shape: Any, dtype: Any = np.float64) -> ndarray:
    _check_sticky()
    return np.empty(shape, dtype=dtype).view(ndarray)


def matmul(a: Any, b: Any, out: Any = None) -> Any:
    r = np.matmul(np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64))
    if out is None:
        return r.astype(a.dtype).view(ndarray)
    out[...] = r
    return out


class _RandomState:
    """cupy.random.RandomState: cuRAND's generator, here numpy's, arrays made on the device."""

    def __init__(self, seed: int | None = None) -> None:
        self._g = np.random.default_rng(seed)

    def random_sample(self, size: Any = None, dtype: Any = np.float64) -> ndarray:
        return _dev(self._g.random(size=size, dtype=dtype))


_GLOBAL_RNG = np.random.default_rng(12345)


def _random(size: Any = None, dtype: Any = np.float64) -> ndarray:
    """cupy.random.random: uniform in [0, 1), made on the device."""
    return _dev(_GLOBAL_RNG.random(size=size, dtype=dtype))


def _randint(low: int, high: int | None = None, size: Any = None,
             dtype: Any = np.int64) -> ndarray:
    """cupy.random.randint: integers in [low, high), made on the device."""
    return _dev(_GLOBAL_RNG.integers(low, high, size=size, dtype=dtype))


random = SimpleNamespace(RandomState=_RandomState, random=_random, randint=_randint)
linalg = SimpleNamespace(norm=lambda x, *a, **k: _dev(np.linalg.norm(_host(x), *a, **k)))


def __getattr__(name: str) -> Any:
    """Any other numpy name: dtypes as they are, functions on device arrays."""
    attr = getattr(np, name)
    if callable(attr) and not isinstance(attr, type):
        def device_op(*args: Any, **kwargs: Any) -> Any:
            for a in (*args, *kwargs.values()):
                if type(a) is np.ndarray and a.ndim > 0:
                    raise TypeError(f"Unsupported type {type(a)}: a host array in "
                                    f"cupy.{name}")
            return _dev(attr(*(_host(a) for a in args),
                             **{k: _host(v) for k, v in kwargs.items()}))
        return device_op
    return attr


class _Pool:
    def free_all_blocks(self) -> None:
        _check_sticky()


def get_default_memory_pool() -> _Pool:
    return _Pool()


# A sticky CUDA error of this process: once set, every later device call fails with it, as
# after an illegal address on a real GPU. Set by the planted kernel "planted_sticky_*".
STICKY: list[str] = []


def _check_sticky() -> None:
    if STICKY:
        raise RuntimeError(STICKY[0])


class _Planted:
    """Planted faults for the isolation tests: ``planted_hang_*`` never returns (an unbounded
    barrier wait), ``planted_sticky_*`` fails stickily (every later call of the process too)."""

    num_regs, shared_size_bytes, local_size_bytes = 32, 0, 0

    def __init__(self, name: str) -> None:
        self.name = name

    def __call__(self, grid, block, args, shared_mem: int = 0) -> None:
        _check_sticky()
        if self.name.startswith("planted_hang"):
            while True:
                time.sleep(1)
        STICKY.append("cudaErrorIllegalAddress: an illegal memory access was encountered")
        _check_sticky()


class _Kernel(EmuFunction):
    max_dynamic_shared_size_bytes = 48 * 1024  # CuPy's RawKernel attribute (the opt-in)

    def __call__(self, grid, block, args, shared_mem: int = 0) -> None:
        _check_sticky()
        self.check(args, "cupy")
        ints, floats = [], []
        for a in args:
            if isinstance(a, np.ndarray):
                ints.append(a.ctypes.data)
            elif isinstance(a, (np.integer, int)):
                ints.append(int(a))
            else:
                floats.append(float(a))
        cuda.LOG.append(("launch", self.name, tuple(grid), tuple(block)))
        # a np.float64 scalar is a double parameter (CuPy passes a scalar by its dtype)
        self.launch(grid, block, ints, floats, {f"argument {i}": a for i, a in enumerate(args)
                                                if isinstance(a, np.ndarray)},
                    f64=any(isinstance(a, np.float64) for a in args))


class RawModule:
    def __init__(self, code: str = "", options: tuple = (), backend: str = "nvrtc",
                 **_: Any) -> None:
        self.code, self.options = code, options
        assert backend == "nvrtc"

    def compile(self, log_stream: Any = None) -> None:
        """CuPy's eager compile (gpu_device.CupyGpu.compile): the emulated builds exist."""

    def get_function(self, name: str) -> Any:
        if name.startswith(("planted_hang", "planted_sticky")):
            return _Planted(name)
        return find_function(_Kernel, name, "fake cupy")


from . import cuda  # noqa: E402,F401
