"""pycuda.compiler stand-in: SourceModule functions run through the CPU emulation."""

from __future__ import annotations

import ctypes
import os
from pathlib import Path
from typing import Any


class _Function:
    num_regs = 32
    shared_size_bytes = 0
    local_size_bytes = 0

    def __init__(self, lib: ctypes.CDLL, name: str) -> None:
        self.lib, self.name = lib, name
        self.fn = ctypes.cast(getattr(lib, name), ctypes.c_void_p)

    def __call__(self, *args: Any, grid=(1, 1), block=(1, 1, 1), shared: int = 0,
                 stream: Any = None) -> None:
        import numpy as np

        ints, floats = [], []
        for a in args:
            if isinstance(a, (np.floating, float)):
                floats.append(float(a))
            else:
                ints.append(int(a))  # device pointers and integer scalars
        ia = (ctypes.c_longlong * 6)(*ints, *[0] * (6 - len(ints)))
        fa = (ctypes.c_float * 2)(*floats, *[0.0] * (2 - len(floats)))
        g = tuple(grid) + (1,) * (3 - len(grid))
        b = tuple(block) + (1,) * (3 - len(block))
        if self.lib.rb_launch(self.fn, *g, *b, ia, fa) != 0:
            raise RuntimeError(f"{self.name}: emulated launch failed")


class SourceModule:
    def __init__(self, source: str, nvcc: str = "nvcc", options: Any = None, keep: bool = False,
                 no_extern_c: bool = False, arch: str | None = None, code: Any = None,
                 cache_dir: Any = None, include_dirs: Any = ()) -> None:
        assert no_extern_c and arch and arch.startswith("sm_")
        self.source = source

    def get_function(self, name: str) -> _Function:
        for so in sorted(Path(os.environ["RB_EMU_LIBDIR"]).glob("*.so")):
            lib = ctypes.CDLL(str(so))
            if hasattr(lib, name):
                lib.rb_launch.restype = ctypes.c_int
                return _Function(lib, name)
        raise RuntimeError(f"function {name} not found (fake pycuda)")
