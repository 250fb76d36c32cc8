"""Every configuration of the GPU forms' spaces run and validated on the CPU at a small size with
a partial tile in every dimension: the Triton spaces under Triton's interpreter
(TRITON_INTERPRET=1, as tests/kernels/test_triton.py), rownorm fused's CUDA C space under the
host emulation (tests/standins/cuda_emu, as tests/kernels/test_cuda_emu.py). The interpreter
ignores num_warps and num_stages (it runs a program as numpy); they are launched all the same,
so a launcher that drops or misnames one fails here."""

from __future__ import annotations

import importlib

import cuda_tools as ct
import numpy as np
import pytest
from roofbench.kernels.registry import workloads
from roofbench.kernels.spec import Case
from triton_bounds import bounds_checked
from triton_interpret import import_interpreted_triton, triton_interpret

triton = import_interpreted_triton("triton is not installed (pip install triton)")
torch = pytest.importorskip("torch", reason="torch is not installed (the Triton kernels' arrays)")

# (workload, variant, dtype, size): odd in every dimension, every tile size partial somewhere.
TRITON = [("gemm", "tensor", "fp16", (67, 45, 41)),
          ("attention", "flash", "fp32", (3, 1, 37, 5)),
          ("attention_causal", "flash", "fp16", (3, 1, 37, 5)),
          ("rownorm", "fused", "fp32", (3, 1031))]


@pytest.fixture(scope="module", autouse=True)
def _interpreter_for_this_module_only():
    with triton_interpret():
        yield


@pytest.fixture(autouse=True)
def _bounds_checked():
    with bounds_checked():
        yield


@pytest.fixture(scope="module")
def interp():
    """The Triton kernel modules as the interpreter runs them (test_triton.py's fixture)."""
    from roofbench.kernels.triton_counts import index_fix
    from triton.runtime.interpreter import InterpretedFunction

    if not isinstance(triton.language.standard.sum, InterpretedFunction):
        pytest.skip("triton was imported before TRITON_INTERPRET=1 was set in this process")
    for m in ("triton_stream", "triton_gemm", "triton_attention"):
        mod = importlib.import_module(f"roofbench.kernels.{m}")
        if not any(isinstance(v, InterpretedFunction) for v in vars(mod).values()):
            importlib.reload(mod)
    with index_fix():
        yield


@pytest.mark.parametrize("w,v,dtype,size", TRITON, ids=[f"{t[0]}-{t[2]}" for t in TRITON])
def test_every_triton_configuration_is_valid_under_the_interpreter(interp, w, v, dtype, size):
    from roofbench.bench.backends.triton import TritonPrepared
    from roofbench.bench.suite.runner import validate

    wl = workloads()[w]
    sp = wl.variants[v].tune["triton"]
    configs = sp.configs(size, dtype)
    assert len(configs) >= 9
    inputs = wl.make_inputs(size, dtype, np.random.default_rng(5))
    ref = wl.expected(inputs, size, dtype)
    for c in configs:
        case = Case(wl, wl.variants[v].configured("triton", c), dtype, size)
        prep = TritonPrepared(case, inputs, "cpu")
        prep.poison()
        prep.run()
        ok, err, why = validate(case, prep.outputs(), ref)
        assert ok, f"{c}: {why}"
        assert err <= wl.tolerance[dtype], c


def test_a_triton_configuration_reaches_the_kernel(interp, monkeypatch):
    """The configuration's tiles are what the kernel is launched with (not the defaults)."""
    from roofbench.kernels import triton_gemm

    seen = []
    real = triton_gemm.gemm

    def spy(*args, **kw):
        seen.append(kw)
        return real(*args, **kw)

    monkeypatch.setattr(triton_gemm, "gemm", spy)
    wl = workloads()["gemm"]
    cfg = {"BM": 32, "BN": 128, "BK": 64, "num_warps": 8, "num_stages": 2}
    table = wl.variants["tensor"].tune["triton"].build(cfg)
    impl = table["tensor"]
    assert impl.function() is spy and "BM=32,BN=128,BK=64" in impl.describe()
    case = Case(wl, wl.variants["tensor"].configured("triton", cfg), "fp16", (40, 48, 36))
    from roofbench.bench.backends.triton import TritonPrepared

    TritonPrepared(case, wl.make_inputs((40, 48, 36), "fp16", np.random.default_rng(1)), "cpu")
    assert seen == [cfg]


@ct.needs_emulation()
@pytest.mark.parametrize("dtype,size", [("fp32", (3, 1031)), ("fp16", (2, 2056))])
def test_every_cuda_configuration_is_valid_under_the_emulation(dtype, size):
    from emu_run import DEV, emulation_libs, run_emulated
    from roofbench.bench.backends.gpu_common import plan_launches
    from roofbench.bench.suite.runner import validate

    wl = workloads()["rownorm"]
    sp = wl.variants["fused"].tune["cuda"]
    configs = sp.configs(size, dtype)
    assert [c["THREADS"] for c in configs] == [32, 64, 128, 256, 512, 1024][:len(configs)]
    libs = emulation_libs(["rownorm.cu"])
    for c in configs:
        case = Case(wl, wl.variants["fused"].configured("cuda", c), dtype, size)
        (pl,) = plan_launches(case, DEV)
        assert pl.block == (c["THREADS"], 1, 1)  # the configuration is what is launched
        inputs, outs = run_emulated(libs, case, np.random.default_rng(9))
        ok, err, why = validate(case, outs, wl.expected(inputs, size, dtype))
        assert ok, f"{c}: {why}"
