"""Measure a GPU's real roofs: HBM/L2/shared-memory bandwidth, CUDA-core FMA peaks, tensor-core
ceilings (library GEMMs, hand-written mma.sync and, on Hopper, hand-written wgmma), and the
empirical roofline curve (ERT).

Dependencies point one way: this module never imports roofbench.bench. It takes an injected
``time_fn(fn) -> Timing`` (the backend's CUDA-event timer) and talks to the GPU through a small
adapter (``CupyGpu``; CuPy is imported lazily, inside it), so the orchestration and the roof
extraction run in the tests with a fake GPU and a fake timer. The pure functions
(``pick_best_config``, ``roof_from_samples``, ``knee_from_curve``, ...) hold the arithmetic.

A probe that fails (precision unsupported on this arch, out of memory, library missing) is
recorded with its reason in ``RoofSet.failed_probes``; the others are still measured.

The layers, one module each: ``gpu_device`` (the adapter and the device's facts), ``gpu_run``
(one calibration's state, samples to rates), ``gpu_memory`` (bandwidth probes), ``gpu_math``
(compute probes and ERT); this module runs them in order under a time budget.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from functools import partial
from typing import Any

from roofbench.roof_records import DatasheetMatch, ProbeFailure, RoofSet

from .. import datasheet
from .gpu_device import CupyGpu, Gpu, TimeFn, device_facts
from .gpu_math import (
    ERT_FMAS,
    ERT_PRECISIONS,
    FMA_KERNELS,
    MMA_KERNELS,
    WGMMA_KERNELS,
    probe_ert,
    probe_fma,
    probe_gemm,
    probe_mma,
    probe_wgmma,
)
from .gpu_memory import (
    L2_FORMS,
    L2_ILPS,
    L2_LOADS,
    STREAM_DTYPES,
    STREAM_RW,
    l2_kernel,
    probe_hbm,
    probe_l2,
    probe_smem,
)
from .gpu_run import ProbeRun

# Wall-clock budget of one calibration: a probe that would start later is recorded as not run.
# The probes run in order of what the roofline needs most; the full calibration's modelled
# time on an H200 is ~40 s (tests/roofs/test_gpu_probes_nogpu.py: the calibration time model).
CALIBRATION_BUDGET_S = {False: 55.0, True: 25.0}  # by quick

Checkpoint = Callable[[RoofSet], None]


def measure_gpu_roofs(time_fn: TimeFn, quick: bool = False,
                      progress: Callable[[str], None] | None = None, device: int = 0,
                      gpu: Gpu | None = None, budget_s: float | None = None,
                      checkpoint: Checkpoint | None = None) -> RoofSet:
    """Run every GPU probe and return measured roofs beside datasheet and theoretical ones.

    ``time_fn(fn)`` times one launch callable and returns a Timing (raw samples kept);
    ``time_fn(fn, search=True)`` with the short timer of searches and curve points. ``gpu``
    defaults to CuPy on ``device``; tests pass a fake. ``budget_s`` (default
    ``CALIBRATION_BUDGET_S``) bounds the wall time: HBM, the CUDA-core FMA, the library GEMM
    and the wgmma roofs come first; L2, shared memory, mma.sync and ERT curves after.
    ``checkpoint`` hears the roofs measured so far after every probe (marked partial), so a
    calibration killed part-way keeps what it measured.
    """
    t_start = time.perf_counter()
    say = progress or (lambda _msg: None)
    gpu = gpu if gpu is not None else CupyGpu(device)
    facts = device_facts(gpu)
    rs = RoofSet(device=gpu.name, info={"backend_probe": "roofbench.roofs.probes.gpu",
                                        "quick": quick, "device_facts": facts})
    budget = CALIBRATION_BUDGET_S[bool(quick)] if budget_s is None else budget_s

    def snapshot(probe: str) -> None:
        if checkpoint is not None:
            part = RoofSet(device=rs.device, roofs=list(rs.roofs), info=dict(rs.info))
            _finish(part, run, gpu, facts, t_start)
            part.info["partial"] = f"calibration in progress: last probe {probe}"
            checkpoint(part)

    run = ProbeRun(gpu=gpu, time_fn=time_fn, quick=quick, progress=say, rs=rs,
                   deadline=t_start + budget, budget_s=budget, after_probe=snapshot)
    _run_probes(run)
    _finish(rs, run, gpu, facts, t_start)
    return rs


def _finish(rs: RoofSet, run: ProbeRun, gpu: Gpu, facts: dict[str, Any], t_start: float) -> None:
    """The reference roofs, failures, probe rows and elapsed time of a (partial) roof set."""
    _add_reference_roofs(rs, gpu, facts)
    rs.failed_probes = [ProbeFailure(f["probe"], f["reason"]) for f in run.failed]
    rs.info["probes"] = list(run.rows)
    rs.elapsed_s = time.perf_counter() - t_start
    rs.info["ceilings_note"] = ("tensor-core roofs come in three kinds: 'library' (cuBLAS "
                                "through CuPy/PyTorch: wgmma on Hopper), 'wgmma' (hand-written "
                                "Hopper-native) and 'mma.sync' (hand-written legacy warp MMA); "
                                "evidence.ceiling says which")


def _run_probes(run: ProbeRun) -> None:
    """Every probe in order of what the roofline needs most (the budget may stop the last)."""
    gpu = run.gpu
    run.attempt("hbm", lambda: probe_hbm(run))
    for prec in ("fp64", "fp32", "fp16", "bf16"):
        run.attempt(f"fma_{prec}", partial(probe_fma, run, prec))
    for prec in ("fp64_tc", "tf32_tc", "fp16_tc", "bf16_tc", "fp8_tc"):
        run.attempt(f"gemm_{prec}", partial(probe_gemm, run, prec))
    if gpu.cc == (9, 0):  # the wgmma probes need sm_90a exactly: the Hopper ceilings first
        for prec in WGMMA_KERNELS:
            run.attempt(f"wgmma_{prec}", partial(probe_wgmma, run, prec))
    run.attempt("l2", lambda: probe_l2(run))
    run.attempt("smem", lambda: probe_smem(run))
    for prec in MMA_KERNELS:
        if prec == "fp8_tc" and gpu.cc == (9, 0):
            continue  # Hopper has no native FP8 mma.sync: the wgmma FP8 probe replaces it
        run.attempt(f"mma_{prec}", partial(probe_mma, run, prec))
    for prec in ERT_PRECISIONS:
        run.attempt(f"ert_{prec}", partial(probe_ert, run, prec))


def _add_reference_roofs(rs: RoofSet, gpu: Gpu, facts: dict[str, Any]) -> None:
    """Datasheet leads and the figures derived from the device's own facts, beside the
    measured; and which datasheet entry matched (or why none did)."""
    ds_roofs, why = datasheet.datasheet_roofs(facts.get("name") or gpu.name, gpu.sm_count,
                                              facts.get("memory_total_bytes"))
    for r in ds_roofs + datasheet.theoretical_roofs(facts):
        rs.add(r)
    m = datasheet.match(facts.get("name") or gpu.name, gpu.sm_count,
                        facts.get("memory_total_bytes"))
    rs.datasheet = DatasheetMatch(entry=m.spec.key if m.spec else None, reason=why)


def kernel_names(cc: tuple[int, int]) -> dict[str, list[str]]:
    """Every kernel the probes launch on a device of compute capability ``cc``, per source
    file (the tests check that each one exists in the compiled cubin)."""
    names = {
        "stream.cu": [f"stream_{k}_{suf}" for suf, _ in STREAM_DTYPES.values() for k in STREAM_RW],
        "cache.cu": [l2_kernel(f, lo, i) for f in L2_FORMS for lo in L2_LOADS for i in L2_ILPS]
        + ["smem_read"],
        "fma.cu": [k for p, k in FMA_KERNELS.items() if p != "bf16" or cc >= (8, 0)],
        "mma.cu": [k for p, (k, _, mcc) in MMA_KERNELS.items()
                   if cc >= mcc and not (p == "fp8_tc" and cc == (9, 0))],
        # built for sm_90a through cuda-python; the plain archs hold trapping stubs
        "wgmma.cu": [k for k, _ in WGMMA_KERNELS.values()] if cc == (9, 0) else [],
        "ert.cu": [f"ert_{suf}_k{k}" for p, (suf, _) in ERT_PRECISIONS.items()
                   if p != "bf16" or cc >= (8, 0) for k in ERT_FMAS],
    }
    return names
