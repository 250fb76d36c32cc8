"""Counts read from a Triton kernel: run it once under Triton's interpreter with its loads,
stores, dots and floating-point arithmetic counted, masked lanes excluded.

``with counting() as c: kernel[grid](...)`` (the kernel an interpreted one: TRITON_INTERPRET=1
when it was decorated, or :func:`count_call`, which interprets a compiled kernel's Python)
fills ``c``:

- bytes: every lane a ``tl.load`` / ``tl.store`` moves where its mask is true, at the element
  size of its pointer; ``read_unique`` / ``written_unique``: bytes at distinct addresses (a
  tiled kernel re-reads tiles: its unique bytes are what a workload declares as moved once).
- FLOPs by kind, counted on valid lanes only. A lane is valid when every operand it came from
  is (a load's lane is valid where its mask is true; a constant everywhere), so the padding of
  a partial block is never counted. ``add`` (add, subtract), ``mul``, ``fma`` (2 each), ``max``
  (max, min), a reduction ``tl.sum`` / ``tl.max`` of k valid values k - 1 (``add`` / ``max``),
  ``dot``: 2 per valid product (a multiply and an add). Not counted in ``flops`` but listed:
  ``div``; sqrt, rsqrt, exp and the other special functions are not counted at all (the
  suite's convention).

The interpreter's builder (``triton.runtime.interpreter.interpreter_builder``) and its reduce
are patched for the duration of the context and restored after it.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import numpy as np

_KEY = "_roofbench_valid"
_ARITH = {"create_fadd": "add", "create_fsub": "add", "create_fmul": "mul", "create_fma": "fma",
          "create_fdiv": "div", "create_precise_divf": "div", "create_maximumf": "max",
          "create_minimumf": "max", "create_maxnumf": "max", "create_minnumf": "max"}
# Elementwise ops whose lanes inherit their operands' validity (not counted).
_ELEMENTWISE = ("create_fp_ext", "create_fp_trunc", "create_fp_to_fp", "create_si_to_fp",
                "create_ui_to_fp", "create_fp_to_si", "create_fp_to_ui", "create_int_cast",
                "create_bitcast", "create_exp", "create_exp2", "create_sqrt",
                "create_precise_sqrt", "create_rsqrt", "create_fneg", "create_fabs",
                "create_log", "create_log2", "create_sin", "create_cos", "create_erf",
                "create_floor", "create_ceil", "create_select", "create_clampf", "create_splat")
COUNTED = ("add", "mul", "fma", "max", "dot")


@dataclass
class KernelCounts:
    """What one or more kernel runs moved and computed (see the module docstring)."""

    read: int = 0
    written: int = 0
    ops: dict[str, int] = field(default_factory=dict)
    _read_at: list[np.ndarray] = field(default_factory=list, repr=False)
    _written_at: list[np.ndarray] = field(default_factory=list, repr=False)

    @property
    def flops(self) -> int:
        return sum(self.ops.get(k, 0) * (1 if k != "fma" else 2) for k in COUNTED)

    @property
    def bytes(self) -> int:
        return self.read + self.written

    @staticmethod
    def _unique(at: list[np.ndarray]) -> int:
        """Bytes at distinct element addresses (accesses of one size per address)."""
        if not at:
            return 0
        spans = np.unique(np.concatenate(at), axis=0)
        return int(spans[:, 1].sum())

    @property
    def read_unique(self) -> int:
        return self._unique(self._read_at)

    @property
    def written_unique(self) -> int:
        return self._unique(self._written_at)

    def add_op(self, kind: str, n: int) -> None:
        self.ops[kind] = self.ops.get(kind, 0) + int(n)


def _valid(h: Any) -> np.ndarray | None:
    """The valid lanes of an interpreter tensor handle, None where all are."""
    return getattr(h, _KEY, None)


def _mark(h: Any, valid: np.ndarray | None) -> None:
    # an attribute of the handle of its own (TensorHandle is a plain class in 3.6 and 3.9)
    if valid is not None and hasattr(h, "data"):
        setattr(h, _KEY, np.broadcast_to(valid, np.shape(h.data)))


def _lanes(out: Any, args: tuple[Any, ...]) -> np.ndarray:
    """The valid lanes of ``out``: every operand's validity, broadcast to its shape."""
    shape = np.shape(out.data)
    v = np.ones(shape, dtype=bool)
    for a in args:
        va = _valid(a)
        if va is not None:
            v = v & np.broadcast_to(va, shape)
    return v


def _itemsize(ptrs: Any) -> int:
    return int(ptrs.get_element_ty().primitive_bitwidth) // 8


@contextlib.contextmanager
def index_fix() -> Iterator[None]:
    """Triton 3.6's interpreter turns a scalar into a Python int with ``int(data)`` of a
    one-element array, which numpy >= 2.4 refuses: every ``range(0, n, BLOCK)`` over a runtime
    ``n`` fails. Inside this block the interpreter takes the element instead (as 3.9 does)."""
    from triton.runtime import interpreter as ti

    orig = getattr(ti, "_patch_lang_tensor", None)
    if orig is None:
        yield
        return

    def patched(tensor: Any, scope: Any) -> None:
        orig(tensor, scope)
        scope.set_attr(tensor, "__index__", lambda self: int(np.ravel(self.handle.data)[0]))

    ti._patch_lang_tensor = patched
    try:
        yield
    finally:
        ti._patch_lang_tensor = orig


@contextlib.contextmanager
def counting() -> Iterator[KernelCounts]:
    """Count what interpreted Triton kernels run inside the block do."""
    from triton.runtime import interpreter as ti

    b = ti.interpreter_builder
    c = KernelCounts()
    saved: dict[str, Any] = {}

    def patch(name: str, wrap: Callable[[Callable[..., Any]], Callable[..., Any]]) -> None:
        if hasattr(b, name):
            saved[name] = b.__dict__.get(name)
            setattr(b, name, wrap(getattr(b, name)))

    def masked_load(orig: Callable[..., Any]) -> Callable[..., Any]:
        def f(ptrs: Any, mask: Any, *rest: Any) -> Any:
            out = orig(ptrs, mask, *rest)
            m = np.broadcast_to(mask.data, np.shape(ptrs.data)).astype(bool)
            size = _itemsize(ptrs)
            c.read += int(m.sum()) * size
            at = ptrs.data[m].astype(np.uint64)
            c._read_at.append(np.stack([at, np.full_like(at, size)], axis=1))
            _mark(out, m)
            return out
        return f

    def masked_store(orig: Callable[..., Any]) -> Callable[..., Any]:
        def f(ptrs: Any, value: Any, mask: Any, *rest: Any) -> Any:
            m = np.broadcast_to(mask.data, np.shape(ptrs.data)).astype(bool)
            size = _itemsize(ptrs)
            c.written += int(m.sum()) * size
            at = ptrs.data[m].astype(np.uint64)
            c._written_at.append(np.stack([at, np.full_like(at, size)], axis=1))
            return orig(ptrs, value, mask, *rest)
        return f

    def arith(kind: str) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
        def wrap(orig: Callable[..., Any]) -> Callable[..., Any]:
            def f(*args: Any) -> Any:
                out = orig(*args)
                v = _lanes(out, args)
                c.add_op(kind, int(v.sum()))
                _mark(out, v)
                return out
            return f
        return wrap

    def inherit(orig: Callable[..., Any]) -> Callable[..., Any]:
        def f(*args: Any) -> Any:
            out = orig(*args)
            if any(_valid(a) is not None for a in args):
                _mark(out, _lanes(out, args))
            return out
        return f

    def shaped(move: Callable[[np.ndarray, Any], np.ndarray]
               ) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
        def wrap(orig: Callable[..., Any]) -> Callable[..., Any]:
            def f(arg: Any, how: Any, *rest: Any) -> Any:
                out = orig(arg, how, *rest)
                va = _valid(arg)
                if va is not None:
                    _mark(out, move(np.asarray(va), how))
                return out
            return f
        return wrap

    def dot(orig: Callable[..., Any]) -> Callable[..., Any]:
        def f(a: Any, b_: Any, d: Any, *rest: Any) -> Any:
            out = orig(a, b_, d, *rest)
            va = _valid(a)
            vb = _valid(b_)
            va = np.ones(np.shape(a.data), bool) if va is None else va
            vb = np.ones(np.shape(b_.data), bool) if vb is None else vb
            products = va.astype(np.int64) @ vb.astype(np.int64)
            c.add_op("dot", 2 * int(products.sum()))
            _mark(out, products > 0)
            return out
        return f

    patch("create_masked_load", masked_load)
    patch("create_masked_store", masked_store)
    for name, kind in _ARITH.items():
        patch(name, arith(kind))
    for name in _ELEMENTWISE:
        patch(name, inherit)
    patch("create_expand_dims", shaped(lambda v, axis: np.expand_dims(v, axis)))
    patch("create_broadcast", shaped(lambda v, shape: np.broadcast_to(v, shape)))
    patch("create_trans", shaped(lambda v, perm: np.transpose(v, perm)))
    patch("create_reshape", shaped(lambda v, shape: v.reshape(shape)))
    patch("create_dot", dot)
    reduce_impl = ti.ReduceOps.apply_impl

    def counted_reduce(self: Any, input: Any) -> Any:
        ret = reduce_impl(self, input)
        first = input[0] if isinstance(input, tuple) else input
        std = ti.tl.standard
        kind = ("add" if self.combine_fn is std._sum_combine else
                "max" if self.combine_fn in (std._elementwise_max, std._elementwise_min) else None)
        va = _valid(first.handle)
        v = np.ones(np.shape(first.handle.data), bool) if va is None else np.asarray(va)
        axis = self.axis
        n = v.reshape(-1).sum(keepdims=True) if axis is None else v.sum(axis=axis)
        if kind is not None:
            c.add_op(kind, int(np.maximum(n - 1, 0).sum()))
        outs = ret if isinstance(ret, (list, tuple)) else [ret]
        for o in outs:
            if hasattr(o, "handle"):
                _mark(o.handle, np.reshape(n > 0, np.shape(o.handle.data)))
        return ret

    ti.ReduceOps.apply_impl = counted_reduce
    try:
        with index_fix():
            yield c
    finally:
        ti.ReduceOps.apply_impl = reduce_impl
        for name, prev in saved.items():
            if prev is None:
                delattr(b, name)
            else:
                setattr(b, name, prev)


def count_call(launch: Any, *args: Any, **kwargs: Any) -> KernelCounts:
    """Counts of ``launch(*args, **kwargs)``, where ``launch`` is ``kernel[grid]`` of a
    compiled (``@triton.jit``) or interpreted kernel: a compiled one's Python runs once under
    the interpreter (on host copies of device arguments, copied back: the outputs are written
    as one call writes them)."""
    kernel, grid = _kernel_and_grid(launch)
    from triton.runtime.interpreter import InterpretedFunction
    from triton.runtime.jit import JITFunction

    if not isinstance(kernel, InterpretedFunction):
        kernel = InterpretedFunction(kernel.fn)
    # Compiled helpers it calls (its own, or Triton's tl.sum, tl.max, ... in a process that
    # imported triton without TRITON_INTERPRET) run interpreted too, for the call's duration.
    call = JITFunction.__call__
    JITFunction.__call__ = _interpreted_call
    try:
        with counting() as c:
            kernel[grid](*args, **kwargs)
    finally:
        JITFunction.__call__ = call
    return c


def _interpreted_call(self: Any, *args: Any, **kwargs: Any) -> Any:
    from triton.runtime.interpreter import InterpretedFunction

    return InterpretedFunction(self.fn)(*args, **kwargs)


def _kernel_and_grid(launch: Any) -> tuple[Any, Any]:
    """(kernel, grid) of ``kernel[grid]``: the launcher closure Triton's ``__getitem__``
    returns (compiled and interpreted alike) holds both as its free variables."""
    code = getattr(launch, "__code__", None)
    cells = getattr(launch, "__closure__", None) or ()
    free = dict(zip(code.co_freevars, (cell.cell_contents for cell in cells),
                    strict=False)) if code else {}
    if "self" in free and "grid" in free:
        return free["self"], free["grid"]
    raise TypeError("counts='kernel' takes a Triton launch, kernel[grid], got "
                    f"{type(launch).__name__}")


def kernel_counts(launch: Any, args: tuple[Any, ...], counts: str,
                  kwargs: dict[str, Any] | None = None) -> tuple[int, int, int]:
    """``roofbench.measure(kernel[grid], *args, counts="kernel", **kwargs)``: (FLOPs, bytes
    read, bytes written) of one call (its keywords, ``BLOCK=...``, included), read from the
    kernel. The bytes are the unique bytes (distinct
    addresses): what DRAM must move at least, each array once, re-reads left to the caches."""
    from triton.runtime.interpreter import InterpretedFunction

    if counts != "kernel":
        raise ValueError(f"counts={counts!r}: the one source of counts is 'kernel'")
    if isinstance(_kernel_and_grid(launch)[0], InterpretedFunction):
        raise ValueError("the kernel was decorated under TRITON_INTERPRET=1: an interpreter "
                         "run is never timed (count it with triton_counts.count_call)")
    c = count_call(launch, *args, **(kwargs or {}))
    return c.flops, c.read_unique, c.written_unique
