"""A stand-in for CuPy, for tests only: host memory, and RawModule kernels that run through
the CPU emulation of tests/cuda_emu (shared libraries in $RB_EMU_LIBDIR). It lets the real
CupyBackend, runner and CLI run end to end on a machine without a GPU. It implements only
the calls roofbench's CuPy backend makes; never put it on a real GPU machine's path."""

from __future__ import annotations

import ctypes
import os
from pathlib import Path
from typing import Any

import numpy as np

__version__ = "0.0-fake-emulated"
FAKE = True


class _Ptr:
    def __init__(self, ptr: int) -> None:
        self.ptr = ptr


class ndarray(np.ndarray):  # noqa: N801 - CuPy's name
    @property
    def data(self) -> _Ptr:  # type: ignore[override]
        return _Ptr(self.ctypes.data)

    def get(self) -> np.ndarray:
        return np.array(self, copy=True).view(np.ndarray)


def asarray(a: Any) -> ndarray:
    return np.array(a, copy=True).view(ndarray)


def empty(shape: Any, dtype: Any = np.float64) -> ndarray:
    return np.empty(shape, dtype=dtype).view(ndarray)


def matmul(a: Any, b: Any, out: Any = None) -> Any:
    r = np.matmul(np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64))
    if out is None:
        return r.astype(a.dtype).view(ndarray)
    out[...] = r
    return out


class _Pool:
    def free_all_blocks(self) -> None:
        pass


def get_default_memory_pool() -> _Pool:
    return _Pool()


class _Kernel:
    num_regs = 32
    shared_size_bytes = 0
    local_size_bytes = 0

    def __init__(self, lib: ctypes.CDLL, name: str) -> None:
        self.lib, self.name = lib, name
        self.fn = ctypes.cast(getattr(lib, name), ctypes.c_void_p)

    def __call__(self, grid, block, args, shared_mem: int = 0) -> None:
        ints, floats = [], []
        for a in args:
            if isinstance(a, np.ndarray):
                ints.append(a.ctypes.data)
            elif isinstance(a, (np.integer, int)):
                ints.append(int(a))
            else:
                floats.append(float(a))
        ia = (ctypes.c_longlong * 6)(*ints, *[0] * (6 - len(ints)))
        fa = (ctypes.c_float * 2)(*floats, *[0.0] * (2 - len(floats)))
        g = tuple(grid) + (1,) * (3 - len(grid))
        b = tuple(block) + (1,) * (3 - len(block))
        if self.lib.rb_launch(self.fn, *g, *b, ia, fa) != 0:
            raise RuntimeError(f"{self.name}: emulated launch failed")


class RawModule:
    def __init__(self, code: str = "", options: tuple = (), backend: str = "nvrtc",
                 **_: Any) -> None:
        self.code, self.options = code, options
        assert backend == "nvrtc"

    def get_function(self, name: str) -> _Kernel:
        for so in sorted(Path(os.environ["RB_EMU_LIBDIR"]).glob("*.so")):
            lib = ctypes.CDLL(str(so))
            if hasattr(lib, name):
                lib.rb_launch.restype = ctypes.c_int
                return _Kernel(lib, name)
        raise RuntimeError(f"function {name} not found (fake cupy)")


from . import cuda  # noqa: E402,F401
