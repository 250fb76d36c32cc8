"""The CUDA C kernels run on the CPU under a host emulation of the CUDA execution model
(tests/cuda_emu/emu.h: a thread per CUDA thread, barriers, warp shuffles, and mma.sync
reconstructed from the PTX fragment layouts), with the launch geometry, storage types,
poisoning and validation of the real backends. Not a timing, a correctness proof without a
GPU: odd sizes, every tail and guard path, every dtype, the tensor-core fragment mapping."""

from __future__ import annotations

import ctypes
import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).parent))
import cuda_tools as ct  # noqa: E402
from roofbench.bench.backends.gpu_common import (  # noqa: E402
    POISON,
    STORAGE,
    from_storage,
    plan_launches,
    to_storage,
)
from roofbench.bench.measure.runner import validate  # noqa: E402
from roofbench.kernels.cuda_impl import DeviceProps  # noqa: E402
from roofbench.kernels.registry import workloads  # noqa: E402
from roofbench.kernels.spec import Case  # noqa: E402

pytestmark = pytest.mark.skipif(ct.emulation_missing() is not None,
                                reason=ct.emulation_missing() or "")

# A tiny device: grid-stride grids of at most 2 blocks of 256 threads.
DEV = DeviceProps(cc=(9, 0), sm_count=1, max_threads_per_sm=512, name="host emulation")


@pytest.fixture(scope="module")
def libs() -> dict[str, ctypes.CDLL]:
    out = ct.build_emulation()
    libs = {}
    for src in ct.EMU_SOURCES:
        lib = ctypes.CDLL(str(out / (Path(src).stem + ".so")))
        lib.rb_launch.restype = ctypes.c_int
        libs[src] = lib
    return libs


def run_emulated(libs, case: Case, rng: np.random.Generator):
    """prepare -> poison -> run -> outputs, as a GPU backend does, on host memory."""
    inputs = case.workload.make_inputs(case.size, case.dtype, rng)
    bufs = case.buffers()
    arrays = {}
    for name, buf in bufs.items():
        if buf.role == "input":
            arrays[name] = to_storage(inputs[name], buf).copy()
        else:
            arrays[name] = np.full(buf.shape, POISON[buf.dtype], dtype=STORAGE[buf.dtype])
    for pl in plan_launches(case, DEV):
        lib = libs[pl.impl.source]
        ints, floats = [], []
        for a in pl.args:
            if isinstance(a, str):
                ints.append(arrays[a].ctypes.data)
            elif isinstance(a, np.integer):
                ints.append(int(a))
            else:
                floats.append(float(a))
        assert len(ints) <= 6 and len(floats) <= 2
        ia = (ctypes.c_longlong * 6)(*ints, *[0] * (6 - len(ints)))
        fa = (ctypes.c_float * 2)(*floats, *[0.0] * (2 - len(floats)))
        fn = ctypes.cast(getattr(lib, pl.function), ctypes.c_void_p)
        rc = lib.rb_launch(fn, *pl.grid, *pl.block, ia, fa)
        assert rc == 0, f"{pl.function}: block of {pl.block} is not whole warps"
    outs = {n: from_storage(arrays[n], b) for n, b in bufs.items() if b.role == "output"}
    return inputs, outs


ALL = ("fp32", "fp64", "fp16", "bf16", "fp8")
CASES = (
    [("vector_add", "scalar", d, (1003,)) for d in ALL]
    + [("vector_add", "vec4", d, (1003,)) for d in ("fp32", "fp16", "bf16", "fp8")]
    + [("l2norm", v, d, (2051,)) for v in ("naive", "fused") for d in ALL]
    + [("rownorm", v, d, s) for v in ("naive", "fused", "onepass") for d in ALL
       for s in ((3, 1024), (2, 1001))]
    + [("rownorm", "onepass", "fp32", (2, 16384)), ("rownorm", "onepass", "fp16", (2, 2056))]
    + [("gemm", v, d, (67, 45, 33)) for v in ("naive", "tiled", "regblock")
       for d in ("fp32", "fp64", "fp16", "bf16")]
    + [("gemm", "regblock", "fp32", (130, 132, 20)), ("gemm", "regblock", "fp32", (128, 128, 16))]
    + [("gemm", "tensor_mma", d, s) for d in ("fp16", "bf16", "fp8")  # mma.sync on sm_90
       for s in ((130, 136, 97), (128, 128, 128), (17, 9, 40))]
)


@pytest.mark.parametrize("case", CASES,
                         ids=[f"{w}-{v}-{d}-{'x'.join(map(str, s))}" for w, v, d, s in CASES])
def test_kernel_correct_under_emulation(libs, case):
    name, variant, dtype, size = case
    w = workloads()[name]
    c = Case(w, w.variants[variant], dtype, size)
    assert c.variant.refuse(size, dtype, "cuda") is None
    inputs, outs = run_emulated(libs, c, np.random.default_rng(2024))
    ok, err, why = validate(c, outs, w.expected(inputs, size, dtype))
    assert ok, f"{c.key}: {why}"
