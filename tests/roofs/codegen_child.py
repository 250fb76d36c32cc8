"""Compile the CPU probes and kernels for the CPU numba is told to target and print what their
loops do, as one JSON object (tests/standins/codegen_matrix.py runs this under NUMBA_CPU_NAME /
NUMBA_CPU_FEATURES of CPUs this machine is not, and for the host). Nothing is run: code for a
foreign CPU could fault here.

    python tests/roofs/codegen_child.py UNIT...   (UNITS below; "all": fma stream nt_stores sweep;
                                               "kernels:rownorm" one module's kernels)
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "standins"))

import numba  # noqa: E402
from codegen_matrix import code_facts, compile_asm, compile_llvm  # noqa: E402
from numba import types  # noqa: E402
from roofbench.kernels import nt_stores, rownorm  # noqa: E402
from roofbench.roofs.probes import cpu_fma, x86_asm  # noqa: E402
from roofbench.roofs.probes import cpu_stream as cs  # noqa: E402

F64, F32 = types.float64, types.float32


def _arr(t, ndim=1):
    return types.Array(t, ndim, "C")


def fma() -> dict:
    out = {"shape": cpu_fma.probe_shape().to_dict()}
    for prec in ("fp64", "fp32"):
        kernel, sig = cpu_fma.compile_fma_kernel(prec)
        asm = kernel.inspect_asm(sig)
        out[prec] = x86_asm.loop_facts(x86_asm.fma_loop(asm), asm)
    return out


# A STREAM operand's numba type (cpu_stream.StreamKernel.args): the arrays, the scalar, n.
_OPERAND = {"a": _arr(F64), "b": _arr(F64), "c": _arr(F64), "s": F64, "n": types.intp}


def stream_jobs() -> dict:
    """Every plain-store kernel of the STREAM table with the signature its operands give; the
    non-temporal ones are compiled by ``nt_store_loops`` (their loops are read as streaming)."""
    return {k.name: (k.fn, tuple(_OPERAND[x] for x in k.args))
            for k in cs.STREAM if not k.nontemporal}


def stream() -> dict:
    out = {}
    for name, (fn, sig) in stream_jobs().items():
        asm = compile_asm(fn, sig, kernel_only=True)
        out[name] = x86_asm.loop_facts(x86_asm.store_loop(asm), asm)
        out[name]["gathers"] = code_facts(asm)["gathers"]
        if out[name]["loop"] is None:  # LLVM's loop idiom pass may make a copy a memcpy
            out[name]["memcpy"] = "@llvm.memcpy" in compile_llvm(fn, sig)
    return out


# Each non-temporal-store kernel once, the dtypes alternating (both widths of element covered; a
# compile takes about 2 s here and the matrix runs for eleven CPUs).
STREAMING = (("square", 1, F32), ("sqrt", 1, F64), ("add", 2, F64), ("hypot", 2, F32))


def _nt_facts(asm: str) -> dict:
    facts = x86_asm.loop_facts(x86_asm.store_loop(asm, nontemporal=True), asm)
    facts["gathers"] = code_facts(asm)["gathers"] + code_facts(asm)["scatters"]
    return facts


def nt_store_loops() -> dict:
    out = {}
    for name, n_in, t in STREAMING:
        asm = compile_asm(getattr(nt_stores, name), (*[_arr(t)] * (n_in + 1), types.intp),
                          kernel_only=True)
        out[f"{name}-{t}"] = _nt_facts(asm)
    # rownorm's row kernels (fused and onepass above the LLC; naive's scale): the row written
    # non-temporally through nt_stores.scale_row.
    sig = (_arr(F32, 2), _arr(F32, 2), types.intp, types.intp, F64, types.intp)
    asm = compile_asm(rownorm._norm_rows_nt, sig, fastmath=rownorm.REDUCE, kernel_only=True)
    out["rownorm-rows-float32"] = _nt_facts(asm)
    sig = (_arr(F64, 2), _arr(F64), _arr(F64, 2), types.intp, types.intp, types.intp)
    asm = compile_asm(rownorm._scale_rows_nt, sig, kernel_only=True)
    out["rownorm-scale-rows-float64"] = _nt_facts(asm)
    return out


# A vector instruction with a memory source: an operand "(...)" followed by a vector register
# (a store names its memory last). Its width: the last vector register's (the destination).
_LOAD = re.compile(r"\([^)]*\)\s*,.*%([xyz])mm\d+\s*$")


def _vector_loads(loop: x86_asm.Loop) -> list[int]:
    """Bits of every vector load of ``loop`` (explicit moves and folded memory operands)."""
    return [x86_asm.BITS[m.group(1)] for ins in loop.body if (m := _LOAD.search(ins))]


def _load_loop(asm: str) -> x86_asm.Loop | None:
    """The innermost loop loading the most vector bits per trip (a read pass's main loop)."""
    cands = [lp for lp in x86_asm.innermost(x86_asm.loops(asm)) if _vector_loads(lp)]
    return max(cands, key=lambda lp: (sum(_vector_loads(lp)), -len(lp.body)), default=None)


def sweep() -> dict:
    """The cache sweep's two passes (roofs/probes/cpu_cache_passes.py) as its child compiles
    them (plain njit; run it under the child's features: codegen_matrix's probe rows)."""
    from roofbench.roofs.probes import cpu_cache_passes as cp

    u = _arr(types.uint64)
    out = {}
    for name, fn in (("read", cp.read_passes), ("read+write", cp.add_passes)):
        d = numba.njit(fn.py_func)  # a fresh compile: never numba's cache
        d.compile((u, types.intp))
        asm = d.inspect_asm((u, types.intp))
        loop = _load_loop(asm) if name == "read" else x86_asm.store_loop(asm)
        facts = x86_asm.loop_facts(loop, asm)
        if loop is not None:
            facts["load_bits"] = sorted(set(_vector_loads(loop)))
            facts["loads"] = len(_vector_loads(loop))
            facts["vector_alu"] = [i for i in loop.body if re.search(r"%[xyz]mm", i)
                                   and not i.startswith(("vmov", "mov"))]
            facts["indexed"] = [i for i in loop.body if re.search(r"\(%\w+,%\w+", i)]
        facts["gathers"] = code_facts(asm)["gathers"] + code_facts(asm)["scatters"]
        facts["nontemporal"] = code_facts(asm)["nontemporal"]
        out[name] = facts
    return out


def kernels(only: str = "") -> dict:
    from codegen_kernels import kernel_facts

    return kernel_facts(only=tuple(m for m in only.split(",") if m))


def planted() -> dict:
    from planted_kernels import planted_facts

    return planted_facts()


UNITS = {"fma": fma, "stream": stream, "nt_stores": nt_store_loops, "sweep": sweep,
         "kernels": kernels, "planted": planted}


def main(units: list[str]) -> None:
    import llvmlite.binding as ll

    if units in ([], ["all"]):
        units = ["fma", "stream", "nt_stores", "sweep"]
    res = {"numba_cpu_name": numba.config.CPU_NAME, "host": ll.get_host_cpu_name()}
    for u in units:  # "kernels:rownorm,gemm": the kernels of those modules only
        name, _, arg = u.partition(":")
        res[name] = UNITS[name](arg) if arg else UNITS[name]()
    print(json.dumps(res))


if __name__ == "__main__":
    main(sys.argv[1:])
