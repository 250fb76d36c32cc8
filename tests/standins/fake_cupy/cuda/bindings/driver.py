"""cuda.bindings.driver stand-in: modules, functions, launches and tensor maps over the CPU
emulation (tests/standins/cuda_emu).

* cuTensorMapEncodeTiled checks its arguments as the CUDA driver documents them (rank, 16-byte
  aligned address and strides, the first stride at least a row, boxes of 1..256 elements whose
  rows are multiples of 16 bytes and fit the swizzle span, element strides 1..8, NaN fill only
  for float types) and stores the fields in the 128 bytes of the map (RbTensorMap of
  tests/standins/cuda_emu/hopper_emu.h), which the emulated TMA reads: whatever the host encodes is
  what the kernel gets.
* cuModuleLoadData takes the stand-in NVRTC's cubin and loads the emulated build of that
  source ($RB_EMU_LIBDIR/driver_<stem>.so); cuLaunchKernel passes the kernel's parameter array
  to it as the real driver would (rb_launch_params). Launches are synchronous.
* cuFuncGetParamInfo answers from the build's compiled parameter types (rb_sig__<kernel>),
  so roofbench's check of a launch's parameter widths (cuda_driver.check_params) is tested.
* A failed launch (a trap, or an error the emulation found) returns CUDA_ERROR_LAUNCH_FAILED,
  prints the emulation's message to stderr, and, as on a GPU, is sticky: every later launch
  and module load fails with it.
Only what roofbench calls is here.
"""

from __future__ import annotations

import ctypes
import json
import os
import struct
import sys
from enum import IntEnum
from pathlib import Path
from typing import Any

FAKE = True


class CUresult(IntEnum):
    CUDA_SUCCESS = 0
    CUDA_ERROR_INVALID_VALUE = 1
    CUDA_ERROR_INVALID_IMAGE = 200
    CUDA_ERROR_NOT_FOUND = 500
    CUDA_ERROR_LAUNCH_FAILED = 719


class CUtensorMapDataType(IntEnum):
    CU_TENSOR_MAP_DATA_TYPE_UINT8 = 0
    CU_TENSOR_MAP_DATA_TYPE_UINT16 = 1
    CU_TENSOR_MAP_DATA_TYPE_UINT32 = 2
    CU_TENSOR_MAP_DATA_TYPE_INT32 = 3
    CU_TENSOR_MAP_DATA_TYPE_UINT64 = 4
    CU_TENSOR_MAP_DATA_TYPE_INT64 = 5
    CU_TENSOR_MAP_DATA_TYPE_FLOAT16 = 6
    CU_TENSOR_MAP_DATA_TYPE_FLOAT32 = 7
    CU_TENSOR_MAP_DATA_TYPE_FLOAT64 = 8
    CU_TENSOR_MAP_DATA_TYPE_BFLOAT16 = 9
    CU_TENSOR_MAP_DATA_TYPE_FLOAT32_FTZ = 10
    CU_TENSOR_MAP_DATA_TYPE_TFLOAT32 = 11
    CU_TENSOR_MAP_DATA_TYPE_TFLOAT32_FTZ = 12


_ELEM_BYTES = {0: 1, 1: 2, 2: 4, 3: 4, 4: 8, 5: 8, 6: 2, 7: 4, 8: 8, 9: 2, 10: 4, 11: 4, 12: 4}
_FLOAT_TYPES = {6, 7, 8, 9, 10, 11, 12}


class CUtensorMapSwizzle(IntEnum):
    CU_TENSOR_MAP_SWIZZLE_NONE = 0
    CU_TENSOR_MAP_SWIZZLE_32B = 1
    CU_TENSOR_MAP_SWIZZLE_64B = 2
    CU_TENSOR_MAP_SWIZZLE_128B = 3


_SWIZZLE_SPAN = {1: 32, 2: 64, 3: 128}


class CUtensorMapInterleave(IntEnum):
    CU_TENSOR_MAP_INTERLEAVE_NONE = 0
    CU_TENSOR_MAP_INTERLEAVE_16B = 1
    CU_TENSOR_MAP_INTERLEAVE_32B = 2


class CUtensorMapL2promotion(IntEnum):
    CU_TENSOR_MAP_L2_PROMOTION_NONE = 0
    CU_TENSOR_MAP_L2_PROMOTION_L2_64B = 1
    CU_TENSOR_MAP_L2_PROMOTION_L2_128B = 2
    CU_TENSOR_MAP_L2_PROMOTION_L2_256B = 3


class CUtensorMapFloatOOBfill(IntEnum):
    CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE = 0
    CU_TENSOR_MAP_FLOAT_OOB_FILL_NAN_REQUEST_ZERO_FMA = 1


class CUfunction_attribute(IntEnum):  # noqa: N801
    CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK = 0
    CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES = 1
    CU_FUNC_ATTRIBUTE_CONST_SIZE_BYTES = 2
    CU_FUNC_ATTRIBUTE_LOCAL_SIZE_BYTES = 3
    CU_FUNC_ATTRIBUTE_NUM_REGS = 4
    CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES = 8


class _Int:
    def __init__(self, v: int) -> None:
        self.v = int(v)

    def __int__(self) -> int:
        return self.v


class cuuint64_t(_Int):  # noqa: N801
    pass


class cuuint32_t(_Int):  # noqa: N801
    pass


class CUstream(_Int):
    pass


# --------------------------------------------------------------------------- tensor maps
# RbTensorMap (tests/standins/cuda_emu/hopper_emu.h): 8 x u32, address, 3 dims, 2 strides, 3 boxes,
# 3 element strides; padded to the 128 bytes of a CUtensorMap.
_TMAP = struct.Struct("<8IQ3Q2Q3I3I")
_TMAP_MAGIC = 0x4D544252
MAX_RANK = 3  # what the emulated map holds (the driver allows 5)


class CUtensorMap:
    def __init__(self, raw: bytes) -> None:
        self._buf = ctypes.create_string_buffer(raw.ljust(128, b"\0"), 128)

    def getPtr(self) -> int:  # noqa: N802
        return ctypes.addressof(self._buf)


last_refusal = ""  # why the last call returned an error (tests read it)


def _refuse(why: str, err: CUresult = CUresult.CUDA_ERROR_INVALID_VALUE) -> tuple[Any, None]:
    global last_refusal
    last_refusal = why
    print(f"fake driver: {why}", file=sys.stderr)
    return err, None


def cuTensorMapEncodeTiled(dtype: Any, rank: int, ptr: int, dims: list[Any],  # noqa: N802
                           strides: list[Any], box: list[Any], elem_strides: list[Any],
                           interleave: Any, swizzle: Any, l2: Any, oob: Any
                           ) -> tuple[CUresult, CUtensorMap | None]:
    dt, rank, ptr = int(dtype), int(rank), int(ptr)
    dims_ = [int(d) for d in dims]
    strides_ = [int(s) for s in strides]
    box_ = [int(b) for b in box]
    es = [int(x) for x in elem_strides]
    e = _ELEM_BYTES.get(dt)
    if e is None:
        return _refuse(f"tensor map data type {dt} unknown")
    if not 1 <= rank <= 5:
        return _refuse(f"tensor map rank {rank} outside 1..5")
    if rank > MAX_RANK:
        return _refuse(f"tensor maps of rank {rank} are not modelled (up to {MAX_RANK})")
    if (len(dims_), len(strides_), len(box_), len(es)) != (rank, rank - 1, rank, rank):
        return _refuse("tensor map arrays do not match the rank")
    if int(interleave) != 0:
        return _refuse("interleaved tensor maps are not modelled")
    if ptr % 16:
        return _refuse(f"global address 0x{ptr:x} is not 16-byte aligned")
    if any(not 0 < d <= 1 << 32 for d in dims_):
        return _refuse(f"global dims {dims_} outside 1..2^32")
    if any(s % 16 or s >= 1 << 40 for s in strides_):
        return _refuse(f"global strides {strides_} must be multiples of 16 below 2^40")
    if strides_ and strides_[0] < dims_[0] * e:
        return _refuse(f"global stride {strides_[0]} is shorter than a row of {dims_[0]} "
                       f"elements of {e} bytes")
    if any(not 0 < b <= 256 for b in box_):
        return _refuse(f"box {box_} outside 1..256 per dimension")
    if box_[0] * e % 16:
        return _refuse(f"box rows of {box_[0] * e} bytes are not multiples of 16")
    if any(not 0 < x <= 8 for x in es):
        return _refuse(f"element strides {es} outside 1..8")
    sw = int(swizzle)
    if sw not in (0, 1, 2, 3):
        return _refuse(f"swizzle mode {sw} is not modelled")
    if sw and box_[0] * e > _SWIZZLE_SPAN[sw]:
        return _refuse(f"box rows of {box_[0] * e} bytes exceed the {_SWIZZLE_SPAN[sw]}-byte "
                       "swizzle span")
    if int(oob) == 1 and dt not in _FLOAT_TYPES:
        return _refuse("NaN out-of-bounds fill needs a floating-point type")
    pad = MAX_RANK - rank
    raw = _TMAP.pack(_TMAP_MAGIC, dt, rank, sw, int(interleave), int(oob), int(l2), e, ptr,
                     *dims_, *[1] * pad, *strides_, *[0] * (MAX_RANK - 1 - len(strides_)),
                     *box_, *[1] * pad, *es, *[1] * pad)
    return CUresult.CUDA_SUCCESS, CUtensorMap(raw)


def decode_tensor_map(raw: bytes) -> dict[str, Any]:
    """The fields of a map this stand-in encoded (tests compare them with the host's spec)."""
    v = _TMAP.unpack(raw[:_TMAP.size])
    rank = v[2]
    return {"magic": v[0], "dtype": v[1], "rank": rank, "swizzle": v[3], "elem_bytes": v[7],
            "addr": v[8], "dims": list(v[9:9 + rank]), "strides": list(v[12:12 + rank - 1]),
            "box": list(v[14:14 + rank]), "elem_strides": list(v[17:17 + rank])}


# ------------------------------------------------------------------ modules, launches
LIBDIR: str | None = None  # where the emulated builds are (default: $RB_EMU_LIBDIR)
_sticky: CUresult | None = None
last_launch_error = ""


def reset() -> None:
    """Forget a sticky launch failure (a new context, for tests that run in one process)."""
    global _sticky, last_launch_error
    _sticky, last_launch_error = None, ""


class _Module:
    def __init__(self, lib: ctypes.CDLL, meta: dict[str, Any]) -> None:
        self.lib, self.meta = lib, meta


class _Function:
    def __init__(self, module: _Module, name: str, thunk: int) -> None:
        self.module, self.name, self.thunk = module, name, thunk
        self.max_dynamic_smem = 48 * 1024


def cuInit(flags: int) -> tuple[CUresult]:  # noqa: N802
    return (CUresult.CUDA_SUCCESS,)


def cuGetErrorName(err: Any) -> tuple[CUresult, bytes]:  # noqa: N802
    try:
        return CUresult.CUDA_SUCCESS, CUresult(int(err)).name.encode()
    except ValueError:
        return CUresult.CUDA_ERROR_INVALID_VALUE, b""


def cuModuleLoadData(image: bytes) -> tuple[CUresult, _Module | None]:  # noqa: N802
    from . import nvrtc

    if _sticky is not None:
        return _sticky, None
    if not bytes(image).startswith(nvrtc.CUBIN_MAGIC):
        return _refuse("not a cubin of the stand-in NVRTC", CUresult.CUDA_ERROR_INVALID_IMAGE)
    meta = json.loads(bytes(image)[len(nvrtc.CUBIN_MAGIC):].rstrip(b"\0 "))
    if not meta["arch"].endswith("a"):
        return _refuse(f"{meta['source']} was built for {meta['arch']}, not an arch-specific "
                       "target", CUresult.CUDA_ERROR_INVALID_IMAGE)
    so = Path(LIBDIR or os.environ["RB_EMU_LIBDIR"]) / f"driver_{Path(meta['source']).stem}.so"
    if not so.is_file():
        return _refuse(f"no emulated build {so.name}", CUresult.CUDA_ERROR_INVALID_IMAGE)
    lib = ctypes.CDLL(str(so))
    lib.rb_launch_params.restype = ctypes.c_int
    lib.rb_launch_params.argtypes = [ctypes.c_void_p, *[ctypes.c_int] * 6, ctypes.c_uint,
                                     ctypes.c_void_p]
    lib.rb_last_error.restype = ctypes.c_char_p
    return CUresult.CUDA_SUCCESS, _Module(lib, meta)


def cuModuleGetFunction(module: _Module, name: bytes) -> tuple[CUresult, _Function | None]:  # noqa: N802
    n = name.decode()
    try:
        thunk = ctypes.cast(getattr(module.lib, f"rb_params__{n}"), ctypes.c_void_p).value
    except AttributeError:
        return _refuse(f"no kernel {n} in {module.meta['source']}", CUresult.CUDA_ERROR_NOT_FOUND)
    return CUresult.CUDA_SUCCESS, _Function(module, n, int(thunk or 0))


def cuFuncSetAttribute(fn: _Function, attr: Any, value: int) -> tuple[CUresult]:  # noqa: N802
    if int(attr) == CUfunction_attribute.CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES:
        if not 0 <= int(value) <= 232448:  # the stand-in device's opt-in limit (fake cupy)
            return (_refuse(f"dynamic shared memory {value} above the device's 232448")[0],)
        fn.max_dynamic_smem = int(value)
    return (CUresult.CUDA_SUCCESS,)


# What the emulated functions report: the register count ptxas gives the sm_90a build of the
# wgmma GEMM (tests/kernels/test_wgmma.py reads the real one), no static shared or local memory.
_ATTRS = {CUfunction_attribute.CU_FUNC_ATTRIBUTE_NUM_REGS: 168,
          CUfunction_attribute.CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES: 0,
          CUfunction_attribute.CU_FUNC_ATTRIBUTE_LOCAL_SIZE_BYTES: 0}


def cuFuncGetAttribute(attr: Any, fn: _Function) -> tuple[CUresult, int]:  # noqa: N802
    return CUresult.CUDA_SUCCESS, _ATTRS.get(CUfunction_attribute(int(attr)), 0)


def _param_layout(fn: _Function) -> list[tuple[int, int]] | None:
    """(offset, size) of each parameter of ``fn``, laid out as the compiled kernel takes them:
    from its build's rb_sig__<name> (emu.h rb_signature: "p", "i8", "s128a64", ...), each
    parameter at a multiple of its alignment. None for a build without signatures."""
    sig = getattr(fn.module.lib, f"rb_sig__{fn.name}", None)
    if sig is None:
        return None
    sig.restype = ctypes.c_char_p
    out, at = [], 0
    for t in filter(None, sig().decode().split(",")):
        if t == "p":
            size = align = 8
        elif t[0] == "s":
            size, align = (int(x) for x in t[1:].split("a"))
        else:
            size = align = int(t[1:])
        at = -(-at // align) * align
        out.append((at, size))
        at += size
    return out


def cuFuncGetParamInfo(fn: _Function, index: int) -> tuple[CUresult, int, int]:  # noqa: N802
    """The offset and size of parameter ``index`` (CUDA 12.4's call): what the driver reads
    for it from the slot a launch hands over, whatever the slot holds."""
    layout = _param_layout(fn)
    if layout is None or not 0 <= int(index) < len(layout):  # past the last: how it ends
        return CUresult.CUDA_ERROR_INVALID_VALUE, 0, 0
    return CUresult.CUDA_SUCCESS, *layout[int(index)]


def cuLaunchKernel(fn: _Function, gx: int, gy: int, gz: int, bx: int, by: int, bz: int,  # noqa: N802
                   smem: int, stream: Any, params: int, extra: Any) -> tuple[CUresult]:
    global _sticky, last_launch_error
    if _sticky is not None:
        return (_sticky,)
    if int(smem) > fn.max_dynamic_smem:
        return (_refuse(f"{fn.name}: {smem} bytes of dynamic shared memory, the function "
                        f"allows {fn.max_dynamic_smem}")[0],)
    rc = fn.module.lib.rb_launch_params(fn.thunk, gx, gy, gz, bx, by, bz, int(smem),
                                        int(params))
    if rc != 0:
        last_launch_error = fn.module.lib.rb_last_error().decode(errors="replace")
        print(f"{fn.name}: emulated launch failed: {last_launch_error}", file=sys.stderr)
        _sticky = CUresult.CUDA_ERROR_LAUNCH_FAILED
        return (_sticky,)
    return (CUresult.CUDA_SUCCESS,)
