"""The runner: validation catches wrong and incomplete kernels; failures are never valid
points; metrics derive from counted work and measured time; the timer keeps raw samples."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from numba import njit, prange
from roofbench.bench.backends.cpu import CpuBackend
from roofbench.bench.present.figure_data import valid_points
from roofbench.bench.present.report import render
from roofbench.bench.suite.runner import run_case
from roofbench.kernels.registry import workloads
from roofbench.kernels.spec import Case

from roofbench.records import RunResult
from roofbench.roof_records import Roof, RoofSet
from roofbench.timing import TimerConfig

FAST = TimerConfig(warmup_s=0.0, warmup_min_runs=1, min_samples=3, max_samples=5,
                   budget_s=0.05)


@njit(parallel=True)
def _wrong_add(a, b, c, n):
    for i in prange(n):
        c[i] = a[i] - b[i]


@njit
def _half_add(a, b, c, n):
    for i in range(n // 2):
        c[i] = a[i] + b[i]


def planted(kernel_fn, name: str) -> Case:
    w = workloads()["vector_add"]
    base = w.variants["scalar"]
    v = dataclasses.replace(base, name=name, impls={"cpu": {"add": kernel_fn}})
    return Case(dataclasses.replace(w, variants={name: v}), v, "fp32", (1001,))


def roofs() -> RoofSet:
    return RoofSet("test", [Roof("dram", "memory", 1e10, "measured", level="dram"),
                            Roof("fp32", "compute", 1e11, "measured", precision="fp32")])


@pytest.mark.parametrize("fn,name,why", [(_wrong_add, "wrong", "relative error"),
                                         (_half_add, "half", "not written")])
def test_planted_wrong_kernel_is_caught_and_never_plotted(fn, name, why):
    rec = run_case(planted(fn, name), CpuBackend(), roofs(), FAST, np.random.default_rng(1))
    assert rec.outcome.status == "invalid" and not rec.valid
    assert why in rec.outcome.error
    assert (
        rec.measurement.median_s is None and rec.roofline.flop_per_s is None
    )  # its time never counts
    assert valid_points([rec]) == []
    run = RunResult(backend="cpu", device="test", roofs=roofs(), cases=[rec])
    assert "validation failed" in render(run)


def test_valid_case_gets_metrics_from_counted_work_and_measured_time():
    w = workloads()["l2norm"]
    case = Case(w, w.variants["naive"], "fp32", (4099,))
    rec = run_case(case, CpuBackend(), roofs(), FAST, np.random.default_rng(2))
    assert rec.outcome.status == "ok" and rec.valid
    assert rec.declaration.flops == 3 * 4099 and rec.declaration.bytes["dram"] == 36 * 4099
    assert rec.roofline.flop_per_s == pytest.approx(
        rec.declaration.flops / rec.measurement.median_s
    )
    assert rec.roofline.attainable == pytest.approx(1e10 * 3 / 36)
    assert rec.roofline.efficiency == pytest.approx(
        rec.roofline.flop_per_s / rec.roofline.attainable
    )
    assert rec.roofline.bound == "memory"
    assert len(rec.measurement.timing.samples) == rec.measurement.timing.n >= 3
    # each launch of the pipeline is timed too
    assert all(la.timing and la.timing.n >= 3 for la in rec.measurement.launches)


def test_a_kernel_that_raises_is_recorded_and_the_run_goes_on():
    def boom(*args):
        raise RuntimeError("launch failed: too many resources requested")

    rec = run_case(planted(boom, "boom"), CpuBackend(), roofs(), FAST,
                   np.random.default_rng(3))
    assert rec.outcome.status == "error" and "too many resources" in rec.outcome.error


















def test_an_invalid_case_does_not_carry_the_previous_cases_noise_record():
    be = CpuBackend()
    w = workloads()["l2norm"]
    ok = run_case(Case(w, w.variants["fused"], "fp32", (4099,)), be, roofs(), FAST,
                  np.random.default_rng(3))
    assert ok.outcome.status == "ok" and "timing_environment" in ok.evidence.extra
    bad = run_case(planted(_wrong_add, "wrong"), be, roofs(), FAST, np.random.default_rng(4))
    assert bad.outcome.status == "invalid" and "timing_environment" not in bad.evidence.extra




def _ctx(be, dtype):
    from roofbench.kernels.spec import SizeContext

    return SizeContext(kind=be.kind, llc_bytes=be.last_level_cache(),
                       budget_bytes=be.memory_budget(), dtype=dtype)


def test_variants_of_one_case_share_its_inputs_unless_a_launch_writes_one(monkeypatch):
    """run_cases draws a group's inputs and reference once for the variants that follow
    (they run back to back), on the CPU as on a GPU; a variant declared to write an input
    gets fresh ones, and so does the variant after it."""
    from roofbench.bench.suite.runner import run_cases
    from roofbench.kernels.spec import Workload

    w = workloads()["vector_add"]
    base = w.variants["scalar"]

    @njit
    def _add_into_a(a, b, c, n):
        for i in range(n):
            c[i] = a[i] + b[i]
            a[i] = 0.0 * a[i] + a[i]  # writes a (the same values): declared below

    def plan_writing_a(size, dtype):
        (la,) = base.plan(size, dtype)
        return [dataclasses.replace(la, writes=(*la.writes, "a"))]

    writer = dataclasses.replace(base, name="writer", plan=plan_writing_a,
                                 impls={"cpu": {"add": _add_into_a}})
    twin = dataclasses.replace(base, name="twin")
    wl = dataclasses.replace(w, variants={"scalar": base, "twin": twin, "writer": writer})
    cases = [Case(wl, wl.variants[v], "fp32", (1001,))
             for v in ("scalar", "twin", "writer", "scalar")]
    draws: list[str] = []
    real = Workload.make_inputs

    def counted(self, size, dtype, rng, arrays=None):
        draws.append(dtype)
        return real(self, size, dtype, rng, arrays)

    monkeypatch.setattr(Workload, "make_inputs", counted)
    recs = run_cases(cases, CpuBackend(), roofs(), FAST, seed=3)
    assert [r.outcome.status for r in recs] == ["ok"] * 4
    assert len(draws) == 3  # scalar + twin share; writer draws; the scalar after it draws
