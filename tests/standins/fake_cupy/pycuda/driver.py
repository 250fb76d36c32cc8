"""pycuda.driver stand-in: one fake device with host-clock events."""

from __future__ import annotations

import ctypes
import os
import time
from typing import Any

import numpy as np

_MAJOR, _MINOR = (int(x) for x in os.environ.get("RB_FAKE_CC", "9.0").split("."))


def init() -> None:
    pass


def get_driver_version() -> int:
    return 13020


def mem_get_info() -> tuple[int, int]:
    return 256 << 20, 512 << 20


class device_attribute:  # noqa: N801
    MULTIPROCESSOR_COUNT = "sm"
    MAX_THREADS_PER_MULTIPROCESSOR = "threads"
    MAX_REGISTERS_PER_MULTIPROCESSOR = "regs"
    MAX_SHARED_MEMORY_PER_MULTIPROCESSOR = "smem"
    MAX_SHARED_MEMORY_PER_BLOCK_OPTIN = "smem_optin"
    L2_CACHE_SIZE = "l2"


_ATTR = {"sm": 1, "threads": 512, "regs": 65536, "smem": 233472, "smem_optin": 232448,
         "l2": 1 << 20}


class _Context:
    def push(self) -> None:
        pass

    def pop(self) -> None:
        pass


class Context:
    @staticmethod
    def synchronize() -> None:
        pass


class Device:
    @staticmethod
    def count() -> int:
        return 1

    def __init__(self, i: int) -> None:
        self.i = i

    def retain_primary_context(self) -> _Context:
        return _Context()

    def compute_capability(self) -> tuple[int, int]:
        return (_MAJOR, _MINOR)

    def get_attribute(self, a: str) -> int:
        return _ATTR[a]

    def name(self) -> str:
        return "Fake Emulated GPU"


class Stream:
    def synchronize(self) -> None:
        pass


class Event:
    def __init__(self) -> None:
        self.t = 0.0

    def record(self, stream: Any = None) -> None:
        self.t = time.perf_counter()

    def synchronize(self) -> None:
        pass

    def time_since(self, earlier: Event) -> float:
        return (self.t - earlier.t) * 1e3


class DeviceAllocation:
    def __init__(self, nbytes: int) -> None:
        self.buf = np.zeros(nbytes, np.uint8)

    def __int__(self) -> int:
        return self.buf.ctypes.data

    def free(self) -> None:
        pass


def mem_alloc(nbytes: int) -> DeviceAllocation:
    return DeviceAllocation(nbytes)


def memset_d8_async(dest: Any, value: int, nbytes: int, stream: Any = None) -> None:
    ctypes.memset(int(dest), value, nbytes)
