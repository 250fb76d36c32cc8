"""The time of `make bench` on an H200, modelled from counted bytes, FLOPs and launches.

The cases are the ones `make bench` selects on the CUDA backend of an H200 (the real
select_cases on a backend with the H200's properties: every workload x dtype at its default
size); each case's phases are modelled as the runner now runs them (inputs drawn and the
reference computed on the device, validation there, only scalars to the host), and its timing
loops run through the real sampling loop (timer.sample_loop) and the real timer settings of a
GPU run against a model clock, memory-bound samples alternating between two modes 9% apart
(the first contact's 275 / 300 us) so that their loops run to their budget. Rates are the
first contact's measurements where it made them (docs/gpu-check.md lists each with its
source) and stated assumptions elsewhere. The figure is a model, not a measurement: the
gpu-check step's limit is sized from it with a margin.
"""

from __future__ import annotations

import importlib.util
from dataclasses import dataclass
from unittest import mock

import numpy as np
import pytest
from h200_planner import H200Planner
from roofbench.bench.suite.session import RunOptions, select_cases, timer_configs
from roofbench.kernels.arrays import itemsize
from roofbench.kernels.registry import workloads
from roofbench.kernels.spec import Case

from roofbench.timing import sample_loop

pytestmark = pytest.mark.slow
HBM = 3.9e12  # B/s: STREAM triad and CuPy copy on the H200 (evidence h200-2026-11-30)
# FLOP/s per (variant, dtype) at 4096^3; measured there where a figure is given
GEMM_RATE = {
    ("naive", "fp32"): 5.4e12, ("tiled", "fp32"): 11.2e12, ("regblock", "fp32"): 39.4e12,
    ("library", "fp32"): 49.1e12, ("tensor_mma", "fp16"): 142.8e12,
    ("library", "fp16"): 500.7e12, ("library", "fp64"): 63.4e12,  # cuBLAS DGEMM probe
}
ASSUMED = {
    "fp64_simt_over_fp32": 0.5,  # naive/tiled/regblock fp64: half the fp32 rate (FMA peak)
    "tensor": {"fp16": 400e12, "bf16": 400e12, "fp8": 600e12},  # wgmma, ~0.5x cuBLAS
    "tensor_mma_fp8": 100e12,  # lowered to FP16 HMMA on sm_90
    "launch_s": 5e-6,  # per launch (CuPy enqueue 6.2 us)
    "sample_host_s": 40e-6,  # events, wait, NVML clocks read per sample
    "rng_bytes_per_s": 1e12,  # cuRAND XORWOW float32 draws
    # NVRTC, no kernel cache: 2 s a source, more for the three with mma/wgmma templates (any
    # other source, a new workload's, is a plain one: the model never names a workload)
    "compile_s": 2.0,
    "compile_s_heavy": {"gemm.cu": 3.0, "gemm_wgmma.cu": 4.0, "attention.cu": 4.0},
    # attention: hand-written mma.sync kernels assumed at a quarter of the dense fp16 peak,
    # the library (torch SDPA) at half of it
    "attention_hand": 250e12,
    "attention_library": 500e12,
    "dgemm_reference": 63.4e12,  # float64 reference of a GEMM: cuBLAS DGEMM on the device
    "fixed_s": {"start-up and imports": 4.0, "roofs file": 0.2, "plot and reports": 6.0},
    "save_per_case_s": 0.02,  # results.json rewritten after every case
    "bimodal": 0.043,
}


def launch_seconds(case: Case, i: int) -> float:
    la = case.launches()[i]
    moved = case.launch_bytes(la)["dram"]
    t = moved / HBM
    if case.workload.name == "gemm":
        v, d = case.variant.name, case.dtype
        if v == "tensor":
            rate = ASSUMED["tensor"][d]
        elif v == "tensor_mma" and d == "fp8":
            rate = ASSUMED["tensor_mma_fp8"]
        elif (v, d) in GEMM_RATE:
            rate = GEMM_RATE[(v, d)]
        elif v == "tensor_mma":
            rate = GEMM_RATE[("tensor_mma", "fp16")]
        else:  # SIMT variants: fp16/bf16 compute in fp32; fp64 at half
            rate = GEMM_RATE[(v, "fp32")] * (ASSUMED["fp64_simt_over_fp32"] if d == "fp64"
                                              else 1.0)
        t = max(t, la.flops / rate)
    elif case.workload.name.startswith("attention"):
        lib = case.variant.name == "library"
        t = max(t, la.flops / ASSUMED["attention_library" if lib else "attention_hand"])
    return t + ASSUMED["launch_s"]


def loop_seconds(sample_s: float, cfg, memory_bound: bool) -> float:
    """Seconds of one timing loop: the real sample_loop on a model clock."""
    clock = [0.0]
    i = [0]

    def one() -> float:
        i[0] += 1
        x = sample_s * (1 + (ASSUMED["bimodal"] * (-1) ** i[0] if memory_bound else 0.003))
        clock[0] += x + ASSUMED["sample_host_s"]
        return x
    sample_loop(one, cfg, clock=lambda: clock[0])
    return clock[0]


@dataclass
class CaseTime:
    key: str
    phases: dict[str, float]

    @property
    def total(self) -> float:
        return sum(self.phases.values())


def device_pass_bytes(dtype: str) -> int:
    """Bytes moved per element to draw and store one input on the device (two float32 draws,
    scale, sign, store; the fp8 rounding's table search and the bf16 bit rounding)."""
    return {"fp64": 80, "fp32": 40, "fp16": 40, "bf16": 64, "fp8": 160}[dtype]


def model_case(case: Case, cfg, launch_cfg) -> CaseTime:
    bufs = case.buffers()
    ins = [b for b in bufs.values() if b.role == "input"]
    outs = [b for b in bufs.values() if b.role == "output"]
    others = [b for b in bufs.values() if b.role != "input"]
    n_in = sum(b.count for b in ins)
    n_out = sum(b.count for b in outs)
    draws = 8 * n_in / ASSUMED["rng_bytes_per_s"]
    inputs = draws + n_in * device_pass_bytes(case.dtype) / HBM
    inputs += (n_in * (itemsize(case.dtype) + 8) + 3 * 16 * n_out) / HBM  # decode, reference
    if case.workload.name == "gemm":
        inputs += case.flops / ASSUMED["dgemm_reference"]
    prepare = 2 * sum(b.nbytes for b in ins) / HBM + 1e-3 * len(bufs)
    run = sum(launch_seconds(case, i) for i in range(len(case.launches())))
    validate = (sum(b.nbytes for b in others) / HBM + run
                + 60 * n_out / HBM + 10 * 20e-6)  # poison, a run, decode + norms, syncs
    memory_bound = case.workload.name != "gemm"
    t = loop_seconds(run, cfg, memory_bound)
    phases = {"inputs": inputs, "prepare": prepare, "validate": validate, "time": t}
    if len(case.launches()) > 1:
        phases["time_launches"] = sum(loop_seconds(launch_seconds(case, i), launch_cfg,
                                                   memory_bound)
                                      for i in range(len(case.launches())))
    return CaseTime(case.key, phases)


def model_make_bench() -> tuple[float, list[CaseTime], dict[str, float]]:
    real = importlib.util.find_spec
    # The H200 image has PyTorch (KINDS.md): its SDPA baselines are part of make bench there.
    # (its CUDA build: a CPU build of torch here, as the dev extra installs, is not asked)
    with mock.patch("importlib.util.find_spec",
                    lambda name, *a: real("json") if name == "torch" else real(name, *a)), \
            mock.patch("roofbench.kernels.cuda_impl._cpu_build", lambda package: False):
        be = H200Planner()
        cases, skipped = select_cases(be)
        assert not skipped, [s.outcome.error for s in skipped]
        cfg, launch_cfg = timer_configs(RunOptions(), "gpu")
        times = [model_case(c, cfg, launch_cfg) for c in cases]
        sources = {pl.impl.source for c in cases for pl in be.plan(c)
                   if getattr(pl.impl, "source", None)}
    fixed = dict(ASSUMED["fixed_s"])
    fixed["compile"] = sum(ASSUMED["compile_s_heavy"].get(s, ASSUMED["compile_s"])
                           for s in sources)
    fixed["results.json saves"] = ASSUMED["save_per_case_s"] * len(cases)
    total = sum(t.total for t in times) + sum(fixed.values())
    return total, times, fixed


def test_make_bench_on_an_h200_fits_120_s():
    total, times, fixed = model_make_bench()
    by_phase = {p: sum(t.phases.get(p, 0.0) for t in times)
                for p in ("inputs", "prepare", "validate", "time", "time_launches")}
    print(f"modelled make bench on an H200: {len(times)} cases, {total:.0f} s; phases "
          + ", ".join(f"{p} {v:.1f} s" for p, v in by_phase.items()) + "; fixed "
          + ", ".join(f"{k} {v:.1f} s" for k, v in fixed.items()))
    # every workload with a CUDA table, at its default size(s) (attention: a sweep of sizes),
    # each case once: the count follows the registry (a new workload adds its cases)
    assert {t.key.split("/")[0] for t in times} == {
        name for name, w in workloads().items()
        if any("cuda" in v.impls for v in w.variants.values())}
    assert len({t.key for t in times}) == len(times)
    assert total <= 120.0
    # the host no longer dominates: inputs, reference and validation are device-bound
    assert by_phase["inputs"] + by_phase["validate"] < 0.25 * by_phase["time"]
    slowest = max(times, key=lambda t: t.total)
    assert slowest.total < 5.0, slowest


def test_model_counts_bytes_and_launches():
    be = H200Planner()
    cases, _ = select_cases(be, workloads=["vector_add"], dtypes=["fp8"], variant="scalar")
    (c,) = cases
    assert c.size == (503316480,)  # 8 x 60 MiB of fp8 per array
    assert launch_seconds(c, 0) == pytest.approx(3 * 503316480 / HBM + ASSUMED["launch_s"])
    # a memory-bound loop runs to its budget (bimodal samples never converge)
    cfg, _ = timer_configs(RunOptions(), "gpu")
    s = loop_seconds(launch_seconds(c, 0), cfg, memory_bound=True)
    assert cfg.budget_s <= s <= cfg.budget_s + cfg.warmup_s + 2 * launch_seconds(c, 0) + 0.01
    steady = loop_seconds(1e-3, cfg, memory_bound=False)
    assert steady < 0.2  # a steady kernel stops on the noise rule
    assert np.isfinite(s)
