"""Non-temporal stores for the CPU elementwise kernels.

Why: a plain store to a line that is not in cache first reads the line (write-allocate, a
"read for ownership"), so a kernel that writes n bytes moves 2n. The naive l2norm pipeline
then moves 13 arrays' worth against the fused one's 4 (3.25x, not the model's 3.0x). A
non-temporal store writes the line without reading it; it is what a tuned CPU kernel uses
(STREAM built with non-temporal stores, glibc memcpy above its threshold). Below the
last-level cache the output should stay cached, so the non-temporal path is taken only for
larger outputs.

LLVM's loop vectoriser refuses a `!nontemporal` scalar store whose alignment is below the
vector width (the loop stays scalar), so the vector is explicit here: an intrinsic loads W
elements (W = 64 bytes / itemsize; unaligned loads), applies the op and stores the vector with
align 64 and `!nontemporal`. Kernel shape: prange over 64 KiB chunks of the output, per chunk
a scalar peel until the output is 64-byte aligned, the vector body, a scalar tail, a fence.
"""

from __future__ import annotations

import math
import os
import platform
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
from llvmlite import ir
from numba import njit, prange, types
from numba.core import cgutils
from numba.extending import intrinsic

from roofbench.cpu_cache import last_level_cache_bytes

VEC_BYTES = 64  # one cache line: every vector store writes a whole line
CHUNK_BYTES = 64 << 10  # of output per prange iteration (a multiple of VEC_BYTES)
THRESHOLD_ENV = "ROOFBENCH_NT_THRESHOLD"  # bytes; overrides the last-level cache size
OLD_THRESHOLD_ENV = "ROOFBENCH_STREAM_THRESHOLD"  # its earlier name, still read
_X86 = platform.machine().lower() in ("x86_64", "amd64", "i686", "x86")


# ----------------------------------------------------------------------------- threshold


def llc_bytes() -> int:
    """The last-level cache total, read as the STREAM size rule reads it."""
    return last_level_cache_bytes()


def nt_threshold() -> int:
    """Output bytes above which stores are non-temporal: $ROOFBENCH_NT_THRESHOLD, else the
    LLC."""
    name = THRESHOLD_ENV if os.environ.get(THRESHOLD_ENV) else OLD_THRESHOLD_ENV
    env = os.environ.get(name)
    if not env:
        return llc_bytes()
    try:
        v = int(env)
    except ValueError:
        v = -1
    if v < 0:
        raise ValueError(f"{name}={env!r}: give a number of bytes (an integer >= 0)")
    return v


def use_nt_stores(out: np.ndarray, threshold: int | None = None) -> bool:
    # Like glibc's non-temporal threshold: an output that fits the LLC stays cached for the
    # next kernel; one that does not would only evict everything on its way to memory.
    return out.nbytes > (nt_threshold() if threshold is None else threshold)


@dataclass(frozen=True)
class NtStoreKernel:
    """A CPU kernel with two paths: the cached prange loop and the non-temporal one."""

    cached: Callable[..., None]
    nt: Callable[..., None]
    out_arg: int  # position of the output array in the arguments
    threshold: int | None = None  # None: nt_threshold() at each call

    def __call__(self, *args) -> None:
        out = args[self.out_arg]
        (self.nt if use_nt_stores(out, self.threshold) else self.cached)(*args)


# ----------------------------------------------------------------------------- intrinsics


def _vec_sqrt(builder: ir.IRBuilder, v: ir.Value) -> ir.Value:
    name = f"llvm.sqrt.v{v.type.count}{v.type.element.intrinsic_name}"  # llvm.sqrt.v16f32
    fn = cgutils.get_or_insert_function(builder.module, ir.FunctionType(v.type, [v.type]), name)
    return builder.call(fn, [v])


# No fast-math flags: the vector ops round exactly like the scalar peel and tail (no FMA
# contraction of a*a + b*b), so a result does not depend on where the chunk boundaries fall.
_OPS: dict[str, tuple[int, Callable[[ir.IRBuilder, list[ir.Value]], ir.Value]]] = {
    "square": (1, lambda b, v: b.fmul(v[0], v[0])),
    "sqrt": (1, lambda b, v: _vec_sqrt(b, v[0])),
    "add": (2, lambda b, v: b.fadd(v[0], v[1])),
    "hypot": (2, lambda b, v: _vec_sqrt(b, b.fadd(b.fmul(v[0], v[0]), b.fmul(v[1], v[1])))),
}


def _vector_ptr(context, builder, aty, aval, idx, vty):
    data = context.make_array(aty)(context, builder, aval).data
    return builder.bitcast(builder.gep(data, [idx]), vty.as_pointer())


def _nt_codegen(op: str):
    _, fn = _OPS[op]

    def codegen(context, builder, sig, args):
        out_t, _, *in_ts = sig.args
        out, idx, *ins = args
        elem = context.get_value_type(out_t.dtype)
        itemsize = context.get_abi_sizeof(elem)
        vty = ir.VectorType(elem, VEC_BYTES // itemsize)
        vals = [builder.load(_vector_ptr(context, builder, t, v, idx, vty), align=itemsize)
                for t, v in zip(in_ts, ins, strict=True)]
        store = builder.store(fn(builder, vals), _vector_ptr(context, builder, out_t, out, idx,
                                                             vty), align=VEC_BYTES)
        store.set_metadata("nontemporal", builder.module.add_metadata([ir.IntType(32)(1)]))
        return context.get_dummy_value()

    return codegen


def _check(out, ins) -> bool:
    arrs = (out, *ins)
    return (all(isinstance(a, types.Array) and a.ndim == 1 and a.layout == "C" for a in arrs)
            and out.dtype in (types.float32, types.float64)
            and all(a.dtype == out.dtype for a in arrs))


@intrinsic
def _nt_square(typingctx, out, i, x):
    """out[i:i+W] = x[i:i+W]**2 with one aligned non-temporal vector store (out[i] 64-B aligned)."""
    if _check(out, (x,)) and isinstance(i, types.Integer):
        return types.void(out, types.intp, x), _nt_codegen("square")
    return None


@intrinsic
def _nt_sqrt(typingctx, out, i, x):
    """out[i:i+W] = sqrt(x[i:i+W]), as _nt_square."""
    if _check(out, (x,)) and isinstance(i, types.Integer):
        return types.void(out, types.intp, x), _nt_codegen("sqrt")
    return None


@intrinsic
def _nt_add(typingctx, out, i, x, y):
    """out[i:i+W] = x[i:i+W] + y[i:i+W], as _nt_square."""
    if _check(out, (x, y)) and isinstance(i, types.Integer):
        return types.void(out, types.intp, x, y), _nt_codegen("add")
    return None


@intrinsic
def _nt_hypot(typingctx, out, i, x, y):
    """out[i:i+W] = sqrt(x*x + y*y) over [i, i+W), as _nt_square."""
    if _check(out, (x, y)) and isinstance(i, types.Integer):
        return types.void(out, types.intp, x, y), _nt_codegen("hypot")
    return None


@intrinsic
def _nt_scale(typingctx, out, i, x, r):
    """out[i:i+W] = x[i:i+W] * r (r of out's dtype), as _nt_square."""
    if not (_check(out, (x,)) and isinstance(i, types.Integer) and r == out.dtype):
        return None

    def codegen(context, builder, sig, args):
        out_t, _, x_t, _ = sig.args
        o, idx, xv, rv = args
        elem = context.get_value_type(out_t.dtype)
        itemsize = context.get_abi_sizeof(elem)
        vty = ir.VectorType(elem, VEC_BYTES // itemsize)
        v = builder.load(_vector_ptr(context, builder, x_t, xv, idx, vty), align=itemsize)
        rs = builder.insert_element(ir.Constant(vty, ir.Undefined), rv, ir.IntType(32)(0))
        rs = builder.shuffle_vector(rs, ir.Constant(vty, ir.Undefined),
                                    ir.Constant(ir.VectorType(ir.IntType(32), vty.count),
                                                [0] * vty.count))
        store = builder.store(builder.fmul(v, rs),
                              _vector_ptr(context, builder, out_t, o, idx, vty), align=VEC_BYTES)
        store.set_metadata("nontemporal", builder.module.add_metadata([ir.IntType(32)(1)]))
        return context.get_dummy_value()

    return types.void(out, types.intp, x, r), codegen


@intrinsic
def _store_fence(typingctx):
    """Order this thread's non-temporal stores before whatever it does next (they are weakly
    ordered on x86: sfence; elsewhere a full fence)."""
    def codegen(context, builder, sig, args):
        if _X86:
            fn = cgutils.get_or_insert_function(builder.module,
                                                ir.FunctionType(ir.VoidType(), []),
                                                "llvm.x86.sse.sfence")
            builder.call(fn, [])
        else:
            builder.fence("seq_cst")
        return context.get_dummy_value()

    return types.void(), codegen


@intrinsic
def _address(typingctx, arr, i):
    """The byte address of arr[i] (for the alignment peel)."""
    if not (isinstance(arr, types.Array) and isinstance(i, types.Integer)):
        return None

    def codegen(context, builder, sig, args):
        data = context.make_array(sig.args[0])(context, builder, args[0]).data
        return builder.ptrtoint(builder.gep(data, [args[1]]), ir.IntType(64))

    return types.uint64(arr, types.intp), codegen


# ----------------------------------------------------------------------------- kernels
# One shape for all: prange over chunks; scalar peel to a 64-byte-aligned output; vector body
# (non-temporal); scalar tail; fence. The scalar statements are the cached kernels' own.


@njit(inline="always")
def _chunks(out, n):
    step = CHUNK_BYTES // out.itemsize
    return step, (n + step - 1) // step


@njit(inline="always")
def _spans(out, c, step, n):
    """Chunk ``c`` of the output as lo <= v0 <= v1 <= hi: [lo, v0) the scalar peel up to a
    64-byte-aligned element, [v0, v1) whole vectors (non-temporal), [v1, hi) the scalar tail."""
    lo = c * step
    hi = min(lo + step, n)
    v0 = lo
    while v0 < hi and _address(out, v0) % VEC_BYTES != 0:
        v0 += 1
    w = VEC_BYTES // out.itemsize
    return lo, v0, v0 + (hi - v0) // w * w, hi, w


@njit(inline="always")
def scale_row(x, y, r, n):
    """y[:n] = x[:n] * r for one row (r of y's dtype): the row's whole 64-byte lines of y with
    non-temporal stores, the unaligned head and the tail scalar. The caller fences (store_fence)
    once per block of rows."""
    v0 = 0
    while v0 < n and _address(y, v0) % VEC_BYTES != 0:
        y[v0] = x[v0] * r
        v0 += 1
    w = VEC_BYTES // y.itemsize
    v1 = v0 + (n - v0) // w * w
    for j in range(v0, v1, w):
        _nt_scale(y, j, x, r)
    # The tail as a row of its own, indexed from 0: numba wraps a negative index around, and an
    # index LLVM cannot prove non-negative (j from v1) keeps that select in every access, which
    # LLVM's znver4 and rocketlake models vectorise with vgather/vscatter (issue 28).
    xt, yt = x[v1:n], y[v1:n]
    for j in range(n - v1):
        yt[j] = xt[j] * r


store_fence = _store_fence  # for row kernels elsewhere (kernels/rownorm.py)


def rows_per_chunk(hidden: int, itemsize: int) -> int:
    """Rows per parallel iteration of a row kernel: about CHUNK_BYTES of output, one fence."""
    return max(1, CHUNK_BYTES // max(1, hidden * itemsize))


# The scalar peel and tail of a chunk, [lo, hi), each as a row of its own indexed from 0: numba
# wraps a negative index around, and an index LLVM cannot prove non-negative (i from lo) keeps
# that select in every access, which LLVM's znver4 and rocketlake models vectorise with
# vgather/vscatter (issue 28). Sliced, the loop is a plain contiguous one.


@njit(inline="always")
def _square_span(x, y, lo, hi):
    xs, ys = x[lo:hi], y[lo:hi]
    for i in range(hi - lo):
        ys[i] = xs[i] * xs[i]


@njit(inline="always")
def _add_span(x, y, z, lo, hi):
    xs, ys, zs = x[lo:hi], y[lo:hi], z[lo:hi]
    for i in range(hi - lo):
        zs[i] = xs[i] + ys[i]


@njit(inline="always")
def _sqrt_span(x, y, lo, hi):
    xs, ys = x[lo:hi], y[lo:hi]
    for i in range(hi - lo):
        ys[i] = math.sqrt(xs[i])


@njit(inline="always")
def _hypot_span(a, b, out, lo, hi):
    sa, sb, so = a[lo:hi], b[lo:hi], out[lo:hi]
    for i in range(hi - lo):
        so[i] = math.sqrt(sa[i] * sa[i] + sb[i] * sb[i])


@njit(parallel=True, cache=True)
def square(x, y, n):
    step, nchunks = _chunks(y, n)
    for c in prange(nchunks):
        lo, v0, v1, hi, w = _spans(y, c, step, n)
        _square_span(x, y, lo, v0)
        for i in range(v0, v1, w):
            _nt_square(y, i, x)
        _square_span(x, y, v1, hi)
        _store_fence()


@njit(parallel=True, cache=True)
def add(x, y, z, n):
    step, nchunks = _chunks(z, n)
    for c in prange(nchunks):
        lo, v0, v1, hi, w = _spans(z, c, step, n)
        _add_span(x, y, z, lo, v0)
        for i in range(v0, v1, w):
            _nt_add(z, i, x, y)
        _add_span(x, y, z, v1, hi)
        _store_fence()


@njit(parallel=True, cache=True)
def sqrt(x, y, n):
    step, nchunks = _chunks(y, n)
    for c in prange(nchunks):
        lo, v0, v1, hi, w = _spans(y, c, step, n)
        _sqrt_span(x, y, lo, v0)
        for i in range(v0, v1, w):
            _nt_sqrt(y, i, x)
        _sqrt_span(x, y, v1, hi)
        _store_fence()


@njit(parallel=True, cache=True)
def hypot(a, b, out, n):
    step, nchunks = _chunks(out, n)
    for c in prange(nchunks):
        lo, v0, v1, hi, w = _spans(out, c, step, n)
        _hypot_span(a, b, out, lo, v0)
        for i in range(v0, v1, w):
            _nt_hypot(out, i, a, b)
        _hypot_span(a, b, out, v1, hi)
        _store_fence()
