"""pycuda.compiler stand-in: SourceModule functions run through the CPU emulation."""

from __future__ import annotations

from typing import Any

from emu_launch import EmuFunction, find_function


class _Function(EmuFunction):
    def __call__(self, *args: Any, grid=(1, 1), block=(1, 1, 1), shared: int = 0,
                 stream: Any = None) -> None:
        import numpy as np

        self.check(args, "pycuda")
        ints, floats = [], []
        for a in args:
            if isinstance(a, (np.floating, float)):
                floats.append(float(a))
            else:
                ints.append(int(a))  # device pointers and integer scalars
        self.launch(grid, block, ints, floats)


class SourceModule:
    def __init__(self, source: str, nvcc: str = "nvcc", options: Any = None, keep: bool = False,
                 no_extern_c: bool = False, arch: str | None = None, code: Any = None,
                 cache_dir: Any = None, include_dirs: Any = ()) -> None:
        assert no_extern_c and arch and arch.startswith("sm_")
        self.source = source

    def get_function(self, name: str) -> _Function:
        return find_function(_Function, name, "fake pycuda")
