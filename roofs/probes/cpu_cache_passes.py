"""The cache sweep's kernels (cpu_cache_sweep.py measures with them): the cycle counter, and
the two passes over a thread's chunk, written as LLVM IR so that they are what carm-roofline's
hand-written loops are: vector moves only, every address a base register plus a constant.

- ``read_passes(x, reps)``: every whole trip of ``READ_LINES`` 64-byte lines of ``x`` loaded,
  ``reps`` times, the loads volatile (LLVM keeps them though their values go nowhere).
- ``add_passes(x, reps)``: ``x`` as groups of three lines a, b, c: c = a with b loaded beside
  it, then a = c (two loads per store, carm's 2:1), ``reps // 2`` times each.

Both return the lines they moved, which the sweep checks against the bytes it counts. An ALU
instruction per line loaded costs L1 bandwidth: on the Xeon VM (Rocket Lake-class) one 512-bit
xor per two lines held L1 read at 0.85 of carm's figure (docs/cpu-roofs.md).
"""

from __future__ import annotations

from typing import Any

import numpy as np
from llvmlite import ir
from numba import njit, types
from numba.core import cgutils
from numba.extending import intrinsic


def _ticks_typing(typingctx: Any) -> Any:
    """The cycle counter (x86: rdtsc, constant-rate on every CPU since ~2008)."""
    def codegen(context: Any, builder: Any, sig: Any, args: Any) -> Any:
        fn = cgutils.get_or_insert_function(builder.module, ir.FunctionType(ir.IntType(64), []),
                                            "llvm.readcyclecounter")
        return builder.call(fn, [])
    return types.uint64(), codegen


cycle_counter: Any = intrinsic(_ticks_typing)  # called without arguments inside njit code


@njit(cache=True)
def ticks() -> int:
    return cycle_counter()


LINE_WORDS = 8  # 8-byte words per 64-byte line: one vector of the widest width (AVX-512)
READ_LINES = 8  # lines one trip of the read loop loads
GROUPS = 4  # (a, b, c) line groups one trip of the read+write loop moves
_LINE = ir.VectorType(ir.IntType(64), LINE_WORDS)  # narrower CPUs: LLVM splits it


class _VolatileLoad(ir.instructions.LoadInstr):
    """``load volatile``: kept and never folded into an ALU instruction, though its value is
    unused (llvmlite's builder has no volatile flag)."""

    def descr(self, buf: list[str]) -> None:
        out: list[str] = []
        super().descr(out)
        buf.append("load volatile " + "".join(out).removeprefix("load "))


def _load_line(builder: ir.IRBuilder, base: ir.Value, line: ir.Value) -> ir.Value:
    ld = _VolatileLoad(builder.block, builder.gep(base, [line]), typ=_LINE)
    ld.align = 8  # lines are 64-byte aligned here; the tests' buffers need not be
    builder._insert(ld)
    return ld


def _passes(builder: ir.IRBuilder, n: ir.Value, reps: ir.Value, trips: ir.Value,
            bodies: list[Any], tag: str) -> ir.Value:
    """``for _ in range(reps // len(bodies)): for body in bodies: for i in range(trips):
    body(i)``, the trips counted from 0 in a loop of their own; returns the trips run."""
    entry = builder.block
    rounds = builder.sdiv(reps, reps.type(len(bodies)))
    total = builder.mul(builder.mul(rounds, trips), n.type(len(bodies)))
    outer = builder.append_basic_block(f"{tag}.pass")
    latch = builder.append_basic_block(f"{tag}.latch")
    done = builder.append_basic_block(f"{tag}.done")
    go = builder.and_(builder.icmp_signed(">", rounds, rounds.type(0)),
                      builder.icmp_unsigned(">", trips, n.type(0)))
    builder.cbranch(go, outer, done)
    builder.position_at_end(outer)
    r = builder.phi(reps.type)
    pre = outer
    for k, body in enumerate(bodies):
        loop = builder.append_basic_block(f"{tag}.trip{k}")
        after = builder.append_basic_block(f"{tag}.after{k}")
        builder.branch(loop)
        builder.position_at_end(loop)
        i = builder.phi(n.type)
        body(i)
        nxt = builder.add(i, n.type(1))
        builder.cbranch(builder.icmp_unsigned("<", nxt, trips), loop, after)
        i.add_incoming(n.type(0), pre)
        i.add_incoming(nxt, loop)
        builder.position_at_end(after)
        pre = after
    builder.branch(latch)
    builder.position_at_end(latch)
    rn = builder.add(r, r.type(1))
    builder.cbranch(builder.icmp_signed("<", rn, rounds), outer, done)
    r.add_incoming(r.type(0), entry)
    r.add_incoming(rn, latch)
    builder.position_at_end(done)
    ran = builder.phi(n.type)
    ran.add_incoming(n.type(0), entry)
    ran.add_incoming(total, latch)
    return ran


def _words(x: Any, reps: Any) -> bool:
    return (isinstance(x, types.Array) and x.ndim == 1 and x.dtype == types.uint64
            and x.layout == "C" and reps == types.intp)


def _lines_of(context: Any, builder: ir.IRBuilder, aty: Any, av: ir.Value
              ) -> tuple[ir.Value, ir.Value]:
    arr = context.make_array(aty)(context, builder, av)
    return builder.bitcast(arr.data, _LINE.as_pointer()), cgutils.unpack_tuple(
        builder, arr.shape, 1)[0]


def _load_lines_typing(typingctx: Any, x: Any, reps: Any) -> Any:
    """Every whole trip of ``READ_LINES`` lines of ``x`` loaded, ``reps`` times; returns the
    lines loaded."""
    if not _words(x, reps):
        return None

    def codegen(context: Any, builder: ir.IRBuilder, sig: Any, args: Any) -> ir.Value:
        base, n = _lines_of(context, builder, sig.args[0], args[0])

        def trip(i: ir.Value) -> None:
            first = builder.mul(i, n.type(READ_LINES))
            for k in range(READ_LINES):
                _load_line(builder, base, builder.add(first, n.type(k)))

        trips = builder.udiv(n, n.type(LINE_WORDS * READ_LINES))
        ran = _passes(builder, n, args[1], trips, [trip], "read")
        return builder.mul(ran, n.type(READ_LINES))

    return types.intp(x, reps), codegen


def _copy_lines_typing(typingctx: Any, x: Any, reps: Any) -> Any:
    """``x`` as groups of three lines (a, b, c), every whole trip of ``GROUPS`` groups: c = a
    with b loaded beside it, then a = c with b loaded, ``reps // 2`` times; returns the lines
    moved (loaded or stored)."""
    if not _words(x, reps):
        return None

    def codegen(context: Any, builder: ir.IRBuilder, sig: Any, args: Any) -> ir.Value:
        base, n = _lines_of(context, builder, sig.args[0], args[0])

        def copy(src: int, dst: int) -> Any:
            def trip(i: ir.Value) -> None:
                first = builder.mul(i, n.type(3 * GROUPS))
                for g in range(GROUPS):
                    at = builder.add(first, n.type(3 * g))
                    v = _load_line(builder, base, builder.add(at, n.type(src)))
                    _load_line(builder, base, builder.add(at, n.type(1)))
                    builder.store(v, builder.gep(base, [builder.add(at, n.type(dst))]),
                                  align=8)
            return trip

        trips = builder.udiv(n, n.type(3 * LINE_WORDS * GROUPS))
        ran = _passes(builder, n, args[1], trips, [copy(0, 2), copy(2, 0)], "rw")
        return builder.mul(ran, n.type(3 * GROUPS))

    return types.intp(x, reps), codegen


_load_lines: Any = intrinsic(_load_lines_typing)
_copy_lines: Any = intrinsic(_copy_lines_typing)


@njit(cache=True)
def read_passes(x: np.ndarray, reps: int) -> int:
    # Loads only, as carm-roofline's 1:0 test: no ALU instruction takes the loaded lines (one
    # 512-bit xor per two loads held L1 at 0.85 of carm's figure on the Xeon VM, where pure
    # loads reach it), and every address a base register plus a constant. The trip's lines
    # are volatile loads: LLVM keeps them though nothing reads their values.
    return _load_lines(x, reps)


@njit(cache=True)
def add_passes(x: np.ndarray, reps: int) -> int:
    # Two loads per store, carm-roofline's default 2:1 (and STREAM add's, vector_add's), moves
    # only: each group of three lines a, b, c; c = a (b loaded beside it), then a = c, ``reps``
    # even. A stored line is not one just loaded: below L1 it is read for ownership first, as
    # a kernel's output is.
    return _copy_lines(x, reps)
