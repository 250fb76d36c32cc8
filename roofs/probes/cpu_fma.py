"""The CPU's peak FMA throughput: explicit vector chains in registers, one thread per core.

Each thread keeps ``accumulators`` vectors of the widest width in registers and updates every
one as ``v = v * a + b``, ``STEPS`` times per loop trip, for ``iters`` trips: the C
intrinsics probe (scripts/c_ref/fma_peak.c) written as LLVM IR. The shape comes from the CPU
numba compiles for (``fma_model.fma_shape``: vector width from its features, chains from its
register file and FMA latency x pipes), so it holds by construction on CPUs never run here;
tests/roofs/test_cpu_codegen.py compiles it for them and reads the loop back.

Why explicit vectors: a scalar loop over a row of ``12 x lanes`` elements left to LLVM's
vectorisers comes out scalar, xmm, ymm or zmm depending on the row length, the CPU's tuning and
LLVM's pass order. On Zen 3 (AVX2) the 48-element FP64 row is fully unrolled before the loop
vectoriser runs and stays 48 scalar FMAs: 10 GFLOP/s against the C probe's 83-95 (details in
docs/cpu-roofs.md). An IR vector type keeps its width; LLVM also keeps it under an Intel
``prefer-256-bit`` tuning (that setting steers only the vectorisers), so the probe is zmm code
on AVX-512 cores even in a process started with numba's default tuning.

The multiply and the add carry the ``contract`` flag: one FMA where the CPU has it, a
multiply and an add elsewhere (the FLOP count is the same).
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from functools import cache
from typing import Any

import numba
import numpy as np
from llvmlite import ir
from numba import njit, prange, types
from numba.core import cgutils
from numba.core.dispatcher import Dispatcher
from numba.extending import intrinsic

from roofbench.roof_records import Roof

from .cpu_features import host_cpu_features
from .fma_model import FmaShape, fma_shape
from .numba_env import env, threads, timing_evidence
from .x86_asm import fma_asm_facts

STEPS = 8  # dependent FMA sweeps over the accumulators per loop trip
FMA_CONSTANTS = {"fp64": (0.999999, 1e-6), "fp32": (0.9999, 1e-4)}  # v -> v*a + b, fixed point 1
REPEAT_SPREAD = 0.10  # repeats of one roof further apart than this are flagged


def target_cpu() -> tuple[str, str]:
    """The LLVM CPU name and feature string numba compiles for: ``NUMBA_CPU_NAME`` /
    ``NUMBA_CPU_FEATURES`` when set (numba's own rule: features default to the host's), else
    the host's."""
    import llvmlite.binding as ll

    # numba.config sets its settings at run time: numba's types do not list them
    name = numba.config.CPU_NAME or ll.get_host_cpu_name()  # type: ignore[attr-defined]
    feats = numba.config.CPU_FEATURES  # type: ignore[attr-defined]
    return str(name), str(feats if feats is not None else host_cpu_features())


def probe_shape() -> FmaShape:
    """The FMA probe's shape for the CPU numba compiles for."""
    return fma_shape(*target_cpu())


def fma_flops(threads: int, row: int, steps: int, iters: int) -> int:
    """FLOPs of one FMA-probe call: 2 per FMA per lane; each thread updates ``row`` elements
    (accumulators x lanes) ``steps`` times per iteration."""
    return 2 * threads * row * steps * iters


def _splat(builder: ir.IRBuilder, scalar: ir.Value, vty: ir.VectorType) -> ir.Value:
    v = builder.insert_element(ir.Constant(vty, ir.Undefined), scalar, ir.IntType(32)(0))
    zeros = ir.Constant(ir.VectorType(ir.IntType(32), vty.count), [0] * vty.count)
    return builder.shuffle_vector(v, ir.Constant(vty, ir.Undefined), zeros)


@cache
def _chains(lanes: int, accumulators: int, steps: int) -> Callable[..., Any]:
    """``_fma_chains(x, t, a, b, iters)``: row ``t`` of ``x`` as ``accumulators`` vectors of
    ``lanes``, loaded once, ``iters x steps`` FMA sweeps in registers, stored back."""

    @intrinsic
    def _fma_chains(typingctx, x, t, a, b, iters):
        if not (isinstance(x, types.Array) and x.ndim == 2 and x.layout == "C"
                and x.dtype in (types.float32, types.float64) and a == x.dtype
                and b == x.dtype and isinstance(t, types.Integer)
                and isinstance(iters, types.Integer)):
            return None

        def codegen(context, builder, sig, args):
            xty = sig.args[0]
            xv, tv, av, bv, nv = args
            elem = context.get_value_type(xty.dtype)
            vty = ir.VectorType(elem, lanes)
            align = context.get_abi_sizeof(elem)  # rows are page-aligned; do not rely on it
            arr = context.make_array(xty)(context, builder, xv)
            zero = context.get_constant(types.intp, 0)
            row = cgutils.get_item_pointer(context, builder, xty, arr, [tv, zero])
            vrow = builder.bitcast(row, vty.as_pointer())
            ptrs = [builder.gep(vrow, [ir.IntType(64)(k)]) for k in range(accumulators)]
            init = [builder.load(p, align=align) for p in ptrs]
            va, vb = _splat(builder, av, vty), _splat(builder, bv, vty)
            n = nv  # intp
            entry = builder.block
            loop = builder.append_basic_block("fma.loop")
            done = builder.append_basic_block("fma.done")
            builder.cbranch(builder.icmp_signed(">", n, n.type(0)), loop, done)

            builder.position_at_end(loop)
            i = builder.phi(n.type)
            acc = [builder.phi(vty) for _ in range(accumulators)]
            cur = list(acc)
            for _ in range(steps):
                cur = [builder.fadd(builder.fmul(v, va, flags=("contract",)), vb,
                                    flags=("contract",)) for v in cur]
            nxt = builder.add(i, n.type(1))
            builder.cbranch(builder.icmp_signed("<", nxt, n), loop, done)
            i.add_incoming(n.type(0), entry)
            i.add_incoming(nxt, loop)
            for phi, v0, v1 in zip(acc, init, cur, strict=True):
                phi.add_incoming(v0, entry)
                phi.add_incoming(v1, loop)

            builder.position_at_end(done)
            final = []
            for v0, v1 in zip(init, cur, strict=True):
                phi = builder.phi(vty)
                phi.add_incoming(v0, entry)
                phi.add_incoming(v1, loop)
                final.append(phi)
            for p, v in zip(ptrs, final, strict=True):  # every chain ends in a store: no dead code
                builder.store(v, p, align=align)
            return context.get_dummy_value()

        return types.void(x, types.intp, a, b, types.intp), codegen

    return _fma_chains


@cache
def fma_kernel(lanes: int, accumulators: int, steps: int = STEPS
               ) -> Dispatcher[Callable[..., None]]:
    """The probe: ``probe(x, a, b, iters)``, one row of ``x`` per thread (prange)."""
    chains = _chains(lanes, accumulators, steps)

    @njit(parallel=True)
    def fma_probe(x, a, b, iters):
        for t in prange(x.shape[0]):
            chains(x, t, a, b, iters)

    return fma_probe


def compile_fma_kernel(precision: str, shape: FmaShape | None = None) -> tuple[Any, Any]:
    """Compile the probe for ``precision`` without running it: (dispatcher, signature).
    The codegen tests use it under a foreign NUMBA_CPU_NAME, where running would fault."""
    shape = shape or probe_shape()
    nbt = types.float64 if precision == "fp64" else types.float32
    kernel = fma_kernel(shape.lanes(8 if precision == "fp64" else 4), shape.accumulators)
    sig = (types.Array(nbt, 2, "C"), nbt, nbt, types.intp)
    kernel.compile(sig)
    return kernel, sig


def aligned_rows(threads: int, row: int, dtype: np.dtype, rng: np.random.Generator) -> np.ndarray:
    # One 4 KiB page per thread: rows sharing a cache line would ping-pong between cores.
    item = dtype.itemsize
    stride = -(-row * item // 4096) * 4096 // item
    buf = np.empty(threads * stride + 4096 // item, dtype=dtype)
    off = (-buf.ctypes.data % 4096) // item
    x = buf[off:off + threads * stride].reshape(threads, stride)
    x[:] = rng.uniform(0.5, 1.5, size=x.shape).astype(dtype)
    return x


class FmaProbe:
    """The peak-FMA probe for one precision, ready to call; compiles and inspects on init."""

    def __init__(self, precision: str, target_s: float = 0.05,
                 shape: FmaShape | None = None) -> None:
        if precision not in FMA_CONSTANTS:
            raise ValueError(f"FMA probe precision must be one of {sorted(FMA_CONSTANTS)}")
        self.precision = precision
        self.dtype = np.dtype(np.float64 if precision == "fp64" else np.float32)
        self.threads = threads()
        a, b = FMA_CONSTANTS[precision]
        self.a, self.b = self.dtype.type(a), self.dtype.type(b)
        self.shape = shape or probe_shape()
        self.lanes = self.shape.lanes(self.dtype.itemsize)
        self.accumulators = self.shape.accumulators
        self.row = self.lanes * self.accumulators
        self.kernel, sig = compile_fma_kernel(precision, self.shape)
        self.x = aligned_rows(self.threads, self.row, self.dtype, np.random.default_rng())
        self.asm = fma_asm_facts(self.kernel.inspect_asm(sig))
        self.kernel(self.x, self.a, self.b, 1)
        self.iters = self._calibrate(target_s)

    def _calibrate(self, target_s: float) -> int:
        # Grow the work until the best of 3 calls lasts target_s. Not extrapolated from a
        # short call: a parallel launch can cost 4-20 ms while the other cores' threads wake
        # (seen on a 2-vCPU KVM guest), which would make the calls far too short to time.
        iters = 1000
        while iters < 1 << 32:
            dt = math.inf
            for _ in range(3):
                t0 = time.perf_counter()
                self.kernel(self.x, self.a, self.b, iters)
                dt = min(dt, time.perf_counter() - t0)
            if dt >= target_s:
                break
            iters *= 4 if dt < target_s / 8 else 2
        return iters

    @property
    def flops(self) -> int:
        return fma_flops(self.threads, self.row, STEPS, self.iters)

    def __call__(self) -> None:
        self.kernel(self.x, self.a, self.b, self.iters)

    def check(self) -> None:
        if not np.all(np.isfinite(self.x[:, :self.row])):
            raise RuntimeError(f"{self.precision} FMA probe produced non-finite values")

    def roof(self, timing: Any) -> Roof:
        self.check()
        bits = self.asm["vector_bits"]
        ev = {
            "probe": "fma-peak", "implementation": "numba njit(parallel=True), prange over "
            "threads; explicit IR vector chains (fmul/fadd contract)", "dtype": self.precision,
            "threads": self.threads, "vector_bits": bits, "lanes": self.lanes,
            "accumulators": self.accumulators, "independent_chains_per_thread": self.row,
            "model": self.shape.to_dict(),
            "steps_per_iteration": STEPS, "iterations": self.iters,
            "flops_per_run": self.flops, "counting": "2 FLOPs per FMA per lane",
            "asm": self.asm, "value_from": "best time",
            "median_flop_per_s": self.flops / timing.median,
            "timing": timing_evidence(timing), **env(),
        }
        width = f"{bits}-bit" if bits else "scalar/unknown width"
        return Roof(name=f"{self.precision} FMA peak ({width})", kind="compute",
                    precision=self.precision, value=self.flops / min(timing.samples),
                    source="measured", evidence=ev, median=self.flops / timing.median)


def best_of_repeats(repeats: list[Roof], spread: float = REPEAT_SPREAD) -> Roof:
    """One FMA roof from several independent measurements of it (each its own process and
    timer run): the highest, the best sustained rate the machine showed, with every repeat
    in the evidence and a flag when they disagree by more than ``spread``.

    A repeat's figure is its best ~50 ms call, itself a rate sustained over ~10^8 cycles; a
    whole repeat at about half of another is not a noisy sample but a state of the machine
    (another process or the host holding one of the cores for a second or more)."""
    if not repeats:
        raise ValueError("no repeats to choose from")
    best = max(repeats, key=lambda r: r.value)
    values = [r.value for r in repeats]
    disagree = max(values) / min(values) - 1
    ev = dict(best.evidence)
    ev["repeats"] = [{"flop_per_s": r.value,
                      "median_flop_per_s": r.evidence.get("median_flop_per_s"),
                      **{k: r.evidence[k] for k in ("vector_bits", "machine_load")
                         if k in r.evidence}} for r in repeats]
    ev["repeat_spread"] = disagree
    ev["value_from"] = f"best time of the best of {len(repeats)} repeats"
    flags = list(ev.get("flags", []))
    if disagree > spread:
        figs = ", ".join(f"{v / 1e9:.1f}" for v in values)
        flags.append(f"repeats disagree by {disagree:.0%} (> {spread:.0%}): {figs} GFLOP/s; "
                     f"the highest is the roof")
    ev["flags"] = flags
    return Roof(name=best.name, kind=best.kind, value=best.value, source=best.source,
                level=best.level, precision=best.precision, evidence=ev, median=best.median)


def repeat_notes(roofs: list[Roof]) -> list[str]:
    """The report's lines for roofs whose repeats disagreed."""
    return [f"{r.name}: {flag}" for r in roofs for flag in r.evidence.get("flags", [])
            if flag.startswith("repeats disagree")]
