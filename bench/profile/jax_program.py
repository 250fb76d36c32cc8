"""A jitted JAX function on the roofline: the compiled program placed with XLA's own count
(``compiled.cost_analysis()``: flops, bytes accessed) beside roofbench's count of its jaxpr,
timed with ``block_until_ready`` (without it a GPU's asynchronous dispatch is what is timed).

roofbench's count walks the jaxpr with the conventions of ``op_counts``: dot_general and
conv by their multiply-adds (2 each), element-wise arithmetic 1 per output element (special
functions 0), reductions 1 per input element; its bytes are each equation's inputs and
outputs (the unfused program's traffic) and, beside them, the program's arguments and
results (what one fused kernel must move). XLA's bytes are its compiled (fused) program's.
"""

from __future__ import annotations

import math
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from roofbench.bench.measure import core
from roofbench.bench.measure.callables import Clock
from roofbench.bench.profile.common import DTYPES, profile_timer, roofs_from
from roofbench.bench.profile.op_counts import ELEMENTWISE
from roofbench.bench.profile.recording import Recording
from roofbench.bench.profile.report import Profile

from roofbench.records import CaseResult, Declaration, Evidence, Identity, Outcome
from roofbench.roof_records import RoofSet
from roofbench.timing import TimerConfig

_ARITH = {"add": 1, "sub": 1, "mul": 1, "div": 1, "neg": 1, "max": 0, "min": 0,
          "integer_pow": 1, "square": 1, "logistic": 0, "exp": 0, "log": 0, "sqrt": 0,
          "rsqrt": 0, "tanh": 0, "erf": 0}
_REDUCE = {"reduce_sum": 1, "reduce_max": 1, "reduce_min": 1, "reduce_prod": 1, "argmax": 1}


def is_jax(fn: Any, args: tuple[Any, ...]) -> bool:
    """A jitted JAX function (it lowers), or one called on JAX arrays."""
    jax = sys.modules.get("jax")
    if jax is None:
        return False
    if hasattr(fn, "lower") and type(fn).__module__.startswith("jax"):
        return True
    return any(isinstance(a, jax.Array) for a in args)


def _nbytes(aval: Any) -> int:
    return int(math.prod(aval.shape)) * int(aval.dtype.itemsize)


def jaxpr_count(jaxpr: Any) -> tuple[int, int]:
    """(FLOPs, bytes) of a closed jaxpr by roofbench's conventions (sub-jaxprs walked)."""
    flops = nbytes = 0
    for eqn in jaxpr.eqns:
        name = eqn.primitive.name
        subs = [v for v in eqn.params.values() if hasattr(v, "eqns") or hasattr(v, "jaxpr")]
        if subs:
            for s in subs:
                f, b = jaxpr_count(s.jaxpr if hasattr(s, "jaxpr") else s)
                flops, nbytes = flops + f, nbytes + b
            continue
        # Distinct variables (x * x reads x once); avals of equal type are shared objects.
        ins = [v.aval for v in {id(v): v for v in eqn.invars}.values()
               if hasattr(v, "aval") and hasattr(v.aval, "shape")]
        outs = [v.aval for v in eqn.outvars]
        n_out = int(math.prod(outs[0].shape)) if outs else 0
        if name == "dot_general":
            (lc, _), (lb, _) = eqn.params["dimension_numbers"]
            k = int(math.prod(ins[0].shape[d] for d in lc))
            flops += 2 * n_out * k
        elif name == "conv_general_dilated":
            w = ins[1].shape
            flops += 2 * n_out * int(math.prod(w)) // max(int(w[0]), 1)
        elif name in _REDUCE:
            flops += _REDUCE[name] * (int(math.prod(ins[0].shape)) if ins else 0)
        elif name in _ARITH or name in ELEMENTWISE:
            per = _ARITH.get(name, ELEMENTWISE.get(name, 0))
            if name == "integer_pow":
                per = max(int(eqn.params.get("y", 2)) - 1, 0)
            flops += per * n_out
        if name not in ("reshape", "broadcast_in_dim", "squeeze", "expand_dims"):
            nbytes += sum(_nbytes(a) for a in ins)
            nbytes += sum(_nbytes(a) for a in outs)
    return flops, nbytes


def cost_analysis(compiled: Any) -> dict[str, float]:
    ca = compiled.cost_analysis()
    if isinstance(ca, list):  # older jax: one dict per computation
        ca = ca[0] if ca else {}
    return {str(k): float(v) for k, v in (ca or {}).items()}


def profile_jax(fn: Callable[..., Any], args: tuple[Any, ...], kwargs: dict[str, Any], *,
                roofs: RoofSet | str | Path | None, timer: TimerConfig | None,
                name: str) -> Profile:
    import jax
    from roofbench.bench.measure.roof_source import device_roofs

    jitted = fn if hasattr(fn, "lower") else jax.jit(fn)
    t0 = time.perf_counter()
    compiled = jitted.lower(*args, **kwargs).compile()
    compile_s = time.perf_counter() - t0
    xla = cost_analysis(compiled)
    # traced as jitted (static_argnums/static_argnames kept static); make_jaxpr without
    # .trace (older jax) traces every argument
    closed = (jitted.trace(*args, **kwargs).jaxpr if hasattr(jitted, "trace")
              else jax.make_jaxpr(jitted)(*args, **kwargs))
    own_flops, own_bytes = jaxpr_count(closed.jaxpr)
    leaves = jax.tree_util.tree_leaves((args, kwargs))
    result = jitted(*args, **kwargs)
    # the arguments' and results' bytes, array by array: what one fused kernel moves
    arrays = tuple(int(x.nbytes) for x in (*leaves, *jax.tree_util.tree_leaves(result))
                   if hasattr(x, "nbytes"))
    io_bytes = sum(arrays)
    clock = Clock()  # the host clock; block_until_ready makes it see the device's end
    platform = jax.devices()[0].platform
    rs, note = device_roofs(clock, roofs) if platform == "cpu" else (
        (roofs, None) if isinstance(roofs, RoofSet) else (None, f"{platform}: pass roofs="))
    cfg = profile_timer(clock, timer)
    flops = int(xla.get("flops", 0)) or own_flops
    nbytes = int(xla.get("bytes accessed", 0)) or io_bytes
    dtype = str(getattr(leaves[0], "dtype", "float32")) if leaves else "float32"
    case = CaseResult(
        Identity(workload="program", variant="xla", backend="jax", dtype=DTYPES.get(dtype, dtype),
                 size=[len(closed.jaxpr.eqns)], precision="fp64" if dtype == "float64" else "fp32",
                 cores="simt"),
        Declaration(flops=flops, bytes={"dram": nbytes} if nbytes else {},
                    ai={"dram": flops / nbytes} if nbytes else {}, marker="*",
                    flop_convention="XLA cost_analysis() of the compiled program"),
        Outcome(status="ok", checked=False),
        evidence=Evidence(extra={"measured_by": "roofbench.profile (jax)", "platform": platform}))

    def call() -> None:
        jax.block_until_ready(jitted(*args, **kwargs))

    # on a CPU paired with the DRAM probe of as many streams as those arrays (pairs.py)
    core.fill_metrics(case, core.paired_time(clock, call, cfg, case,
                                             rs if platform == "cpu" else None,
                                             arrays=arrays), rs)
    prof = Profile(name, clock.device_name() if platform == "cpu" else platform, rs,
                   Recording([], [], set(), set()), [], case,
                   "host clock after block_until_ready")
    prof.extra["jax"] = {"xla_cost_analysis": xla, "xla_flops": xla.get("flops"),
                         "xla_bytes": xla.get("bytes accessed"), "own_flops": own_flops,
                         "own_bytes_unfused": own_bytes, "own_bytes_io": io_bytes,
                         "compile_s": compile_s, "jaxpr_equations": len(closed.jaxpr.eqns),
                         "jax_version": jax.__version__, "platform": platform}
    prof.extra["roofs_from"] = roofs_from(roofs)
    if note:
        prof.notes.append(note)
    return prof
