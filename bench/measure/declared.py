"""What a measured call declares: its counts (``Counts``: FLOPs, bytes per level, dtype,
precision, size) and how its result is checked (``Check``), checked once by ``declare`` into
the frozen ``Call`` that the session, the pytest fixtures and ``ab`` measure
(callables.measure_callable)."""

from __future__ import annotations

import inspect
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from roofbench.kernels.arrays import DTYPES
from roofbench.kernels.triton_counts import kernel_counts

from roofbench.errors_text import first_line

from . import door
from .door import MeasureError, byte_count

# Tolerance of the relative norm error when none is given: about a thousand units in the
# last place of each storage type (a long reduction in fp32 stays well inside 1e-4).
DEFAULT_TOLERANCE = {"fp64": 1e-12, "fp32": 1e-4, "fp16": 5e-3, "bf16": 3e-2, "fp8": 0.1}
_TORCH_DTYPES = {"float64": "fp64", "float32": "fp32", "float16": "fp16", "bfloat16": "bf16",
                 "float8_e4m3fn": "fp8"}


# -- what the call declares -----------------------------------------------------------------

@dataclass(frozen=True)
class Counts:
    """What one call of the function does, as its caller counts it."""

    flops: int
    bytes: dict[str, int]  # memory level -> bytes moved through it
    dtype: str
    precision: str  # the compute roof it meets
    size: list[int]
    # The bytes of each distinct array given as reads=/writes= (empty where any was given as
    # a number): how many streams the call moves, the DRAM probe its samples pair with.
    arrays: tuple[int, ...] = ()

    @property
    def cores(self) -> str:
        return "tensor" if self.precision.endswith("_tc") else "simt"

    @property
    def ai(self) -> dict[str, float]:
        return {level: self.flops / b for level, b in self.bytes.items() if b > 0}


def dtype_name(a: Any) -> str | None:
    """The roofbench dtype name of an array's floating dtype (numpy, CuPy, torch), or None."""
    dt = getattr(a, "dtype", None)
    if dt is None:
        return None
    text = str(dt).removeprefix("torch.")
    if text in _TORCH_DTYPES and not isinstance(dt, np.dtype):
        return _TORCH_DTYPES[text]
    try:
        npdt = np.dtype(dt)
    except TypeError:
        return None
    return next((name for name, d in DTYPES.items() if d == npdt), None)


def array_args(args: Sequence[Any]) -> list[Any]:
    return [a for a in args if hasattr(a, "shape") and hasattr(a, "dtype")]


def declared_counts(args: Sequence[Any], *, flops: Any, reads: Any = 0, writes: Any = 0,
                    bytes: Mapping[str, Any] | None = None, dtype: str | None = None,
                    precision: str | None = None, size: Sequence[int] | None = None) -> Counts:
    """The declared counts, checked: FLOPs a whole number >= 0 (0: data movement, placed by
    bandwidth); bytes as reads + writes (DRAM) and/or per memory level, not all zero; the
    dtype given or that of the first floating array argument."""
    f = door.count(flops, "flops")
    per_level: dict[str, int] = {}
    dram = door.count(byte_count(reads, "reads") + byte_count(writes, "writes"), "reads+writes")
    if dram:
        per_level["dram"] = dram
    for level, b in door.levels(bytes).items():
        if level in per_level:
            raise MeasureError(f"bytes[{level!r}] given twice: by reads/writes and by bytes=")
        per_level[level] = byte_count(b, f"bytes[{level!r}]")
    if not any(per_level.values()):
        if f == 0:
            raise MeasureError("flops=0 and no bytes: a call that computes nothing and moves "
                               "nothing has no place on a roofline; pass reads=/writes=")
        raise MeasureError("no bytes given: pass reads=/writes= (bytes or arrays) or "
                           "bytes={'dram': ...}")
    dtype, precision = door.dtype(dtype), door.precision(precision)
    size = door.size(size)
    arrays = array_args(args)
    if dtype is None:
        dtype = next((d for d in map(dtype_name, arrays) if d), None)
        if dtype is None:
            raise MeasureError("no floating-point array among the arguments: pass dtype=")
    # As in a run: low-precision storage computes in fp32 unless the caller says otherwise.
    prec = precision or (dtype if dtype in ("fp64", "fp32") else "fp32")
    if size is None:
        big = max(arrays, key=lambda a: int(getattr(a, "nbytes", 0)), default=None)
        size = list(big.shape) if big is not None else []
    # No array argument (a closure with its counts): a case without dimensions, recorded and
    # read back as such (its key ends in "/"), never refused.
    return Counts(f, per_level, dtype, prec, [int(s) for s in size],
                  declared_arrays(reads, writes))


def declared_arrays(reads: Any, writes: Any) -> tuple[int, ...]:
    """The bytes of each distinct array read, then of each written (an array updated in
    place is in both: its lines go both ways), or () where any was given as a number: then
    the call's streams are unknown."""
    out: list[int] = []
    for x in (reads, writes):
        seen: dict[int, int] = {}
        for a in (x if isinstance(x, (list, tuple)) else [x]):
            if door.is_array(a):
                seen[id(a)] = int(a.nbytes)
            elif a != 0:  # a byte count: the arrays behind it are not known
                return ()
        out += seen.values()
    return tuple(out)


@dataclass(frozen=True)
class Check:
    """How one call's result is checked: against ``reference`` (None: not checked), in the
    arrays ``output`` names (None: what the call returns), within ``tolerance`` in relative
    norm error (None: the dtype's ``DEFAULT_TOLERANCE``)."""

    reference: Any = None
    output: Any = None
    tolerance: float | None = None

    @property
    def given(self) -> bool:
        return self.reference is not None

    def tolerance_for(self, dtype: str) -> float:
        return self.tolerance if self.tolerance is not None else DEFAULT_TOLERANCE[dtype]


@dataclass(frozen=True)
class Call:
    """One call to measure, as declared: the function, its arguments (``kwargs``: the
    function's own keywords), the case's name, its counts and its check."""

    fn: Callable[..., Any]
    args: tuple[Any, ...]
    name: str
    counts: Counts
    check: Check
    kwargs: Mapping[str, Any] = field(default_factory=dict)


def declare(fn: Any, args: Sequence[Any], kwargs: Mapping[str, Any] | None = None, *,
            flops: Any = None, reads: Any = 0, writes: Any = 0,
            bytes: Mapping[str, Any] | None = None, dtype: str | None = None,
            precision: str | None = None, name: str | None = None, reference: Any = None,
            output: Any = None, tolerance: float | None = None,
            size: Sequence[int] | None = None, counts: str | None = None,
            named_after: Callable[..., Any] | None = None) -> Call:
    """``roofbench.measure``'s keywords, each checked (a ``MeasureError`` names a bad one),
    as the ``Call`` the session, the fixtures and ``ab`` measure. ``counts="kernel"``: FLOPs
    and bytes read from a Triton ``kernel[grid]``. The name defaults to that of
    ``named_after`` (else ``fn``)."""
    door.function(fn)
    given, tol = door.name(name), door.tolerance(tolerance)
    out = door.output(output)
    check = Check(door.reference(reference), out, tol)
    if counts is not None or str(getattr(fn, "__module__", "")).startswith("triton."):
        no_complex(args)  # a Triton launch (kernel[grid]): Triton has no complex type
    if counts is not None:
        flops, reads, writes = counted(fn, tuple(args), dict(kwargs or {}), counts)
    n = declared_counts(args, flops=flops, reads=reads, writes=writes, bytes=bytes, dtype=dtype,
                        precision=precision, size=size)
    label = given or getattr(named_after or fn, "__qualname__", None) or "callable"
    return Call(fn, tuple(args), label, n, check, dict(kwargs or {}))


def no_complex(args: Sequence[Any]) -> None:
    """A Triton kernel's arguments: a complex array is one line (Triton's own KeyError was a
    traceback from inside its launcher)."""
    for i, a in enumerate(args):
        kind = str(getattr(a, "dtype", "")).removeprefix("torch.")
        if door.is_array(a) and kind.startswith("complex"):
            raise MeasureError(f"a Triton kernel's argument {i} is a {kind} array, and Triton "
                               "has no complex type: pass its real and imaginary parts as "
                               "float arrays (torch.view_as_real)")


def counted(launch: Any, args: tuple[Any, ...], kwargs: dict[str, Any],
            counts: str) -> tuple[int, int, int]:
    """(FLOPs, bytes read, bytes written) read from a Triton ``kernel[grid]`` run once under
    the interpreter with the call's arguments and keywords; what stops the count (an
    argument Triton has no type for, a missing keyword, no Triton launch) is one line."""
    try:
        return kernel_counts(launch, args, counts, kwargs)
    except Exception as e:  # the interpreter's own error, in a line that says what failed
        raise MeasureError(f"counts='kernel': the kernel could not be counted under "
                           f"Triton's interpreter: {first_line(e)}") from None


# roofbench.measure's keywords that declare a call: declare's own, but ``named_after``
DECLARED = frozenset(p.name for p in inspect.signature(declare).parameters.values()
                     if p.kind is p.KEYWORD_ONLY) - {"named_after"}
