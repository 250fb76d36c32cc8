"""Every argument of `roofbench.measure` and `roofbench.Session` checked at the door.

One function per kind of argument; each either returns the value as the record will hold it
or raises ``MeasureError``: one line that names the argument and what was given. Counts
(FLOPs, bytes) are whole numbers in int64's range (a reader refuses anything else, so a case
written with one would vanish from its own run), never booleans, strings or NaN; sizes are
positive dimensions whose product is at most 2^48 (the rule of `--size`); tolerances finite
and non-negative; dtypes, precisions and memory levels known names.
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
from roofbench.kernels.arrays import DTYPES

from roofbench.boundary import Refusal
from roofbench.roofline import LEVELS, PRECISIONS

# The most FLOPs or bytes one call can declare: int64, what every reader and CSV holds.
MAX_COUNT = (1 << 63) - 1
MAX_ELEMENTS = 1 << 48  # as `--size` (bench/suite/session.py)


class MeasureError(Refusal, ValueError):
    """A call of `roofbench.measure` or `roofbench.Session` that cannot be measured as given:
    one line naming the argument (a ValueError; under the CLI's boundary, exit 2)."""


def _shown(x: Any) -> str:
    text = repr(x) if isinstance(x, (int, float, str, bool, type(None))) else type(x).__name__
    return text if len(text) <= 60 else text[:57] + "..."


def count(x: Any, what: str, *, positive: bool = False) -> int:
    """A whole number of FLOPs or bytes: an int or a finite whole float, in [0, 2^63)
    (``positive``: at least 1); never a bool, a string, NaN or infinity."""
    floor = 1 if positive else 0
    kind = "a positive whole number" if positive else "a whole number >= 0"
    if isinstance(x, (bool, np.bool_)) or not isinstance(x, (int, float, np.integer,
                                                             np.floating)):
        raise MeasureError(f"{what} must be {kind}, got {_shown(x)}")
    if isinstance(x, (float, np.floating)) and not (math.isfinite(x)
                                                    and float(x).is_integer()):
        raise MeasureError(f"{what} must be {kind}, got {x!r}")
    n = int(x)
    if n < floor:
        raise MeasureError(f"{what} must be {'a positive whole number' if positive else '>= 0'}"
                           f", got {n}")
    if n > MAX_COUNT:
        shown = f"{x:.3g}" if isinstance(x, (float, np.floating)) else f"~2^{n.bit_length() - 1}"
        raise MeasureError(f"{what} is {shown}: more than 2^63-1, no count a call can have")
    return n


def is_array(x: Any) -> bool:
    return (hasattr(x, "nbytes") and hasattr(x, "shape") and hasattr(x, "dtype")
            and not isinstance(x, np.generic))


def byte_count(x: Any, what: str) -> int:
    """Bytes given as a number, an array (its nbytes), or a list/tuple of those (their sum)."""
    if is_array(x):
        return count(x.nbytes, f"{what} (an array's nbytes)")
    if isinstance(x, (list, tuple)):
        total = sum(byte_count(v, what) for v in x)
        return count(total, what)
    if isinstance(x, (Mapping, str, bytes, bool, np.bool_)) or not isinstance(
            x, (int, float, np.integer, np.floating)):
        raise MeasureError(f"{what} must be a byte count or arrays, got {_shown(x)}")
    return count(x, what)


def levels(given: Any) -> dict[str, Any]:
    """``bytes=``: a mapping of known memory levels to byte counts."""
    if given is None:
        return {}
    if not isinstance(given, Mapping):
        raise MeasureError(f"bytes= must be a dict of memory level -> bytes, got "
                           f"{_shown(given)}")
    for level in given:
        if not isinstance(level, str) or level not in LEVELS:
            raise MeasureError(f"bytes=: unknown memory level {_shown(level)}; choose from: "
                               f"{', '.join(LEVELS)}")
    return dict(given)


def dtype(x: Any) -> str | None:
    if x is None:
        return None
    if not isinstance(x, str) or x not in DTYPES:
        raise MeasureError(f"unknown dtype {_shown(x)}; choose from: {', '.join(DTYPES)}")
    return x


def precision(x: Any) -> str | None:
    if x is None:
        return None
    if not isinstance(x, str) or x not in PRECISIONS:
        raise MeasureError(f"unknown precision {_shown(x)}; choose from: "
                           f"{', '.join(PRECISIONS)}")
    return x


def name(x: Any) -> str | None:
    """``name=``: "workload" or "workload/variant", each part non-empty, one line."""
    if x is None:
        return None
    if not isinstance(x, str):
        raise MeasureError(f"name= must be a string 'workload' or 'workload/variant', got "
                           f"{_shown(x)}")
    parts = x.split("/")
    if len(parts) > 2 or not all(p.strip() for p in parts) or not x.isprintable():
        raise MeasureError(f"name= must be 'workload' or 'workload/variant' (printable, each "
                           f"part non-empty), got {x!r}")
    return x


def size(x: Any) -> list[int] | None:
    """``size=``: positive whole dimensions, their product at most 2^48."""
    if x is None:
        return None
    if isinstance(x, (str, bytes, Mapping)) or not isinstance(x, Sequence):
        raise MeasureError(f"size= must be a list of dimensions, got {_shown(x)}")
    dims = [count(d, f"size[{i}]", positive=True) for i, d in enumerate(x)]
    if not dims:
        raise MeasureError("size= needs at least one dimension")
    if math.prod(dims) > MAX_ELEMENTS:
        raise MeasureError(f"size= {dims} is too large: more than 2^48 elements")
    return dims


def tolerance(x: Any) -> float | None:
    if x is None:
        return None
    if isinstance(x, (bool, np.bool_)) or not isinstance(x, (int, float, np.integer,
                                                             np.floating)) \
            or not math.isfinite(x) or x < 0:
        raise MeasureError(f"tolerance= must be a finite number >= 0, got {_shown(x)}")
    return float(x)


def _arrays_of(x: Any) -> list[Any]:
    if isinstance(x, Mapping):
        return list(x.values())
    if isinstance(x, (list, tuple)):
        return list(x)
    return [x]


def output(x: Any) -> Any:
    """``output=``: the arrays the function writes in place (one, a tuple/list or a dict)."""
    if x is None:
        return None
    named = (list(x.items()) if isinstance(x, Mapping) else
             list(enumerate(x)) if isinstance(x, (list, tuple)) else [(None, x)])
    for key, a in named:
        if not is_array(a):
            raise MeasureError(f"output= must be the arrays the function writes (one, a "
                               f"tuple/list or a dict of them), got {_shown(a)}")
        if isinstance(a, np.ndarray) and not a.flags.writeable:
            which = "output=" if key is None else f"output[{key!r}]"
            raise MeasureError(f"{which} is a read-only array ({a.dtype}{list(a.shape)}): "
                               "the function cannot write it, nor can roofbench fill it with "
                               "NaN to check that it does; pass a writable array")
    return x


def reference(x: Any) -> Any:
    """``reference=``: a callable, or arrays (numbers) of the outputs' shapes."""
    if x is None or callable(x):
        return x
    for r in _arrays_of(x):
        if is_array(r):
            continue
        try:
            kind = np.asarray(r).dtype.kind
        except (TypeError, ValueError):
            kind = "O"
        if kind not in "biuf":
            raise MeasureError(f"reference= must be arrays of numbers or a callable, got "
                               f"{_shown(r)}")
    return x


def function(fn: Any) -> Callable[..., Any]:
    if not callable(fn):
        raise MeasureError(f"the function to measure must be callable, got {_shown(fn)}")
    return fn


def roofs_arg(x: Any) -> Any:
    from roofbench.roof_records import RoofSet

    if x is None or isinstance(x, (RoofSet, str, os.PathLike)):
        if isinstance(x, str) and not x.strip():
            raise MeasureError("roofs= is an empty path")
        return x
    raise MeasureError(f"roofs= must be a RoofSet or a roofs file's path, got {_shown(x)}")


def out_arg(x: Any) -> Path | None:
    """``out=``: a folder path, made absolute now (a later chdir changes nothing)."""
    if x is None:
        return None
    if not isinstance(x, (str, os.PathLike)) or (isinstance(x, str) and not x.strip()):
        raise MeasureError(f"out= must be a folder path, got {_shown(x)}")
    if "\0" in os.fspath(x):
        raise MeasureError(f"out= {os.fspath(x)!r} holds a NUL character: no path can")
    try:
        return Path(x).absolute()
    except (OSError, ValueError) as e:  # a deleted working directory, a NUL in the path
        raise MeasureError(f"out= {x!r} cannot be resolved ({e})") from None
