"""The CUDA C kernels run on the CPU under a host emulation of the CUDA execution model
(tests/cuda_emu/emu.h: a thread per CUDA thread, barriers, warp shuffles, and mma.sync
reconstructed from the PTX fragment layouts), with the launch geometry, storage types,
poisoning and validation of the real backends. Not a timing, a correctness proof without a
GPU: odd sizes, every tail and guard path, every dtype, the tensor-core fragment mapping."""

from __future__ import annotations

import ctypes
import dataclasses
import sys
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).parent))
import cuda_tools as ct  # noqa: E402
from roofbench.bench.backends.gpu_common import (  # noqa: E402
    POISON,
    STORAGE,
    PlannedLaunch,
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


def run_emulated(libs, case: Case, rng: np.random.Generator,
                 change: Callable[[PlannedLaunch], PlannedLaunch] = lambda pl: pl):
    """prepare -> poison -> run -> outputs, as a GPU backend does, on host memory. ``change``
    may alter a planned launch (another grid, another function) before it runs."""
    inputs = case.workload.make_inputs(case.size, case.dtype, rng)
    bufs = case.buffers()
    arrays = {}
    for name, buf in bufs.items():
        if buf.role == "input":
            arrays[name] = to_storage(inputs[name], buf).copy()
        else:
            arrays[name] = np.full(buf.shape, POISON[buf.dtype], dtype=STORAGE[buf.dtype])
    for pl in plan_launches(case, DEV):
        _launch(libs, change(pl), arrays)
    outs = {n: from_storage(arrays[n], b) for n, b in bufs.items() if b.role == "output"}
    return inputs, outs


def _launch(libs, pl: PlannedLaunch, arrays: dict[str, np.ndarray]) -> None:
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
    # attention (batch x heads x N x d): N = 67 is two key tiles and a tail (the online
    # softmax rescales once; causal blocks skip tiles), 131 three; N = 72 takes the naive PV's
    # 16-byte P loads, odd N the scalar ones; both head dims.
    + [(w, "flash", d, s) for w in ("attention", "attention_causal") for d in ("fp16", "bf16")
       for s in ((1, 2, 67, 64), (2, 1, 131, 128))]
    + [("attention", "naive", "fp16", (1, 2, 67, 64)),
       ("attention", "naive", "bf16", (1, 1, 72, 128)),
       ("attention_causal", "naive", "fp16", (1, 1, 72, 64)),
       ("attention_causal", "naive", "bf16", (1, 1, 67, 128))]
    # gemv: odd K (scalar rows), K a multiple of every pack (16-byte loads), more rows than
    # the emulated device's grid-stride grid covers at once (2 blocks x 8 warps)
    + [("gemv", "rows", d, s) for d in ALL for s in ((37, 1001), (70, 4096))]
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


@pytest.mark.parametrize("grid", [1, 3, 40])
def test_gemv_is_right_at_any_grid(libs, grid):
    """gemv_warp is grid-stride: a grid smaller or larger than its default (what an occupancy
    sweep launches) computes the same y."""
    w = workloads()["gemv"]
    c = Case(w, w.variants["rows"], "fp16", (45, 520))
    (pl,) = plan_launches(c, DEV)
    assert pl.grid == (2, 1, 1)  # the default: one wave of the emulated device
    inputs, outs = run_emulated(libs, c, np.random.default_rng(11),
                                lambda pl: dataclasses.replace(pl, grid=(grid, 1, 1)))
    ok, err, why = validate(c, outs, w.expected(inputs, c.size, c.dtype))
    assert ok, why


@pytest.mark.parametrize("name,wrong", [("attention_causal", "attn_flash_fp16"),
                                        ("attention", "attn_flash_causal_fp16")])
def test_planted_wrong_attention_kernel_fails(libs, name, wrong):
    """The non-causal flash kernel run for a causal case, or the causal one for a full case,
    is caught by validation against the float64 reference."""
    w = workloads()[name]
    c = Case(w, w.variants["flash"], "fp16", (1, 1, 67, 64))
    inputs, outs = run_emulated(libs, c, np.random.default_rng(3),
                                lambda pl: dataclasses.replace(pl, function=wrong))
    ok, err, why = validate(c, outs, w.expected(inputs, c.size, c.dtype))
    assert not ok and "relative error" in why
