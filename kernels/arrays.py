"""Where a case's inputs, reference and validation live: numpy on the host, or a device's array
module (CuPy) on a GPU, so that only scalars cross to the host.

``Arrays`` is the one place that knows how values are stored there. On the host the storage
types are numpy's (bf16 and fp8 through ml_dtypes); on a device, whose array module has no
bf16 or fp8, they are raw 16- and 8-bit words that the kernels reinterpret (``DEVICE_STORAGE``),
rounded from float32 to nearest-even on the device with the same result as ml_dtypes'
conversion (tests/kernels/test_device_arrays.py checks every fp8 code, the ties and the overflow).
Every operation is written against ``xp``, so the device form also runs on numpy.
The dtype table (``DTYPES``, ``itemsize``, ``np_dtype``) is here, with the storage: spec.py
declares workloads with it, imports this module at its top and hands the three on to its
importers.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from functools import cache, cached_property
from typing import Any, ClassVar

import numpy as np


@cache
def _ml_dtypes() -> dict[str, np.dtype]:
    """bf16 and fp8 (e4m3) host types, from ml_dtypes: imported on first use, because its
    import registers numpy ufunc loops for about half a second of CPU, which every process
    that never touches bf16 or fp8 (``roofbench --help``, a CPU run of fp32) would pay."""
    import ml_dtypes

    return {"bf16": np.dtype(ml_dtypes.bfloat16), "fp8": np.dtype(ml_dtypes.float8_e4m3fn)}


class _Dtypes(Mapping[str, np.dtype]):
    """dtype name -> numpy host dtype, in this order; bf16 and fp8 resolved when asked for."""

    _NUMPY: ClassVar[dict[str, np.dtype]] = {
        "fp64": np.dtype(np.float64), "fp32": np.dtype(np.float32), "fp16": np.dtype(np.float16)}
    _NAMES: ClassVar[tuple[str, ...]] = ("fp64", "fp32", "fp16", "bf16", "fp8")

    def __getitem__(self, name: str) -> np.dtype:
        if name in self._NUMPY:
            return self._NUMPY[name]
        if name in self._NAMES:
            return _ml_dtypes()[name]
        raise KeyError(name)

    def __iter__(self) -> Iterator[str]:
        return iter(self._NAMES)

    def __len__(self) -> int:
        return len(self._NAMES)

    def __contains__(self, name: object) -> bool:
        return name in self._NAMES


DTYPES: Mapping[str, np.dtype] = _Dtypes()


def itemsize(dtype: str) -> int:
    return DTYPES[dtype].itemsize


def np_dtype(dtype: str) -> np.dtype:
    return DTYPES[dtype]


# Device storage: bf16/fp8 as raw words (bits as ml_dtypes has them on the host).
DEVICE_STORAGE: dict[str, np.dtype] = {
    "fp64": np.dtype(np.float64),
    "fp32": np.dtype(np.float32),
    "fp16": np.dtype(np.float16),
    "bf16": np.dtype(np.uint16),
    "fp8": np.dtype(np.uint8),
}
FP8_NAN = 0x7F  # e4m3fn: S.1111.111; no infinities


def fp8_values() -> np.ndarray:
    """The float64 value of every e4m3fn code 0..255 (NaN at 0x7F and 0xFF)."""
    return np.arange(256, dtype=np.uint8).view(np_dtype("fp8")).astype(np.float64)


class Arrays:
    """An array module and how a case's values are stored in it (see the module doc)."""

    def __init__(self, xp: Any, device: bool) -> None:
        self.xp = xp
        self.device = device

    @property
    def name(self) -> str:
        return getattr(self.xp, "__name__", "?")

    def storage(self, dtype: str) -> np.dtype:
        return DEVICE_STORAGE[dtype] if self.device else np_dtype(dtype)

    def generator(self, seed: int) -> Any:
        """A random generator of this module (cuRAND's on a device)."""
        if self.device:
            return self.xp.random.RandomState(seed)
        return np.random.default_rng(seed)

    def uniform(self, rng: Any, shape: tuple[int, ...], dtype: Any) -> Any:
        """Values in [0, 1) of float32 or float64."""
        if self.device:
            return rng.random_sample(size=shape, dtype=dtype)
        return rng.random(size=shape, dtype=dtype)

    # -- values <-> storage ---------------------------------------------------------------
    def store(self, x: Any, dtype: str) -> Any:
        """float32/float64 values -> this module's storage of ``dtype``, rounded to nearest
        even (as numpy and ml_dtypes round)."""
        xp = self.xp
        if not self.device or dtype in ("fp64", "fp32", "fp16"):
            want = self.storage(dtype)
            return x if x.dtype == want else x.astype(want)
        x32 = x.astype(xp.float32) if x.dtype != xp.float32 else x
        if dtype == "bf16":
            return self._bf16_bits(x32)
        return self._fp8_codes(x32)

    def values(self, stored: Any, dtype: str) -> Any:
        """Storage of ``dtype`` -> float64 values (a new array)."""
        xp = self.xp
        if not self.device or dtype in ("fp64", "fp32", "fp16"):
            return stored.astype(xp.float64)
        if dtype == "bf16":
            return (stored.astype(xp.uint32) << 16).view(xp.float32).astype(xp.float64)
        return xp.take(self._fp8_table, stored.astype(xp.intp))

    def _bf16_bits(self, x32: Any) -> Any:
        xp = self.xp
        b = x32.view(xp.uint32)
        rounded = (b + xp.uint32(0x7FFF) + ((b >> 16) & xp.uint32(1))) >> 16
        nan = (b & xp.uint32(0x7FFFFFFF)) > xp.uint32(0x7F800000)
        quiet = (b >> 16) | xp.uint32(0x0040)
        return xp.where(nan, quiet, rounded).astype(xp.uint16)

    @cached_property
    def _fp8_table(self) -> Any:
        return self.xp.asarray(fp8_values())

    @cached_property
    def _fp8_positive(self) -> Any:
        """Codes 0..127 by value; 127 (NaN) stands at 480, where 448's next step would be,
        so that a value rounding past 448 becomes NaN as ml_dtypes makes it."""
        v = fp8_values()[:128].copy()
        v[FP8_NAN] = 480.0
        return self.xp.asarray(v)

    def _fp8_codes(self, x32: Any) -> Any:
        xp = self.xp
        table = self._fp8_positive
        m = xp.abs(x32).astype(xp.float64)
        hi = xp.clip(xp.searchsorted(table, m, side="left"), 0, FP8_NAN)
        lo = xp.clip(hi - 1, 0, FP8_NAN)
        d_lo, d_hi = m - xp.take(table, lo), xp.take(table, hi) - m
        take_hi = (d_hi < d_lo) | ((d_hi == d_lo) & (hi % 2 == 0))
        code = xp.where(take_hi, hi, lo)
        code = xp.where(xp.isnan(m), FP8_NAN, code).astype(xp.uint8)
        return code | (xp.signbit(x32).astype(xp.uint8) << 7)


HOST = Arrays(np, device=False)
