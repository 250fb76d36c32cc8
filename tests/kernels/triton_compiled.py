"""Triton as a user's process holds it (no TRITON_INTERPRET: kernels compiled), run by
tests/kernels/test_triton.py in a process of its own (Triton takes its mode when first
imported). Prints, as JSON:

- ``ptx``: what the sm_90 PTX of each suite kernel holds, compiled on this CPU (Triton compiles
  for a named target without a GPU: triton.compile over an ASTSource, GPUTarget("cuda", 90,
  32)); pointers and ints declared 16-byte divisible, as Triton specialises aligned arrays;
- ``counts``: FLOPs and unique bytes that ``count_call`` reads from compiled kernels which
  call Triton's own compiled helpers (tl.sum), beside the workload's declaration."""

from __future__ import annotations

import json
import os

os.environ.pop("TRITON_INTERPRET", None)
os.environ.setdefault("TRITON_DEFAULT_FP_FUSION", "1")

import triton  # noqa: E402
import triton.language as tl  # noqa: E402
from roofbench.kernels import triton_attention as ta  # noqa: E402
from roofbench.kernels import triton_gemm as tg  # noqa: E402
from roofbench.kernels import triton_stream as ts  # noqa: E402
from triton.backends.compiler import GPUTarget  # noqa: E402
from triton.compiler import ASTSource  # noqa: E402

FEATURES = ("wgmma.mma_async", ".f16.f16", ".bf16.bf16", ".e4m3.e4m3", ".tf32.tf32",
            "ld.global.v4.b32", "st.global.v4.b32", "ld.global.v2.b32", "ld.global.b32")


def ptx(kernel, signature: dict[str, str], constexprs: dict[str, object]) -> str:
    args = list(signature)
    attrs = {(args.index(a),): [["tt.divisibility", 16]] for a, t in signature.items()
             if t.startswith("*") or t == "i32"}
    src = ASTSource(fn=kernel, signature={**signature, **{k: "constexpr" for k in constexprs}},
                    constexprs=constexprs, attrs=attrs)
    return triton.compile(src, target=GPUTarget("cuda", 90, 32)).asm["ptx"]


def cases() -> dict[str, tuple]:
    out: dict[str, tuple] = {}
    for dtype, ptr, prec in (("fp16", "*fp16", None), ("bf16", "*bf16", None),
                             ("fp8", "*fp8e4nv", None), ("fp32", "*fp32", "tf32")):
        out[f"gemm-{dtype}"] = (tg.gemm_kernel, {"A": ptr, "B": ptr, "C": ptr, "M": "i32",
                                                 "N": "i32", "K": "i32"},
                                {"BM": 128, "BN": 128, "BK": 64, "PRECISION": prec,
                                 "WIDEN": False})
    for name, args in (("add_kernel", "a b c"), ("l2_fused_kernel", "a b out"),
                       ("square_kernel", "a y"), ("sqrt_kernel", "a y")):
        out[name] = (getattr(ts, name), {a: "*fp32" for a in args.split()} | {"n": "i32"},
                     {"ACC": tl.float32, "BLOCK": 1024})
    out["flash-fp16"] = (ta.flash_kernel, {"Q": "*fp16", "K": "*fp16", "V": "*fp16",
                                           "O": "*fp16", "N": "i32", "D": "i32",
                                           "scale": "fp32"},
                         {"BM": 64, "BN": 64, "BD": 64, "CAUSAL": False, "PRECISION": None,
                          "WIDEN": False})
    return out


def counts() -> dict[str, list[int]]:
    """name -> [FLOPs read, declared, unique bytes read + written, each array once]."""
    import numpy as np
    from roofbench.bench.backends.triton import to_torch
    from roofbench.kernels.registry import workloads
    from roofbench.kernels.spec import Case
    from roofbench.kernels.triton_counts import count_call

    out = {}
    for w, v, size, launch in (("rownorm", "fused", (3, 1031), "rownorm_fused_kernel"),
                               ("gemv", "rows", (37, 301), "gemv_kernel")):
        wl = workloads()[w]
        case = Case(wl, wl.variants[v], "fp32", size)
        bufs = case.buffers()
        arrays = {n: to_torch(np.zeros(b.shape, np.float32) + 0.5, "fp32", "cpu")
                  for n, b in bufs.items()}
        la = case.launches()[0]
        args = [arrays[a] if isinstance(a, str) else a for a in la.args]
        if w == "rownorm":
            x, y, b, h, eps = args
            c = count_call(ts.rownorm_fused_kernel[(b,)], x, y, h, eps, ACC=tl.float32,
                           BLOCK=ts.ROW_BLOCK)
        else:
            W, x, y, m, k = args
            c = count_call(ts.gemv_kernel[(triton.cdiv(m, ts.GEMV_BM),)], W, x, y, m, k,
                           ACC=tl.float32, BM=ts.GEMV_BM, BK=ts.GEMV_BK)
        unique = sum(bufs[n].nbytes for n in set(la.reads + la.writes))  # each array once
        out[launch] = [c.flops, case.flops, c.read_unique + c.written_unique, unique]
    return out


def main() -> None:
    found = {}
    for name, (kernel, sig, const) in cases().items():
        code = ptx(kernel, sig, const)
        found[name] = {f: code.count(f) for f in FEATURES}
    print(json.dumps({"triton": triton.__version__, "ptx": found, "counts": counts()}))


if __name__ == "__main__":
    main()
