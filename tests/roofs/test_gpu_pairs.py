"""The GPU roof samplers (roofs/probes/gpu_pairs.py) on a virtual GPU
(tests/standins/virtual_gpu.py): which roof gets which sampler, each one launching the kernel
that measured its roof at the roof's own launch, and the rate it returns against the planted
one, at the calibration's clocks and at lower ones."""

from __future__ import annotations

import dataclasses

import pytest
import virtual_gpu as vg
from roofbench.roofs.probes import gpu_math as gm
from roofbench.roofs.probes import gpu_pairs as gp
from roofbench.roofs.probes.gpu_device import ProbeUnavailable

from roofbench.roof_records import Roof


def roof(name: str) -> Roof:
    return next(r for r in vg.roofs().roofs if r.name.startswith(name))


def sampler(name: str, gpu: vg.VirtualGpu) -> gp.GpuSampler:
    found = gp.sampler_of(roof(name))
    assert found is not None
    return found[1](gpu.device())


def test_each_measured_roof_gets_the_sampler_of_its_probe():
    keys = {r.name: (gp.sampler_of(r) or ("none",))[0] for r in vg.roofs().roofs}
    assert keys == {"HBM (stream triad fp32)": "memory:dram:stream triad fp32",
                    "HBM (datasheet)": "none",  # not measured here
                    "L2 (read, na loads, working-set sweep)": "memory:l2:l2_read_na_ilp8",
                    "FP32 FMA (CUDA cores)": "compute:fp32:fma_fp32",
                    "FP16 tensor (cupy GEMM)": "none"}  # a tensor-core ceiling: no sampler
    lib = dataclasses.replace(roof("HBM (stream"), evidence={"probe": "cupy copy"})
    assert (gp.sampler_of(lib) or ("none",))[0] == "memory:dram:cupy copy"


@pytest.mark.parametrize("evidence", [
    {"probe": "stream triad fp32"},  # no launch configuration (a file of another version)
    {"probe": "stream triad fp16", "config": {"grid": 1, "block": 1}},  # no such kernel
    {"probe": "numpy copy"},  # no such library reference
    {"probe": "smem_read", "config": {"grid": 1, "block": 1}},
])
def test_an_hbm_roof_without_the_launch_that_measured_it_gets_none(evidence):
    assert gp.sampler_of(dataclasses.replace(roof("HBM (stream"), evidence=evidence)) is None


def test_an_l2_or_fma_roof_without_the_launch_that_measured_it_gets_none():
    ev = dict(roof("L2").evidence, config={"block": 512})  # no grid, no chunks
    assert gp.sampler_of(dataclasses.replace(roof("L2"), evidence=ev)) is None
    ev = dict(roof("FP32").evidence, probe="fma_fp64")  # another precision's kernel
    assert gp.sampler_of(dataclasses.replace(roof("FP32"), evidence=ev)) is None


@pytest.mark.parametrize("speed", [1.0, 0.55])
def test_the_hbm_sampler_runs_the_roofs_stream_kernel_on_the_roofs_arrays(speed):
    gpu = vg.VirtualGpu()
    s = sampler("HBM (stream", gpu)
    gpu.speed = speed
    assert s() == pytest.approx(vg.HBM * speed)
    assert gpu.compiled == ["stream.cu"] and gpu.launches == ["stream_triad_f32"]
    assert [a.n for a in gpu.allocated[:3]] == [vg.GiB // 4] * 3  # the roof's own arrays
    s()
    assert gpu.compiled == ["stream.cu"] and len(gpu.allocated) == 4  # allocated once


def test_the_hbm_sampler_fits_its_arrays_in_the_free_memory():
    gpu = vg.VirtualGpu(free_bytes=3 * vg.GiB)
    s = sampler("HBM (stream", gpu)
    assert s() == pytest.approx(vg.HBM)
    assert all(a.n * 4 <= vg.GiB // 4 for a in gpu.allocated[:3])  # a quarter of it, in all
    with pytest.raises(ProbeUnavailable, match="not enough free memory"):
        sampler("HBM (stream", vg.VirtualGpu(free_bytes=vg.L2_BYTES))()


def test_a_library_copy_that_set_the_hbm_roof_is_sampled_itself():
    gpu = vg.VirtualGpu()
    r = dataclasses.replace(roof("HBM (stream"), evidence={"probe": "cupy copy",
                                                           "array_bytes": vg.GiB})
    found = gp.sampler_of(r)
    assert found is not None
    s = found[1](gpu.device())
    assert s() == pytest.approx(vg.HBM) and gpu.launches == ["cupy copy"]


def test_the_l2_sampler_times_its_launch_with_the_working_set_back_in_l2():
    gpu = vg.VirtualGpu()
    s = sampler("L2", gpu)
    gpu.case(1e9, vg.HBM)  # the case ran: L2 holds its data
    assert s() == pytest.approx(vg.L2)  # not the cold first pass
    assert gpu.launches == ["case", "l2_read_na_ilp8", "l2_read_na_ilp8"]
    assert s.work == vg.L2_LAUNCH.bytes_per_launch
    # planted: the same launch timed cold reads below the roof
    gpu.case(1e9, vg.HBM)
    cold = s.work / s.timed(s.launch)
    assert cold < 0.99 * vg.L2


def test_the_fma_sampler_is_the_roofs_kernel_shortened_to_a_short_sample():
    gpu = vg.VirtualGpu()
    s = sampler("FP32", gpu)
    t0 = gpu.now
    assert s() == pytest.approx(vg.FP32)
    assert gpu.now - t0 == pytest.approx(gp.FMA_PAIR_S, rel=0.01)  # not the roof's launch
    assert gp.FMA_PAIR_S < vg.FMA_S
    assert s.work == gm.fma_flops(vg.FMA_GRID * vg.FMA_BLOCK,
                                  round(vg.FMA_ITERS * gp.FMA_PAIR_S / vg.FMA_S), False)
    gpu.speed = 0.7  # a power limit: the sample reads the clocks as they are
    assert s() == pytest.approx(0.7 * vg.FP32)
    s.close()
    assert s.launch is None
