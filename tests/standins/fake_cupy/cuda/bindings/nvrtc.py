"""cuda.bindings.nvrtc stand-in: "compiles" by recording the program (its name, target and
options) in a small text cubin that the stand-in driver maps to the emulated build. It refuses
what the real NVRTC would: a program that still has a local ``#include "..."`` (NVRTC gets no
include path) or an option it does not know."""

from __future__ import annotations

import ctypes
import json
import re
from enum import IntEnum
from typing import Any

FAKE = True
CUBIN_MAGIC = b"RB-EMULATED-CUBIN\n"


class nvrtcResult(IntEnum):  # noqa: N801 - the binding's names
    NVRTC_SUCCESS = 0
    NVRTC_ERROR_INVALID_INPUT = 3
    NVRTC_ERROR_INVALID_OPTION = 5
    NVRTC_ERROR_COMPILATION = 6


class _Program:
    def __init__(self, text: str, name: str) -> None:
        self.text, self.name = text, name
        self.log = b"\0"
        self.cubin = b""


def cubin_for(name: str, arch: str, options: list[str]) -> bytes:
    """The stand-in cubin of a program: what the driver needs to find its emulated build."""
    meta = {"source": name, "arch": arch, "options": options}
    return CUBIN_MAGIC + json.dumps(meta).encode()


def _fill(buf: Any, data: bytes) -> None:
    """Write into the caller's preallocated buffer, as the binding does: a bytearray (what
    roofbench passes), or a bytes object written in place through its char* (the binding
    does that even to CPython's shared one-byte objects; here those are left alone, so that
    the test process itself is not corrupted)."""
    if isinstance(buf, bytearray):
        buf[:len(data)] = data
    elif len(data) > 1:
        ctypes.memmove(buf, data, len(data))


def nvrtcCreateProgram(src: bytes, name: bytes, n: int, headers: Any, names: Any  # noqa: N802
                       ) -> tuple[nvrtcResult, _Program | None]:
    if n or headers or names:
        return nvrtcResult.NVRTC_ERROR_INVALID_INPUT, None
    return nvrtcResult.NVRTC_SUCCESS, _Program(src.decode(), name.decode())


_KNOWN = re.compile(r"^(--gpu-architecture=sm_\d+a?|-std=c\+\+\d\d|-I.+|-D\w+(=\S+)?)$")


def nvrtcCompileProgram(prog: _Program, n: int, opts: list[bytes]) -> tuple[nvrtcResult]:  # noqa: N802
    options = [o.decode() for o in opts[:n]]
    bad = [o for o in options if not _KNOWN.match(o)]
    if bad:
        prog.log = f"unknown option {bad[0]}\0".encode()
        return (nvrtcResult.NVRTC_ERROR_INVALID_OPTION,)
    local = re.search(r'^\s*#\s*include\s+"([^"]+)"', prog.text, re.M)
    if local:
        prog.log = f'{prog.name}: catastrophic error: cannot open source file "{local[1]}"\0'
        prog.log = prog.log.encode()
        return (nvrtcResult.NVRTC_ERROR_COMPILATION,)
    arch = next((o.split("=", 1)[1] for o in options if o.startswith("--gpu-arch")), "")
    prog.cubin = cubin_for(prog.name, arch, options)
    return (nvrtcResult.NVRTC_SUCCESS,)


def nvrtcGetProgramLogSize(prog: _Program) -> tuple[nvrtcResult, int]:  # noqa: N802
    return nvrtcResult.NVRTC_SUCCESS, len(prog.log)


def nvrtcGetProgramLog(prog: _Program, buf: Any) -> tuple[nvrtcResult]:  # noqa: N802
    _fill(buf, prog.log)
    return (nvrtcResult.NVRTC_SUCCESS,)


def nvrtcGetCUBINSize(prog: _Program) -> tuple[nvrtcResult, int]:  # noqa: N802
    return nvrtcResult.NVRTC_SUCCESS, len(prog.cubin)


def nvrtcGetCUBIN(prog: _Program, buf: Any) -> tuple[nvrtcResult]:  # noqa: N802
    _fill(buf, prog.cubin)
    return (nvrtcResult.NVRTC_SUCCESS,)


def nvrtcDestroyProgram(prog: _Program) -> tuple[nvrtcResult]:  # noqa: N802
    return (nvrtcResult.NVRTC_SUCCESS,)


def nvrtcVersion() -> tuple[nvrtcResult, int, int]:  # noqa: N802
    return nvrtcResult.NVRTC_SUCCESS, 13, 2
