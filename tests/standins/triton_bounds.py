"""Triton's interpreter with its memory accesses bounds-checked (issue 58): the interpreter
loads and stores through raw host pointers, so a kernel whose mask was dropped reads or writes
past its tensors' ends, and the test process dies of heap corruption instead of failing.
``bounds_checked()`` keeps the extent of every tensor argument of each launch and checks each
masked-in pointer of a load or store against them before the access is made: one outside all
of them raises, naming the kernel, the access, the first bad element's offset and the tensor
it lies nearest to (a test failure, through the interpreter's InterpreterError)."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

import numpy as np


class OutOfBounds(IndexError):
    """A Triton kernel's load or store outside every tensor argument of its launch."""


@contextlib.contextmanager
def bounds_checked() -> Iterator[None]:
    """Within it, every interpreted launch checks its loads and stores (the interpreter's
    classes patched, restored after)."""
    from triton.runtime import interpreter as ti

    launch: dict[str, Any] = {"fn": "?", "ranges": []}
    init, load, store = (ti.GridExecutor._init_args_hst, ti.InterpreterBuilder.create_masked_load,
                         ti.InterpreterBuilder.create_masked_store)

    def init_args(self: Any, args_dev: Any, kwargs: Any) -> Any:
        args_hst, kwargs_hst = init(self, args_dev, kwargs)
        ranges = []
        for name, a in (*zip(self.arg_names, args_hst, strict=False),
                        *kwargs_hst.items()):
            if hasattr(a, "data_ptr") and hasattr(a, "element_size"):
                lo = int(a.data_ptr())
                ranges.append((lo, lo + int(a.numel()) * int(a.element_size()), name))
        launch.update(fn=getattr(self.fn, "__name__", "?"), ranges=ranges)
        return args_hst, kwargs_hst

    def check(ptrs: Any, mask: Any, itemsize: int, what: str) -> None:
        p = np.asarray(ptrs.data, dtype=np.uint64)
        m = np.broadcast_to(np.asarray(mask.data, dtype=bool), p.shape)
        p = p[m]
        if not p.size:
            return
        ok = np.zeros(p.shape, bool)
        for lo, hi, _ in launch["ranges"]:
            ok |= (p >= lo) & (p + itemsize <= hi)
        if ok.all():
            return
        bad = int(p[~ok][0])
        lo, hi, name = min(launch["ranges"], key=lambda r: min(abs(bad - r[0]), abs(bad - r[1])),
                           default=(0, 0, "?"))
        where = (f"{bad + itemsize - hi} bytes past the end of {name!r}" if bad >= lo
                 else f"{lo - bad} bytes before {name!r}")
        raise OutOfBounds(f"{launch['fn']}: {what} of {int((~ok).sum())} element(s) of "
                          f"{itemsize} bytes outside every tensor argument (first {where}, "
                          f"a tensor of {hi - lo} bytes): a mask missing?")

    def masked_load(self: Any, ptrs: Any, mask: Any, *a: Any, **k: Any) -> Any:
        check(ptrs, mask, ti._get_np_dtype(ptrs.get_element_ty()).itemsize, "load")
        return load(self, ptrs, mask, *a, **k)

    def masked_store(self: Any, ptrs: Any, value: Any, mask: Any, *a: Any, **k: Any) -> Any:
        check(ptrs, mask, np.asarray(value.data).dtype.itemsize, "store")
        return store(self, ptrs, value, mask, *a, **k)

    ti.GridExecutor._init_args_hst = init_args
    ti.InterpreterBuilder.create_masked_load = masked_load
    ti.InterpreterBuilder.create_masked_store = masked_store
    try:
        yield
    finally:
        ti.GridExecutor._init_args_hst = init
        ti.InterpreterBuilder.create_masked_load = load
        ti.InterpreterBuilder.create_masked_store = store
