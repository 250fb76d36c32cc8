"""cupy.cuda stand-in: one fake device, a stream and events that read the host clock."""

from __future__ import annotations

import os
import time
from typing import Any

# RB_FAKE_CC="8.0" pretends to be an older arch (to test refusals).
_MAJOR, _MINOR = (int(x) for x in os.environ.get("RB_FAKE_CC", "9.0").split("."))
PROPS = {"name": b"Fake Emulated GPU", "major": _MAJOR, "minor": _MINOR, "multiProcessorCount": 1,
         "maxThreadsPerMultiProcessor": 512, "regsPerMultiprocessor": 65536,
         "sharedMemPerMultiprocessor": 233472, "sharedMemPerBlockOptin": 232448,
         "l2CacheSize": 1 << 20, "warpSize": 32}


class runtime:  # noqa: N801
    @staticmethod
    def getDeviceCount() -> int:  # noqa: N802
        return 1

    @staticmethod
    def getDeviceProperties(i: int) -> dict[str, Any]:  # noqa: N802
        return dict(PROPS)

    @staticmethod
    def memGetInfo() -> tuple[int, int]:  # noqa: N802
        return 256 << 20, 512 << 20

    @staticmethod
    def runtimeGetVersion() -> int:  # noqa: N802
        return 13020

    @staticmethod
    def driverGetVersion() -> int:  # noqa: N802
        return 13020

    @staticmethod
    def memsetAsync(ptr: int, value: int, nbytes: int, stream: int) -> None:  # noqa: N802
        import ctypes

        ctypes.memset(ptr, value, nbytes)


class nvrtc:  # noqa: N801
    @staticmethod
    def getVersion() -> tuple[int, int]:  # noqa: N802
        return (13, 2)


class Device:
    def __init__(self, i: int = 0) -> None:
        self.id = i

    def use(self) -> None:
        pass

    def synchronize(self) -> None:
        pass


class Stream:
    def __init__(self, non_blocking: bool = False) -> None:
        self.ptr = 1

    def __enter__(self) -> Stream:
        _CURRENT.append(self)
        return self

    def __exit__(self, *exc: Any) -> None:
        _CURRENT.pop()

    def synchronize(self) -> None:
        import cupy

        cupy._check_sticky()

    def use(self) -> Stream:
        return self


# The current stream (CuPy's `with stream:` makes it current), and the stream of every event
# recorded: the tests assert that work is timed on the stream it was queued on.
_NULL = Stream()
_CURRENT: list[Stream] = []
RECORDED_ON: list[Any] = []
# Every kernel launch and event record in order: ("launch", kernel, grid, block) and
# ("event", stream): the tests read which launches fell between a timer's two events.
LOG: list[tuple[Any, ...]] = []


def get_current_stream() -> Stream:
    return _CURRENT[-1] if _CURRENT else _NULL


class Event:
    def __init__(self, *a: Any, **k: Any) -> None:
        self.t = 0.0

    def record(self, stream: Any = None) -> None:
        RECORDED_ON.append(stream)
        LOG.append(("event", stream))
        self.t = time.perf_counter()

    def synchronize(self) -> None:
        pass


def get_elapsed_time(a: Event, b: Event) -> float:
    return (b.t - a.t) * 1e3
