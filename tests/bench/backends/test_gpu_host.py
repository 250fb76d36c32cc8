"""Host-side logic of the GPU backends, tested without a GPU: occupancy, launch geometry,
the onepass refusal, storage types and poison values, the CUDA-event timer (with fake events),
and the one-line error of --backend cuda on a machine without a device."""

from __future__ import annotations

import subprocess
import sys

import ml_dtypes
import numpy as np
import pytest
from patience import patience
from roofbench.bench.backends.base import CaseUnsupported, unavailable_reason
from roofbench.bench.backends.cuda_timer import EventOps, cuda_time, throttle_flag
from roofbench.bench.backends.gpu_common import (
    ALL_LAUNCHERS,
    POISON,
    STORAGE,
    from_storage,
    plan_launches,
    to_storage,
)
from roofbench.bench.backends.occupancy_calc import ARCH, occupancy, smem_for_blocks
from roofbench.kernels import cuda_impl as cu
from roofbench.kernels import gemm, rownorm
from roofbench.kernels.arrays import np_dtype
from roofbench.kernels.registry import workloads
from roofbench.kernels.spec import Buf, Case

from roofbench.timing import TimerConfig

H200 = cu.DeviceProps(cc=(9, 0), sm_count=132, l2_bytes=60 << 20, name="fake H200")
A100 = cu.DeviceProps(cc=(8, 0), sm_count=108, l2_bytes=40 << 20, name="fake A100")


# ---------------------------------------------------------------------------- occupancy
@pytest.mark.parametrize("threads,regs,smem,cc,blocks,occ,limiter", [
    (256, 32, 0, (9, 0), 8, 1.0, "warps"),
    (256, 128, 0, (9, 0), 2, 0.25, "registers"),
    (256, 127, 16384, (9, 0), 2, 0.25, "registers"),  # regs round up to 128 per thread
    (1024, 64, 128, (8, 0), 1, 0.5, "registers"),
    (256, 32, 40960, (9, 0), 5, 0.625, "shared_memory"),  # 40 KiB + 1 KiB reserved
    (256, 32, 0, (8, 9), 6, 1.0, "warps"),  # Ada: 48 warps per SM
    (64, 16, 0, (8, 6), 16, 32 / 48, "blocks"),
])
def test_occupancy(threads, regs, smem, cc, blocks, occ, limiter):
    o = occupancy(threads, regs, smem, cc)
    assert o.blocks_per_sm == blocks
    assert o.occupancy == pytest.approx(occ)
    assert o.limiter == limiter


def test_occupancy_too_many_registers():
    assert occupancy(256, 300, 0, (9, 0)).blocks_per_sm == 0


@pytest.mark.parametrize("cc", sorted(ARCH))
@pytest.mark.parametrize("static", [0, 4096])
def test_the_scan_shared_memory_lets_exactly_that_many_blocks_reside(cc, static):
    """An occupancy level's dynamic shared memory: the calculator then holds exactly b blocks
    (shared memory the limiter), and 128 bytes more would hold fewer: it is the most."""
    for b in range(1, ARCH[cc].max_blocks_per_sm + 1):
        dyn = smem_for_blocks(b, static, cc)
        lim = ARCH[cc]
        exact = [t for t in range(lim.smem_alloc_unit, lim.smem_per_sm + 1, lim.smem_alloc_unit)
                 if lim.smem_per_sm // t == b
                 and t - lim.smem_reserved_per_block - static >= 0]
        if dyn is None:  # no allocation holds exactly b blocks (the unit skips b)
            assert not exact, (cc, b)
            continue
        assert dyn == max(exact) - lim.smem_reserved_per_block - static
        o = occupancy(32, 16, static + dyn, cc)
        assert (o.blocks_per_sm, o.limiter) == (b, "shared_memory") or (
            o.blocks_per_sm == b and b == ARCH[cc].max_blocks_per_sm)
        assert occupancy(32, 16, static + dyn + 128, cc).blocks_per_sm < b


def test_the_scan_shared_memory_respects_the_opt_in_limit():
    assert smem_for_blocks(1, 0, (9, 0)) == 227 * 1024  # the H100/H200 opt-in maximum
    assert smem_for_blocks(1, 0, (9, 0), optin=48 * 1024) is None
    with pytest.raises(ValueError):
        smem_for_blocks(0, 0, (9, 0))


# ---------------------------------------------------------------------- launch geometry
def test_grid_stride_caps_at_one_wave():
    w = workloads()["vector_add"]
    big = Case(w, w.variants["vec4"], "fp32", (1 << 28,))
    small = Case(w, w.variants["vec4"], "fp32", (1000,))
    (pl,) = plan_launches(big, H200)
    assert pl.grid == (132 * 8, 1, 1) and pl.block == (256, 1, 1)
    assert pl.function == "vadd_vec4_fp32"
    assert pl.args[-1] == np.int64(1 << 28) and isinstance(pl.args[-1], np.int64)
    (pl,) = plan_launches(small, H200)
    assert pl.grid == (1, 1, 1)  # 250 float4 packs: one block


def test_gemm_geometry_covers_odd_sizes():
    w = workloads()["gemm"]
    for variant, tile in (("naive", 16), ("tiled", 32), ("regblock", 128), ("tensor_mma", 128)):
        (pl,) = plan_launches(Case(w, w.variants[variant], "fp16", (1000, 130, 77)), H200)
        assert pl.grid[0] * tile >= 130 and pl.grid[1] * tile >= 1000
        assert (pl.grid[0] - 1) * tile < 130 and (pl.grid[1] - 1) * tile < 1000


def test_fp8_tensor_needs_sm89():
    w = workloads()["gemm"]
    case = Case(w, w.variants["tensor"], "fp8", (256, 256, 256))
    with pytest.raises(CaseUnsupported, match="8.9"):
        plan_launches(case, A100)
    # the native wgmma kernel on sm_90
    assert plan_launches(case, H200, launchers=ALL_LAUNCHERS)[0].function == "gemm_wgmma_fp8"


def test_tensor_has_no_fp32_kernel():
    assert gemm.CUDA["tensor"]["tensor"].unsupported("fp32", (9, 0))


def test_rownorm_naive_uses_one_block_per_row():
    w = workloads()["rownorm"]
    pls = plan_launches(Case(w, w.variants["naive"], "fp32", (4096, 1024)), H200)
    assert [p.function for p in pls] == ["rn_square_fp32", "rn_rowsum_fp32", "rn_rsqrt_fp32",
                                         "rn_scale_fp32"]
    assert pls[1].grid == (4096, 1, 1) and pls[3].grid == (4096, 1, 1)
    assert isinstance(pls[2].args[-1], np.float32)  # eps is a float scalar


@pytest.mark.parametrize("hidden,dtype,threads", [
    (1024, "fp32", 64), (4096, "fp32", 256), (16384, "fp32", 1024), (32768, "fp32", 1024),
    (16384, "fp16", 512), (65536, "fp8", 1024), (1000, "fp32", 64), (1001, "fp32", 128),
])
def test_onepass_threads(hidden, dtype, threads):
    t = rownorm.onepass_threads(hidden, dtype)
    assert t == threads
    pack = cu.pack_values(dtype)
    if hidden % pack == 0:
        assert -(-(hidden // pack) // t) <= rownorm.RN_PACKS
    else:
        assert -(-hidden // t) <= rownorm.RN_ELEMS


def test_onepass_refuses_rows_it_cannot_hold():
    assert rownorm.onepass_refuse((8, 32768), "fp32", "cuda") is None
    why = rownorm.onepass_refuse((8, 32772), "fp32", "cuda")
    assert why and "32772" in why and "fused" in why
    why = rownorm.onepass_refuse((8, 16385), "fp32", "cuda")  # not a multiple of 4: scalar path
    assert why and "16384" in why
    assert rownorm.onepass_refuse((8, 1 << 20), "fp32", "cpu") is None  # other backends decide
    w = workloads()["rownorm"]
    assert w.variants["onepass"].refuse((8, 1 << 20), "fp16", "cuda")


# ------------------------------------------------------------------- storage / poison
@pytest.mark.parametrize("dtype", ["fp64", "fp32", "fp16", "bf16", "fp8"])
def test_storage_round_trip_and_poison(dtype):
    buf = Buf((3, 5), dtype, "input")
    host = (np.arange(15, dtype=np.float64).reshape(3, 5) / 8 - 0.9).astype(np_dtype(dtype))
    raw = to_storage(host, buf)
    assert raw.dtype == STORAGE[dtype] and raw.nbytes == host.nbytes
    back = from_storage(raw, buf)
    assert back.dtype == host.dtype and np.array_equal(back.astype(np.float64),
                                                       host.astype(np.float64))
    poisoned = np.full(4, POISON[dtype], dtype=STORAGE[dtype])
    assert np.isnan(from_storage(poisoned, Buf((4,), dtype)).astype(np.float64)).all()


def test_fp8_poison_is_e4m3fn_nan():
    assert np.isnan(np.array([0x7F], np.uint8).view(ml_dtypes.float8_e4m3fn).astype(float))[0]


# -------------------------------------------------------------------------- CUDA timer
class FakeGpu:
    """Events that read a fake GPU clock; the work advances it."""

    def __init__(self) -> None:
        self.now = 0.0
        self.flushes = 0
        self.log: list[str] = []

    def ops(self) -> EventOps:
        def record(ev: dict) -> None:
            ev["t"] = self.now
            self.log.append("record")

        def flush() -> None:
            self.flushes += 1
            self.log.append("flush")
            self.now += 1.0  # a flush takes time, but before the window opens

        return EventOps(new_event=dict, record=record, wait=lambda ev: None,
                        elapsed_s=lambda a, b: b["t"] - a["t"], flush_l2=flush)

    def work(self) -> None:
        self.now += 0.002
        self.log.append("work")


def test_cuda_timer_times_only_the_work_and_flushes_outside():
    g = FakeGpu()
    cfg = TimerConfig(warmup_s=0.0, warmup_min_runs=1, min_samples=5, max_samples=5,
                      budget_s=10.0, cold=True)
    t = cuda_time(g.work, cfg, g.ops(), snapshot=lambda: {"sm_clock_mhz": 1980,
                                                          "max_sm_clock_mhz": 1980})
    assert t.samples == pytest.approx([0.002] * 5)  # the 1 s flushes are not in the window
    assert g.flushes == t.n + t.warmup_runs
    assert g.log[:4] == ["flush", "record", "work", "record"]
    assert t.config["timer"] == "cuda_events" and not t.flags
    assert t.config["clocks"]["sm_clock_mhz_samples"] == [1980] * 5


def test_cuda_timer_flags_throttled_samples():
    g = FakeGpu()
    clocks = iter([1980] * 3 + [900] * 10)  # warm-up, then 2 good, then throttled
    cfg = TimerConfig(warmup_s=0.0, warmup_min_runs=1, min_samples=6, max_samples=6,
                      budget_s=10.0)
    t = cuda_time(g.work, cfg, g.ops(),
                  snapshot=lambda: {"sm_clock_mhz": next(clocks), "max_sm_clock_mhz": 1980})
    assert any(f.startswith("throttled:") for f in t.flags), t.flags
    assert throttle_flag([{"sm_clock_mhz": 1900, "max_sm_clock_mhz": 1980}]) is None
    assert throttle_flag([{"sm_clock_mhz": 1900, "max_sm_clock_mhz": 1980,
                           "throttled": True}])


# ------------------------------------------------------------------ no GPU: one line
@pytest.mark.parametrize("backend", ["cuda", "pycuda", "numba"])
def test_gpu_backend_without_device_is_one_line(backend, tmp_path):
    if unavailable_reason(backend) is None:
        pytest.skip(f"{backend} is available on this machine")
    p = subprocess.run([sys.executable, "-m", "roofbench.bench.cli", "run", "--backend",
                        backend, "--quick", "--out", str(tmp_path)],
                       capture_output=True, text=True, timeout=patience(120))
    assert p.returncode == 2
    lines = p.stderr.strip().splitlines()
    assert len(lines) == 1 and "unavailable" in lines[0], p.stderr
    assert "Traceback" not in p.stderr
