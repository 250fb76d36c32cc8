"""The launch both stand-ins (cupy RawKernel, pycuda SourceModule functions) share: find the
kernel in the emulated builds ($RB_EMU_LIBDIR/*.so) and call rb_launch with its scalars split
into the 6 integer and 2 float slots the emulation's launcher takes (and the arrays it is
given registered for the bounds checks)."""

from __future__ import annotations

import ctypes
import os
from pathlib import Path
from typing import Any


class EmuFunction:
    num_regs = 32
    shared_size_bytes = 0
    local_size_bytes = 0

    def __init__(self, lib: ctypes.CDLL, name: str) -> None:
        self.lib, self.name = lib, name
        self.fn = ctypes.cast(getattr(lib, name), ctypes.c_void_p)

    def launch(self, grid: Any, block: Any, ints: list[int], floats: list[float],
               buffers: dict[str, Any] | None = None, f64: bool = False) -> None:
        """``buffers``: the launch's arrays by name, registered for the emulation's bounds
        checks (contiguous ones; an access just past one's end fails the launch). ``f64``:
        the float scalars are doubles (rb_launch_f64: the fp64 STREAM and FMA kernels)."""
        for name, a in (buffers or {}).items():
            if a.flags.c_contiguous and a.nbytes:
                self.lib.rb_emu_buffer(ctypes.c_ulonglong(a.ctypes.data),
                                       ctypes.c_ulonglong(a.nbytes), a.itemsize, name.encode())
        ia = (ctypes.c_longlong * 6)(*ints, *[0] * (6 - len(ints)))
        fa = ((ctypes.c_double if f64 else ctypes.c_float) * 2)(*floats,
                                                              *[0.0] * (2 - len(floats)))
        g = tuple(grid) + (1,) * (3 - len(grid))
        b = tuple(block) + (1,) * (3 - len(block))
        if (self.lib.rb_launch_f64 if f64 else self.lib.rb_launch)(self.fn, *g, *b, ia, fa) != 0:
            self.lib.rb_last_error.restype = ctypes.c_char_p
            why = self.lib.rb_last_error().decode(errors="replace")
            raise RuntimeError(f"{self.name}: emulated launch failed: {why}")


def find_function(cls: type[EmuFunction], name: str, who: str) -> Any:
    """``cls`` around the first emulated build that exports ``name``."""
    for so in sorted(Path(os.environ["RB_EMU_LIBDIR"]).glob("*.so")):
        lib = ctypes.CDLL(str(so))
        if hasattr(lib, name):
            lib.rb_launch.restype = ctypes.c_int
            return cls(lib, name)
    raise RuntimeError(f"function {name} not found ({who})")
