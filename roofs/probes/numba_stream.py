"""Numba CUDA twins of the STREAM probes (cuda/stream.cu): copy, scale, add, triad, read
(reduction) and fill, grid-stride, same byte accounting (gpu_memory.STREAM_RW).

They run on a GPU and in Numba's CUDA simulator (NUMBA_ENABLE_CUDASIM=1, which numba reads when
numba.cuda is first imported): ``numba.cuda`` is imported only inside :func:`build`, so importing
this module never picks the real driver or the simulator for the process.
"""

from __future__ import annotations

from functools import cache
from typing import Any

import numpy as np
from roofbench.kernels import numba_compat  # noqa: F401  (numpy 2.5 vs numba-cuda 0.30)

from .gpu_memory import STREAM_RW

KERNELS = tuple(STREAM_RW)


# Bound by build() to numba.cuda. The kernel bodies below look `cuda` up in this module's
# globals, which is where the simulator swaps in its fake module while a kernel runs (a name
# closed over inside build() would not be swapped).
cuda: Any = None


def _copy(a, c):
    for i in range(cuda.grid(1), a.size, cuda.gridsize(1)):
        c[i] = a[i]


def _scale(c, b, s):
    for i in range(cuda.grid(1), c.size, cuda.gridsize(1)):
        b[i] = s * c[i]


def _add(a, b, c):
    for i in range(cuda.grid(1), a.size, cuda.gridsize(1)):
        c[i] = a[i] + b[i]


def _triad(a, b, c, s):
    for i in range(cuda.grid(1), a.size, cuda.gridsize(1)):
        a[i] = b[i] + s * c[i]


def _read(a, out):
    acc = 0.0  # per-thread partial sum, one atomic per thread
    for i in range(cuda.grid(1), a.size, cuda.gridsize(1)):
        acc += a[i]
    cuda.atomic.add(out, 0, acc)


def _fill(a, v):
    for i in range(cuda.grid(1), a.size, cuda.gridsize(1)):
        a[i] = v


@cache
def build() -> dict[str, Any]:
    """Compile (lazily) the six kernels; returns name -> numba.cuda kernel (untyped: launched
    as ``kernel[grid, block](...)``)."""
    global cuda
    from numba import cuda as _cuda

    cuda = _cuda
    return {"copy": cuda.jit(_copy), "scale": cuda.jit(_scale), "add": cuda.jit(_add),
            "triad": cuda.jit(_triad), "read": cuda.jit(_read), "fill": cuda.jit(_fill)}


def run(name: str, arrays: dict[str, Any], s: float, grid: int, block: int) -> None:
    """Launch one kernel on device (or simulator) arrays a, b, c, out with scalar s."""
    k = build()[name][grid, block]
    a, b, c, out = arrays["a"], arrays["b"], arrays["c"], arrays.get("out")
    if name == "copy":
        k(a, c)
    elif name == "scale":
        k(c, b, s)
    elif name == "add":
        k(a, b, c)
    elif name == "triad":
        k(a, b, c, s)
    elif name == "read":
        k(a, out)
    elif name == "fill":
        k(a, s)
    else:
        raise KeyError(name)


def reference(name: str, a: np.ndarray, b: np.ndarray, c: np.ndarray, s: float
              ) -> dict[str, np.ndarray | float]:
    """What each kernel must leave behind (float64 reference)."""
    a64, b64, c64 = (x.astype(np.float64) for x in (a, b, c))
    return {"copy": {"c": a64}, "scale": {"b": s * c64}, "add": {"c": a64 + b64},
            "triad": {"a": b64 + s * c64}, "read": {"out": a64.sum()},
            "fill": {"a": np.full_like(a64, s)}}[name]
