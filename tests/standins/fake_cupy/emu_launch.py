"""The launch both stand-ins (cupy RawKernel, pycuda SourceModule functions) share: find the
kernel in the emulated builds ($RB_EMU_LIBDIR/*.so) and call rb_launch with its scalars split
into the 6 integer and 2 float slots the emulation's launcher takes (and the arrays it is
given registered for the bounds checks), after checking every argument's width and kind
against the kernel's parameter types (check_scalars)."""

from __future__ import annotations

import ctypes
import os
from pathlib import Path
from typing import Any

import numpy as np


class ArgumentMismatch(TypeError):
    """A launch's argument does not have its parameter's width or kind."""


def signature(lib: ctypes.CDLL, function: str) -> list[str] | None:
    """The parameter types of ``function`` as its emulated build compiled them (emu.h
    RB_SIG: "p", "i8", "f4", ...), or None for a build without them."""
    sig = getattr(lib, f"rb_sig__{function}", None)
    if sig is None:
        return None
    sig.restype = ctypes.c_char_p
    return sig().decode().split(",") if sig() else []


def scalar_type(a: Any, strict: str = "") -> str | None:
    """The type a launch hands over for argument ``a`` (signature's letters): a numpy scalar
    its own kind and width; anything that is not a scalar (an array, a device allocation) a
    pointer. A Python int or float: what CuPy makes of it (``strict="cupy"``: int64,
    float64), what PyCUDA refuses (``"pycuda"``: "python int"), or for the tests' own calls
    (not strict) None: any integer or floating parameter takes it."""
    if isinstance(a, np.generic):
        dt = np.dtype(type(a))
        return ("b" if dt.kind == "b" else dt.kind) + str(dt.itemsize)
    if isinstance(a, bool):
        return "b1"
    if not isinstance(a, int | float):
        return "p"
    if strict == "cupy":
        return "i8" if isinstance(a, int) else "f8"
    if strict == "pycuda":
        return f"python {type(a).__name__} (PyCUDA refuses it)"
    return None


def check_scalars(lib: ctypes.CDLL, function: str, args: list[Any], strict: str = "") -> None:
    """Every argument's width and kind against the kernel's parameter types, as the driver
    reads them (a 4-byte int handed to a ``long long`` leaves 4 bytes of whatever follows for
    the kernel to read): ArgumentMismatch naming the argument."""
    sig = signature(lib, function)
    if sig is None:
        return
    if len(sig) != len(args):
        raise ArgumentMismatch(f"{function}: {len(args)} arguments for {len(sig)} "
                               f"parameters ({', '.join(sig)})")
    for i, (a, want) in enumerate(zip(args, sig, strict=True)):
        got = scalar_type(a, strict)
        if got is None:
            # the tests' own 8-byte slots: a Python int is any integer or an address
            # (``arr.ctypes.data``) for a pointer, a float any floating parameter
            if want[0] in "iufp" and (want[0] == "f") == isinstance(a, float):
                continue
            got = type(a).__name__
        if got != want:
            raise ArgumentMismatch(
                f"{function}: argument {i} is handed over as {_spell(got)} for a "
                f"{_spell(want)} parameter (the kernel reads its parameter's width: a narrower "
                "value leaves bytes of garbage)")


def _spell(t: str) -> str:
    names = {"p": "pointer", "i8": "8-byte signed int (long long)", "i4": "4-byte signed int",
             "u8": "8-byte unsigned int", "u4": "4-byte unsigned int", "f4": "4-byte float",
             "f8": "8-byte double", "i2": "2-byte int", "b1": "bool"}
    return names.get(t, t)


class EmuFunction:
    num_regs = 32
    shared_size_bytes = 0
    local_size_bytes = 0

    def __init__(self, lib: ctypes.CDLL, name: str) -> None:
        self.lib, self.name = lib, name
        self.fn = ctypes.cast(getattr(lib, name), ctypes.c_void_p)

    def check(self, args: Any, strict: str) -> None:
        """The arguments as ``strict`` (cupy, pycuda) hands them over, against the kernel's
        parameters: a mismatch fails the launch (RuntimeError), as a garbage read would."""
        try:
            check_scalars(self.lib, self.name, list(args), strict)
        except ArgumentMismatch as e:
            raise RuntimeError(f"{self.name}: emulated launch failed: {e}") from None

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
