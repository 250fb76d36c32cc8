"""The CUDA C kernels run on the CPU under a host emulation of the CUDA execution model
(tests/standins/cuda_emu/emu.h: a thread per CUDA thread, barriers, warp shuffles, and mma.sync
reconstructed from the PTX fragment layouts), with the launch geometry, storage types,
poisoning and validation of the real backends. Not a timing, a correctness proof without a
GPU: odd sizes, every tail and guard path, every dtype, the tensor-core fragment mapping.
The Hopper kernels (the wgmma/TMA GEMM, the wgmma probe) run under
tests/standins/cuda_emu/hopper_emu.h
(mbarriers, TMA, wgmma; docs/hopper-emulation.md), launched by roofbench's own driver-launch
code over the stand-in bindings, with planted errors in the host code and the kernel."""

from __future__ import annotations

import ctypes
import dataclasses
import importlib
import importlib.util
import re
import sys
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import cuda_tools as ct
import numpy as np
import pytest
from emu_run import DEV, emulation_libs, outputs, poisoned, register, run_emulated
from patience import patience
from roofbench.bench.backends import tma_launch  # noqa: E402
from roofbench.bench.backends.gpu_common import (  # noqa: E402
    ALL_LAUNCHERS,
    plan_launches,
    to_storage,
)
from roofbench.bench.backends.tma_launch import param_bytes  # noqa: E402
from roofbench.bench.suite.runner import validate  # noqa: E402
from roofbench.kernels import cuda_impl as cu  # noqa: E402
from roofbench.kernels import wgmma_gemm as wg
from roofbench.kernels.cuda_impl import DeviceProps  # noqa: E402
from roofbench.kernels.registry import workloads  # noqa: E402
from roofbench.kernels.spec import Case  # noqa: E402
from roofbench.roofs.probes import cuda_driver as cd  # noqa: E402
from roofbench.roofs.probes import gpu_math as gm  # noqa: E402
from roofbench.roofs.probes.cuda_driver import KernelParams
from testpaths import FAKE_CUPY

pytestmark = ct.needs_emulation()


@pytest.fixture(scope="module")
def libs() -> dict[str, ctypes.CDLL]:
    return emulation_libs(ct.EMU_SOURCES)


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


# ===================================================================== Hopper (sm_90a)
# The wgmma GEMM, the wgmma probe and the emulation's unit kernels, launched as the CuPy
# backend launches the GEMM: roofbench's host code (plan_launches, wgmma_tensor_maps,
# encode_tensor_map, param_bytes, KernelParams, DriverFunction) over the stand-in driver of
# tests/standins/fake_cupy/cuda/bindings, which runs the kernels under
# tests/standins/cuda_emu/hopper_emu.h:
# mbarriers, TMA from the encoded tensor maps, wgmma from the shared-memory descriptors, and a
# happens-before check of every TMA write and wgmma read.
FAKE_BINDINGS = FAKE_CUPY / "cuda" / "bindings"
H200 = DeviceProps(cc=(9, 0), sm_count=132, name="emulated H200")
# Emulated cycles per ns: the kernels' 4e9-cycle wait bound lasts 2 s with FAST_CLOCK (the
# tests that expect a hang), 20 s by default (a legitimate wait on a loaded 2-core machine
# must never trip it).
FAST_CLOCK = 2.0
DEFAULT_CLOCK = 0.2


class LaunchFailed(Exception):
    """An emulated launch failed; the message is the emulation's."""


@dataclass
class FakeCuda:
    drv: Any
    nvrtc: Any

    def module(self, source: str, libdir: Path | None = None, clock: float = DEFAULT_CLOCK
               ) -> Any:
        self.drv.reset()  # a fresh context: no sticky error from an earlier failed launch
        self.drv.LIBDIR = str(libdir) if libdir else None
        mod = cd.check(self.drv.cuModuleLoadData(self.nvrtc.cubin_for(source, "sm_90a", [])))
        mod.lib.rb_emu_set_clock(ctypes.c_double(clock))
        return mod

    def launch(self, module: Any, name: str, grid: tuple[int, ...], block: tuple[int, ...],
               smem: int, values: list[bytes]) -> None:
        fn = cd.DriverFunction(module, name, smem)
        try:
            fn.launch(grid, block, smem, 1, KernelParams(values))
        except RuntimeError:
            raise LaunchFailed(self.drv.last_launch_error) from None

    def stats(self, module: Any) -> dict[str, int]:
        v = (ctypes.c_longlong * 6)()
        module.lib.rb_emu_stats(v, 6)
        return dict(zip(("wgmma", "flops", "tma", "tma_bytes", "phases", "waits"), v,
                        strict=True))


@pytest.fixture(scope="module")
def fake_cuda():
    """The stand-in bindings under a private name (the real cuda.bindings stays importable),
    made the driver of roofbench's launch code for this module's tests."""
    name = "rb_fake_cuda_bindings"
    spec = importlib.util.spec_from_file_location(
        name, FAKE_BINDINGS / "__init__.py", submodule_search_locations=[str(FAKE_BINDINGS)])
    pkg = importlib.util.module_from_spec(spec)
    sys.modules[name] = pkg
    spec.loader.exec_module(pkg)
    drv = importlib.import_module(f"{name}.driver")
    nv = importlib.import_module(f"{name}.nvrtc")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("RB_EMU_LIBDIR", str(ct.build_emulation()))
        mp.setattr(cd, "driver_module", lambda: drv)
        mp.setattr(tma_launch, "driver_module", lambda: drv)
        yield FakeCuda(drv, nv)


def _gemm_case(dtype: str, size: tuple[int, int, int]) -> Case:
    w = workloads()["gemm"]
    return Case(w, w.variants["tensor"], dtype, size)


def run_gemm(fc: FakeCuda, dtype: str, size: tuple[int, int, int], libdir: Path | None = None,
             maps: Callable[[Case], Any] | None = None, clock: float = DEFAULT_CLOCK
             ) -> tuple[bool, float, str | None]:
    """The wgmma GEMM of one case under the emulation, validated as the runner validates."""
    case = _gemm_case(dtype, size)
    w = case.workload
    inputs = w.make_inputs(size, dtype, np.random.default_rng(5))
    arrays = {}
    for name, buf in case.buffers().items():
        if buf.role == "input":  # with as much slack behind: a planted stride reads it
            x = to_storage(inputs[name], buf)
            room = np.zeros(2 * x.size, dtype=x.dtype)
            arrays[name] = room[:x.size].reshape(x.shape)
            arrays[name][...] = x
        else:
            arrays[name] = poisoned(buf)
    (pl,) = plan_launches(case, H200, launchers=ALL_LAUNCHERS)
    specs = maps(case) if maps else pl.tensor_maps
    enc = {m.buffer: tma_launch.encode_tensor_map(m, arrays[m.buffer].ctypes.data)
           for m in specs}
    mod = fc.module("gemm_wgmma.cu", libdir, clock)
    register(mod.lib, arrays)  # the bounds of A, B (TMA's tensors) and C
    fc.launch(mod, pl.function, pl.grid, pl.block, pl.smem,
              param_bytes(pl.args, lambda b: arrays[b].ctypes.data, enc))
    return validate(case, outputs(case, arrays), w.expected(inputs, size, dtype))


@pytest.mark.parametrize("dtype", ("fp16", "bf16", "fp8"))
def test_wgmma_gemm_valid_under_emulation(fake_cuda, dtype):
    """Partial tiles in M, N and K; the CLI test (test_cupy_emulated) runs the larger sizes."""
    ok, err, why = run_gemm(fake_cuda, dtype, (130, 272, 112))
    assert ok, why


def test_tensor_maps_reach_the_kernel_as_encoded(fake_cuda):
    """The 128 bytes the host hands the kernel hold what wgmma_tensor_maps specified."""
    drv = fake_cuda.drv
    for dtype in ("fp16", "fp8"):
        for spec in wg.wgmma_tensor_maps((1001, 784, 336), dtype):
            raw = tma_launch.encode_tensor_map(spec, 0x7F00_0000_1000)
            got = drv.decode_tensor_map(raw)
            assert got["magic"] == 0x4D544252 and got["addr"] == 0x7F00_0000_1000
            assert (got["dims"], got["strides"], got["box"]) == (
                list(spec.dims), list(spec.strides), list(spec.box))
            assert got["elem_bytes"] == cu.itemsize(dtype) and got["elem_strides"] == [1, 1]
            assert drv.CUtensorMapSwizzle(got["swizzle"]).name.endswith(spec.swizzle)
            assert drv.CUtensorMapDataType(got["dtype"]).name.endswith(spec.data_type)


@pytest.mark.parametrize("change,why", [
    ({"strides": (1000,)}, "multiples of 16"),
    ({"strides": (96,)}, "shorter than a row"),
    ({"box": (64, 257)}, "1..256"),
    ({"box": (12, 64)}, "multiples of 16"),
    ({"swizzle": "64B"}, "swizzle span"),
])
def test_stand_in_driver_refuses_what_the_driver_refuses(fake_cuda, change, why):
    a, _ = wg.wgmma_tensor_maps((256, 256, 64), "fp16")
    bad = dataclasses.replace(a, **change)
    with pytest.raises(RuntimeError, match="CUDA_ERROR_INVALID_VALUE"):
        tma_launch.encode_tensor_map(bad, 0x7F00_0000_1000)
    assert why in fake_cuda.drv.last_refusal
    with pytest.raises(RuntimeError, match="CUDA_ERROR_INVALID_VALUE"):
        tma_launch.encode_tensor_map(a, 0x7F00_0000_1008)  # 8-byte aligned only


def _maps_with(buffer: str, **change: Any) -> Callable[[Case], Any]:
    def maps(case: Case) -> Any:
        return tuple(dataclasses.replace(m, **change) if m.buffer == buffer else m
                     for m in wg.wgmma_tensor_maps(case.size, case.dtype))
    return maps


@pytest.mark.parametrize("plant", ["A row stride one row long", "A unswizzled",
                                   "A box of half the rows", "B box rows half as long"])
def test_planted_host_tensor_map_errors_fail(fake_cuda, plant):
    """A wrong stride, swizzle or box in the host's tensor maps (the emulated TMA reads exactly
    what was encoded) fails validation, or the launch: the bytes expected never arrive."""
    m, n, k = size = (130, 272, 112)
    maps = {"A row stride one row long": _maps_with("A", strides=((k + 64) * 2,)),
            "A unswizzled": _maps_with("A", swizzle="NONE"),
            "A box of half the rows": _maps_with("A", box=(64, 64)),
            "B box rows half as long": _maps_with("B", box=(32, 64), swizzle="64B")}[plant]
    try:
        ok, err, why = run_gemm(fake_cuda, "fp16", size, maps=maps, clock=FAST_CLOCK)
    except LaunchFailed as e:
        assert any(m in str(e) for m in ("timed out", "expected transaction bytes",
                                          "past the end of A")), e
        return
    assert not ok, f"{plant}: still valid (rel. error {err})"


# -------------------------------------------------- planted kernel errors (mutants)
# Each mutant is the kernel's own text with one edit (asserted to apply exactly once), built
# as the emulated check build; the original passes the same cases (test above and below).
MUTANTS = {
    "swap_lbo_sbo": ("gmma_desc(sb + 2048 * kk, BK * 128, 1024)",
                     "gmma_desc(sb + 2048 * kk, 1024, BK * 128)"),
    "swizzle_64B": ("((sbo & 0x3FFFF) >> 4) << 32) | (1ull << 62);",
                    "((sbo & 0x3FFFF) >> 4) << 32) | (2ull << 62);"),
    "expect_tx": ("mbar_expect_tx(full, WG_STAGE_BYTES);",
                  "mbar_expect_tx(full, WG_STAGE_BYTES + 1024);"),
    "wrong_parity": ('mbar_wait(full0 + 8 * s, (kt / STAGES) & 1, "full", s);',
                     'mbar_wait(full0 + 8 * s, 0, "full", s);'),
    "early_release": ("wgmma_wait<0>();\n        mbar_arrive(empty0 + 8 * s);",
                      "mbar_arrive(empty0 + 8 * s);\n        wgmma_wait<0>();"),
    # fp8: the producer's transposed B tile, written by plain stores, read by wgmma
    "no_proxy_fence_after_transpose": ("fence_proxy_async();\n                named_barrier_sync",
                                       "named_barrier_sync"),
    "no_barrier_after_transpose": ("named_barrier_sync(1, 128);\n                if (t == 0)",
                                   "if (t == 0)"),
    "no_mbarrier_init_fence": ("        mbar_init_fence();\n", ""),
}


@pytest.fixture(scope="module")
def mutants(fake_cuda) -> dict[str, Path]:
    src = cu.load_source(wg.WGMMA_SOURCE)
    ds = ct.driver_sources()["gemm_wgmma"]
    texts = {}
    for name, (old, new) in MUTANTS.items():
        assert src.count(old) == 1, f"mutant {name}: the edited text is not in the kernel"
        texts[name] = src.replace(old, new)
    root = ct._TMP / "mutants"

    def build(name: str) -> tuple[str, Path]:
        ct.build_driver_source(ds, root / name, texts[name], opt="-O1")
        return name, root / name

    with ThreadPoolExecutor(max_workers=2) as ex:
        return dict(ex.map(build, MUTANTS))


MUTANT_SIZE = (256, 256, 512)  # 8 fp16 k tiles: the 4-stage ring wraps twice


def test_original_passes_the_mutant_case(fake_cuda):
    ok, err, why = run_gemm(fake_cuda, "fp16", MUTANT_SIZE)
    assert ok, why


@pytest.mark.parametrize("name", ["swap_lbo_sbo", "swizzle_64B"])
def test_mutant_descriptor_is_caught(fake_cuda, mutants, name):
    try:
        ok, err, why = run_gemm(fake_cuda, "fp16", MUTANT_SIZE, mutants[name])
    except LaunchFailed as e:  # the decode reached beyond the block, or into another stage
        assert any(m in str(e) for m in ("outside the block's allocation", "without having "
                                         "waited", "still reads", "not ordered after")), e
        return
    assert not ok, f"{name}: still valid (rel. error {err})"


def test_mutant_expect_tx_trips_the_bounded_wait(fake_cuda, mutants):
    """The full barrier expects 1 KiB more than the TMA boxes bring: its phase never
    completes, and the check build's bound traps with the barrier and phase (as the GPU's
    printf says it) instead of hanging. The consumers wait for bytes that never come, the
    producer for stages never released: either may trip first."""
    t0 = time.perf_counter()
    with pytest.raises(LaunchFailed) as e:
        run_gemm(fake_cuda, "fp16", MUTANT_SIZE, mutants["expect_tx"], clock=FAST_CLOCK)
    msg = str(e.value)
    assert "__trap() after: roofbench: mbarrier wait timed out: " in msg, msg
    assert ("full[0] (shared 0x30800) parity 0," in msg
            or "empty[0] (shared 0x30820) parity 0," in msg), msg
    assert time.perf_counter() - t0 < patience(60)  # a hang guard, scaled by the load


def test_mutant_wrong_parity_is_caught(fake_cuda, mutants):
    """The consumers wait for parity 0 of full[s] at every k tile. At tile 4 that parity's
    phase is either already past (tile 0's: the wait returns at once and wgmma reads the stage
    while TMA refills it, a race the emulation reports, or before it does: the consumers
    then arrive on empty[s] twice in the producer's one phase, and the producer's wait for
    empty[0] never completes) or current (it never completes: the bounded wait traps naming
    full[0] and parity 0); which one depends on the threads' order, all fail the launch."""
    with pytest.raises(LaunchFailed) as e:
        run_gemm(fake_cuda, "fp16", MUTANT_SIZE, mutants["wrong_parity"], clock=FAST_CLOCK)
    msg = str(e.value)
    assert ("timed out: full[0] (shared 0x30800) parity 0," in msg
            or "timed out: empty[0] (shared 0x30820) parity 0," in msg or "still reads" in msg
            or "not ordered after" in msg or "without having waited" in msg), msg


@pytest.mark.parametrize("name,dtype,error", [
    ("no_proxy_fence_after_transpose", "fp8",
     r"wgmma.mma_async \(B\) \(async proxy\) reads shared 0x"),
    ("no_barrier_after_transpose", "fp8",
     r"wgmma.mma_async \(B\) reads shared 0x|overwrites what other threads are reading|"
     "mbarrier wait timed out: staging"),
    ("no_mbarrier_init_fence", "fp16", "before a fence.mbarrier_init"),
])
def test_mutant_async_proxy_fences_are_caught(fake_cuda, mutants, name, dtype, error):
    """The fp8 transpose's plain stores reach wgmma only through fence.proxy.async and the
    warpgroup's barrier before thread 0 arrives on the stage's barrier; the barriers reach
    the other threads and TMA only through fence.mbarrier_init after their init. Without
    each, the emulation reports it, naming the kernel; the original passes the same case.
    The missing fences are reported whatever the timing. Without the barrier, the race is
    reported, unless thread 0 ran so far ahead that its TMA refilled a staging buffer before
    any other producer thread read it: they then wait for a phase already past, and the
    bounded wait traps naming the staging barrier."""
    size = (128, 256, 512)  # 4 fp8 k tiles in a ring of 3 stages
    ok, err, why = run_gemm(fake_cuda, dtype, size)
    assert ok, why
    with pytest.raises(LaunchFailed) as e:
        run_gemm(fake_cuda, dtype, size, mutants[name], clock=FAST_CLOCK)
    msg = str(e.value)
    assert msg.startswith(f"gemm_wgmma_{dtype}: ") and re.search(error, msg), msg
    if name == "no_proxy_fence_after_transpose":
        assert "with no fence.proxy.async after the store" in msg, msg


def test_mutant_early_release_is_a_race(fake_cuda, mutants):
    """Releasing the stage before wait_group: the producer's TMA overwrites operands whose
    wgmma group is not ordered before it, whatever the threads' timing."""
    with pytest.raises(LaunchFailed, match="not ordered after the wait_group|still reads"):
        run_gemm(fake_cuda, "fp16", MUTANT_SIZE, mutants["early_release"])


# ------------------------------------------------------------ the emulation's own units
def _params(*values: Any) -> list[bytes]:
    return [v if isinstance(v, bytes) else np.asarray(v).tobytes() for v in values]


def _ptr(a: np.ndarray) -> np.uint64:
    return np.uint64(a.ctypes.data)


def test_try_wait_parity_semantics_and_the_bounded_wait(fake_cuda):
    """A fresh barrier passes parity 1 at once; parity 0 never completes: the bounded wait
    trips after the (emulated) cycle limit and names the barrier and phase."""
    mod = fake_cuda.module("hopper_unit.cu", clock=FAST_CLOCK)
    out = np.zeros(64, np.int32)
    fake_cuda.launch(mod, "unit_wait", (1,), (64,), 0, _params(np.int32(1), _ptr(out)))
    assert (out == 1).all()
    out[:] = 0
    with pytest.raises(LaunchFailed) as e:
        fake_cuda.launch(mod, "unit_wait", (1,), (64,), 0, _params(np.int32(0), _ptr(out)))
    assert "mbarrier wait timed out: unit[7]" in str(e.value) and "parity 0," in str(e.value)
    assert not out.any()



def test_barrier_the_others_never_reach_fails_the_launch(fake_cuda):
    """Threads waiting at a __syncthreads that the rest of the block returned past: the GPU
    hangs; the emulation fails the launch as a deadlock, naming the first waiting thread and
    its barrier, and the waiting threads do not run on."""
    mod = fake_cuda.module("hopper_unit.cu")
    out = np.zeros(64, np.int32)
    with pytest.raises(LaunchFailed, match=r"unit_deadlock: deadlock: 32 of 64 threads wait at "
                       r"barriers the others never reach \(thread 32 at __syncthreads, "):
        fake_cuda.launch(mod, "unit_deadlock", (1,), (64,), 0, _params(_ptr(out)))
    assert not out.any()

def _tma_map(fc: FakeCuda, arr: np.ndarray, box: tuple[int, int], swizzle: str) -> bytes:
    e = arr.itemsize
    t = {1: "UINT8", 2: "FLOAT16"}[e]
    spec = cu.TensorMapSpec("X", t, (arr.shape[1], arr.shape[0]), (arr.strides[0],), box,
                            swizzle)
    return tma_launch.encode_tensor_map(spec, arr.ctypes.data)


@pytest.mark.parametrize("expect_extra,done", [(0, 1), (16, 0)])
def test_phase_completes_when_arrivals_and_bytes_are_both_in(fake_cuda, expect_extra, done):
    """A phase flips only when both the arrival count and the transaction count reach zero,
    and TMA data is read once the wait saw it."""
    mod = fake_cuda.module("hopper_unit.cu")
    g = (np.arange(64 * 64, dtype=np.uint16) + 0x4321).reshape(64, 64)
    tmap = _tma_map(fake_cuda, g, (64, 8), "128B")
    out = np.full(8, -1, np.int32)
    args = _params(tmap, np.int32(64 * 8 * 2 + expect_extra), np.int32(0), _ptr(out))
    if done:
        fake_cuda.launch(mod, "unit_phase", (1,), (32,), 4096, args)
    else:  # 16 bytes never come: the block ends with them outstanding
        with pytest.raises(LaunchFailed, match="16 expected transaction bytes that never came"):
            fake_cuda.launch(mod, "unit_phase", (1,), (32,), 4096, args)
    # parity 1 (the phase before) counts as completed until phase 0 completes
    assert out[:6].tolist() == [1, 0, 0, 0, done, 1 - done]
    assert out[6] == (0x21 if done else -1)  # 0x21 of 0x4321, once waited for


def test_plain_load_of_tma_data_before_the_wait_is_refused(fake_cuda):
    """The box lands when its phase completes: a plain load of it by a thread that has not
    waited for that phase fails, whether or not the bytes happened to be there."""
    mod = fake_cuda.module("hopper_unit.cu")
    g = np.ones((64, 64), np.uint16)
    out = np.full(8, -1, np.int32)
    args = _params(_tma_map(fake_cuda, g, (64, 8), "128B"), np.int32(64 * 8 * 2), np.int32(1),
                   _ptr(out))
    with pytest.raises(LaunchFailed, match="unit_phase: plain load of shared 0x.*written by a "
                       "TMA whose mbarrier phase this thread has not waited for"):
        fake_cuda.launch(mod, "unit_phase", (1,), (32,), 4096, args)


def _swizzled(addr: np.ndarray, span: int) -> np.ndarray:
    """The TMA / wgmma swizzle of a span (32/64/128 bytes): the 16-byte chunk bits of an
    address XOR the 128-byte line bits within the pattern (numpy, independent of the C)."""
    if span == 0:
        return addr
    w = span // 16
    return addr ^ (((addr >> 7) & (w - 1)) << 4)


@pytest.mark.parametrize("swizzle,span", [("NONE", 0), ("32B", 32), ("64B", 64),
                                          ("128B", 128)])
@pytest.mark.parametrize("elem", [1, 2])
def test_tma_box_lands_swizzled_with_zero_fill(fake_cuda, swizzle, span, elem):
    rows, cols = 37, 208  # the box below hangs over the right and bottom edges
    rng = np.random.default_rng(11)
    dt = np.uint8 if elem == 1 else np.uint16
    g = rng.integers(1, 250, (rows, cols)).astype(dt)
    box0 = (span or 48) // elem
    box = (box0, 16)
    c0, c1 = cols - box0 // 2, rows - 9
    mod = fake_cuda.module("hopper_unit.cu")
    nbytes = box0 * elem * 16
    out = np.zeros(nbytes, np.uint8)
    tmap = _tma_map(fake_cuda, g, box, swizzle)
    fake_cuda.launch(mod, "unit_tma", (1,), (128,), 8192,
                     _params(tmap, np.int32(c0), np.int32(c1), np.int32(nbytes), _ptr(out)))
    want_box = np.zeros((16, box0), dt)
    inb = g[c1:c1 + 16, c0:c0 + box0]
    want_box[:inb.shape[0], :inb.shape[1]] = inb
    raw = want_box.view(np.uint8).reshape(-1)
    want = np.zeros(nbytes, np.uint8)
    want[_swizzled(np.arange(nbytes), span)] = raw
    np.testing.assert_array_equal(out, want)


@pytest.mark.parametrize("mode,error", [(0, "more arrivals"), (1, "init"),
                                        (2, "overwritten by a plain store"),
                                        (3, "before a fence.mbarrier_init")])
def test_mbarrier_misuse_is_refused(fake_cuda, mode, error):
    mod = fake_cuda.module("hopper_unit.cu")
    out = np.zeros(64, np.int32)
    with pytest.raises(LaunchFailed, match=error):
        fake_cuda.launch(mod, "unit_mbar_misuse", (1,), (64,), 0,
                         _params(np.int32(mode), _ptr(out)))


@pytest.mark.parametrize("mode,error", [(0, None), (1, None),
                                        (2, "without a wgmma.fence"),
                                        (3, "no wait_group retired"),
                                        (4, "changed before the wait_group"),
                                        (5, "still reads")])
def test_wgmma_asynchrony(fake_cuda, mode, error):
    """Accumulators are valid only after wait_group (NaN before); a missing fence, a group
    never waited for, and operands overwritten in flight (plain store or TMA) fail."""
    mod = fake_cuda.module("hopper_unit.cu")
    g = np.ones((64, 64), np.float16)
    tmap = _tma_map(fake_cuda, g, (64, 64), "128B")
    out = np.zeros(256, np.float32)
    args = _params(tmap, np.int32(mode), _ptr(out))
    if error:
        with pytest.raises(LaunchFailed, match=error):
            fake_cuda.launch(mod, "unit_wgmma", (1,), (128,), 48 * 1024, args)
        return
    fake_cuda.launch(mod, "unit_wgmma", (1,), (128,), 48 * 1024, args)
    after = out[128:] if mode == 1 else out[:128]
    assert (after == 16.0).all(), after  # 16 products of 1 x 1
    if mode == 1:
        assert np.isnan(out[:128]).all()  # read before wait_group


# ------------------------------------------------------------------ the wgmma probe
def _probe_tiles(prec: str, words: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """A [64 x K] and B [256 x K] (both K-major, 128-byte swizzle) as the probe's descriptors
    read them from the words it copies to shared memory, decoded in numpy."""
    import ml_dtypes

    raw = words.view(np.uint8)
    e = 1 if prec == "fp8_tc" else 2

    def tile(base: int, rows: int) -> np.ndarray:
        r = np.arange(rows)[:, None]
        kb = np.arange(128)[None, :]
        addr = base + (r // 8) * 1024 + (r % 8) * 128 + (((kb // 16) ^ (r % 8)) * 16) + kb % 16
        b = raw[addr]
        if e == 1:
            return b.view(ml_dtypes.float8_e4m3fn).astype(np.float64)
        h = np.ascontiguousarray(b).view(np.uint16)
        if prec == "fp16_tc":
            return h.view(np.float16).astype(np.float64)
        return (h.astype(np.uint32) << 16).view(np.float32).astype(np.float64)

    return tile(0, 64), tile(64 * 128, 256)


@pytest.mark.parametrize("prec", ["fp8_tc", "fp16_tc", "bf16_tc"])
def test_wgmma_probe_computes_what_it_claims(fake_cuda, prec):
    """The probe kernel (roofs/probes/cuda/wgmma.cu) under emulation: every thread's output is
    iters x the sum of its accumulators of A B^T (per the wgmma D layout), and the emulation
    counted exactly the FLOPs gpu_math.wgmma_flops charges."""
    kname, kdim = gm.WGMMA_KERNELS[prec]
    words = np.ascontiguousarray(gm.wgmma_words(prec, np.random.default_rng(7)))
    iters, block = 3, 384
    out = np.zeros(block, np.float32)
    mod = fake_cuda.module("wgmma.cu")
    fake_cuda.launch(mod, kname, (1,), (block,), 0,
                     _params(_ptr(words), np.int32(iters), _ptr(out)))
    a, b = _probe_tiles(prec, words)
    d = a @ b.T  # [64][256]
    t = np.arange(block) % 128
    w, lane = t // 32, t % 32
    rows = np.stack([16 * w + lane // 4, 16 * w + lane // 4 + 8], 1)  # [thread][h]
    cols = (8 * np.arange(32)[None, :, None] + 2 * (lane % 4)[:, None, None]
            + np.arange(2)[None, None, :]).reshape(block, 64)
    want = iters * np.array([d[np.ix_(rows[i], cols[i])].sum() for i in range(block)])
    np.testing.assert_allclose(out, want, rtol=2e-5)
    st = fake_cuda.stats(mod)
    assert st["flops"] == gm.wgmma_flops(1, block, iters, kdim)
    assert st["wgmma"] == (block // 128) * iters * gm.WGMMA_STEPS
