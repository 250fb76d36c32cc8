"""Compile the CPU probes and non-temporal-store kernels for the CPU numba is told to target and
print what their loops do, as one JSON object (tests/roofs/test_cpu_codegen.py runs this under
NUMBA_CPU_NAME / NUMBA_CPU_FEATURES of CPUs this machine is not). Nothing is run: code for a
foreign CPU could fault here.

    python tests/roofs/codegen_child.py fma|all
"""

from __future__ import annotations

import json
import sys
from typing import Any

import numba
from numba import types
from roofbench.kernels import nt_stores, rownorm
from roofbench.roofs.probes import cpu_fma, x86_asm
from roofbench.roofs.probes import cpu_stream as cs

F64, F32 = types.float64, types.float32


def _arr(t, ndim=1):
    return types.Array(t, ndim, "C")


def _compiled(fn, sig, ir: bool = False, fastmath: Any = False) -> str:
    # A fresh dispatcher from the Python function: never numba's cache, always this target.
    # The assembly of the parallel loop body only (not numba's wrappers).
    d = numba.njit(parallel=True, fastmath=fastmath)(fn.py_func)
    d.compile(sig)
    return d.inspect_llvm(sig) if ir else x86_asm.kernel_part(d.inspect_asm(sig))


def fma() -> dict:
    out = {"shape": cpu_fma.probe_shape().to_dict()}
    for prec in ("fp64", "fp32"):
        kernel, sig = cpu_fma.compile_fma_kernel(prec)
        asm = kernel.inspect_asm(sig)
        out[prec] = x86_asm.loop_facts(x86_asm.fma_loop(asm), asm)
    return out


def stream() -> dict:
    a = _arr(F64)
    sigs = {"copy": (cs.stream_copy, (a, a)), "scale": (cs.stream_scale, (a, a, F64)),
            "add": (cs.stream_add, (a, a, a)), "triad": (cs.stream_triad, (a, a, a, F64))}
    out = {}
    for name, (fn, sig) in sigs.items():
        asm = _compiled(fn, sig)
        out[name] = x86_asm.loop_facts(x86_asm.store_loop(asm), asm)
        if out[name]["loop"] is None:  # LLVM's loop idiom pass may make a copy a memcpy
            out[name]["memcpy"] = "@llvm.memcpy" in _compiled(fn, sig, ir=True)
    return out


# Each non-temporal-store kernel once, the dtypes alternating (both widths of element covered; a
# compile takes about 2 s here and the matrix runs for ten CPUs).
STREAMING = (("square", 1, F32), ("sqrt", 1, F64), ("add", 2, F64), ("hypot", 2, F32))


def nt_store_loops() -> dict:
    out = {}
    for name, n_in, t in STREAMING:
        asm = _compiled(getattr(nt_stores, name), (*[_arr(t)] * (n_in + 1), types.intp))
        out[f"{name}-{t}"] = x86_asm.loop_facts(x86_asm.store_loop(asm, nontemporal=True), asm)
    # rownorm's row kernel (fused and onepass above the LLC): the reduction, then the row
    # written non-temporally through nt_stores.scale_row.
    sig = (_arr(F32, 2), _arr(F32, 2), types.intp, types.intp, F64, types.intp)
    asm = _compiled(rownorm._norm_rows_nt, sig, fastmath=rownorm.REDUCE)
    out["rownorm-rows-float32"] = x86_asm.loop_facts(x86_asm.store_loop(asm, nontemporal=True),
                                                     asm)
    return out


def main(what: str) -> None:
    import llvmlite.binding as ll

    res = {"numba_cpu_name": numba.config.CPU_NAME, "host": ll.get_host_cpu_name(),
           "fma": fma()}
    if what == "all":
        res["stream"] = stream()
        res["nt_stores"] = nt_store_loops()
    print(json.dumps(res))


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "all")
