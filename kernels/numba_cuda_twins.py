"""Numba CUDA twins of the CUDA C kernels: the generic part (descriptor, lookup, compile cache).

Each workload keeps its own twins beside its CUDA table (``NUMBA_CUDA`` in kernels/<w>.py): a
builder ``(env) -> {name: kernel}`` that defines them with ``@cuda.jit``, and :class:`NumbaTwin`
descriptors naming them. They run on a GPU (``--backend numba``) and in Numba's CUDA simulator
(``--backend sim``, ``NUMBA_ENABLE_CUDASIM=1``), where each thread is a Python thread: keep
simulator cases to a few blocks. ``numba.cuda`` is imported only when a twin is first built
(the workload registry imports every workload module on every run, and the simulator must be
chosen before ``numba.cuda`` is first imported): :func:`bind` then sets the module global
``cuda`` of the workload module, which the kernels name (the simulator swaps a kernel's module
globals). Math is FP32 (FP64 for fp64), matching the CUDA C kernels.

The backend turns a twin into a compiled kernel with ``build(twin.name, dtype)`` and a launch
geometry with ``twin.geometry``.
"""

from __future__ import annotations

import math
import sys
from collections.abc import Callable
from dataclasses import dataclass
from functools import cache
from typing import Any

from . import numba_compat  # noqa: F401  (numpy 2.5 vs numba-cuda 0.30: before any compile)
from .spec import Size

THREADS = 256
TILE = 16  # GEMM tile edge (16 x 16 threads)
DTYPES = ("fp64", "fp32", "fp16")


@dataclass(frozen=True)
class TwinEnv:
    """What a workload's twin builder compiles against: the accumulator type of the dtype
    (numba.float32, or float64 for fp64) and the block shapes the descriptors launch."""

    dtype: str
    acc: Any
    threads: int = THREADS
    tile: int = TILE


Builder = Callable[[TwinEnv], dict[str, Any]]


@dataclass(frozen=True)
class NumbaTwin:
    """A Numba CUDA kernel standing for one launch.

    ``name``: the kernel in ``kernels(env)``, the workload's builder. ``shape``: "stride"
    (1-D grid-stride over ``elems(size)`` items), "row" (one block per row of a [rows, cols]
    size) or "gemm" (TILE x TILE blocks over C[M, N]).
    """

    name: str
    kernels: Builder
    shape: str = "stride"
    elems: Callable[[Size], int] = lambda size: int(math.prod(size))

    def geometry(self, size: Size, sm_count: int, max_blocks: int | None = None,
                 threads: int = THREADS) -> tuple[tuple[int, ...], tuple[int, ...]]:
        """(grid, block). ``max_blocks`` caps grid-stride grids (the simulator uses a few)."""
        if self.shape == "gemm":
            m, n, _ = size
            return (-(-n // TILE), -(-m // TILE)), (TILE, TILE)
        if self.shape == "row":
            return (int(size[0]),), (threads,)
        blocks = max(1, min(-(-self.elems(size) // threads), sm_count * (2048 // threads)))
        if max_blocks is not None:
            blocks = min(blocks, max_blocks)
        return (blocks,), (threads,)

    def build(self, dtype: str) -> Any:
        """The compiled (lazily, on first launch) kernel for ``dtype``."""
        if dtype not in DTYPES:
            raise KeyError(f"no Numba CUDA twin for {dtype} (has {', '.join(DTYPES)})")
        return _compiled(self.kernels, dtype)[self.name]


def bind(module_name: str) -> Any:
    """Import numba.cuda and make it the global ``cuda`` of ``module_name`` (the workload
    module whose kernels use it); returns it for the decorators."""
    from numba import cuda

    vars(sys.modules[module_name])["cuda"] = cuda
    return cuda


@cache
def _compiled(kernels: Builder, dtype: str) -> dict[str, Any]:
    import numba

    return kernels(TwinEnv(dtype, numba.float64 if dtype == "fp64" else numba.float32))


def build(name: str, dtype: str) -> Any:
    """The compiled kernel of the twin called ``name`` (in any workload) for ``dtype``."""
    return _by_name()[name].build(dtype)


def _by_name() -> dict[str, NumbaTwin]:
    from .registry import workloads

    out: dict[str, NumbaTwin] = {}
    for w in workloads().values():
        for v in w.variants.values():
            for twin in (v.impls.get("numba_cuda") or {}).values():
                if out.setdefault(twin.name, twin).kernels is not twin.kernels:
                    raise ValueError(f"two Numba CUDA twins are called {twin.name!r}")
    return out
