"""pycuda.gpuarray stand-in: host arrays with .gpudata, .fill and .get."""

from __future__ import annotations

from typing import Any

import numpy as np


class _Data:
    def __init__(self, arr: np.ndarray) -> None:
        self.arr = arr

    def __int__(self) -> int:
        return self.arr.ctypes.data

    def free(self) -> None:
        pass


class GPUArray:
    def __init__(self, arr: np.ndarray) -> None:
        self.arr = arr
        self.gpudata = _Data(arr)

    def fill(self, value: Any, stream: Any = None) -> GPUArray:
        self.arr.fill(value)
        return self

    def get(self) -> np.ndarray:
        return self.arr.copy()


def to_gpu(a: np.ndarray) -> GPUArray:
    return GPUArray(np.array(a, copy=True))


def empty(shape: Any, dtype: Any) -> GPUArray:
    return GPUArray(np.empty(shape, dtype=dtype))
