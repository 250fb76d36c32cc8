"""The runner: validation catches wrong and incomplete kernels; failures are never valid
points; metrics derive from counted work and measured time; the timer keeps raw samples."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from numba import njit, prange
from roofbench.bench.backends.cpu import CpuBackend
from roofbench.bench.errors import UserError
from roofbench.bench.measure.runner import run_case
from roofbench.bench.measure.session import parse_size, select_cases
from roofbench.bench.present.plot import valid_points
from roofbench.bench.present.report import render
from roofbench.kernels.registry import workloads
from roofbench.kernels.spec import Case

from roofbench.records import Roof, RoofSet, RunResult
from roofbench.timing import TimerConfig, sample_loop

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
    assert rec.status == "invalid" and not rec.valid
    assert why in rec.error
    assert rec.median_s is None and rec.flop_per_s is None  # its time never counts
    assert valid_points([rec]) == []
    run = RunResult(backend="cpu", device="test", roofs=roofs(), cases=[rec])
    assert "validation failed" in render(run)


def test_valid_case_gets_metrics_from_counted_work_and_measured_time():
    w = workloads()["l2norm"]
    case = Case(w, w.variants["naive"], "fp32", (4099,))
    rec = run_case(case, CpuBackend(), roofs(), FAST, np.random.default_rng(2))
    assert rec.status == "ok" and rec.valid
    assert rec.flops == 3 * 4099 and rec.bytes["dram"] == 36 * 4099
    assert rec.flop_per_s == pytest.approx(rec.flops / rec.median_s)
    assert rec.attainable == pytest.approx(1e10 * 3 / 36)
    assert rec.efficiency == pytest.approx(rec.flop_per_s / rec.attainable)
    assert rec.bound == "memory"
    assert len(rec.timing.samples) == rec.timing.n >= 3
    # each launch of the pipeline is timed too
    assert all(la.timing and la.timing.n >= 3 for la in rec.launches)


def test_a_kernel_that_raises_is_recorded_and_the_run_goes_on():
    def boom(*args):
        raise RuntimeError("launch failed: too many resources requested")

    rec = run_case(planted(boom, "boom"), CpuBackend(), roofs(), FAST,
                   np.random.default_rng(3))
    assert rec.status == "error" and "too many resources" in rec.error


def test_timer_keeps_raw_samples_and_stops_on_noise():
    vals = iter([1.0] * 100)
    t = sample_loop(lambda: next(vals), TimerConfig(warmup_s=0, warmup_min_runs=2,
                                                    min_samples=10, target_cv=0.01))
    assert t.stopped_by == "noise" and t.n == 10 and t.warmup_runs == 2
    assert t.samples == [1.0] * 10 and t.cv == 0.0


def test_timer_flags_noisy_results():
    seq = iter([1.0, 3.0] * 100)
    t = sample_loop(lambda: next(seq), TimerConfig(warmup_s=0, warmup_min_runs=0,
                                                   min_samples=4, max_samples=8,
                                                   budget_s=100))
    assert t.stopped_by == "max_samples" and t.n == 8
    assert any(f.startswith("noisy") for f in t.flags)
    assert t.samples[:2] == [1.0, 3.0]  # never rounded, never reordered


@pytest.mark.parametrize("text,size", [("1048576", (1048576,)), ("16M", (16 << 20,)),
                                       ("2^10", (1024,)), ("4096x1024", (4096, 1024)),
                                       ("7x5x3", (7, 5, 3))])
def test_parse_size(text, size):
    assert parse_size(text) == size


@pytest.mark.parametrize("text", ["0", "-5", "abc", "4096x", "1.5"])
def test_parse_size_rejects_bad_input(text):
    with pytest.raises(UserError):
        parse_size(text)


def test_select_rejects_unknown_names_and_wrong_dimensions():
    be = CpuBackend()
    with pytest.raises(UserError, match="choose from"):
        select_cases(be, workloads=["nope"])
    with pytest.raises(UserError, match="choose from"):
        select_cases(be, workloads=["l2norm"], variant="nope")
    with pytest.raises(UserError, match="choose from"):
        select_cases(be, dtypes=["fp7"])
    with pytest.raises(UserError, match="dimension"):
        select_cases(be, workloads=["gemm"], size=(100,))


def test_too_large_size_is_refused_before_allocating():
    with pytest.raises(UserError, match="more than"):
        select_cases(CpuBackend(), workloads=["vector_add"], size=(1 << 40,))


def test_default_sizes_are_at_least_four_times_the_last_level_cache():
    # The rule in whole bytes (kernels.spec.SizeContext.count): each main array >= 4x LLC and
    # 64 MiB, unless one more element would push the largest variant (naive: 6 arrays for
    # l2norm, 3 for vector_add) past the budget. tests/test_simulated_machines.py checks the
    # same on machines unlike this one.
    be = CpuBackend()
    budget = be.memory_budget()
    be.memory_budget = lambda: budget  # free memory moves while other work runs: pin it
    cases, skipped = select_cases(be, workloads=["vector_add", "l2norm"])
    assert not [s for s in skipped if "budget" in (s.error or "")]
    for c in cases:
        main, item = c.buffers()["a"].nbytes, c.buffers()["a"].nbytes // c.size[0]
        arrays = 6 if c.workload.name == "l2norm" else 3
        assert main >= max(4 * be.last_level_cache(), 64 << 20) or \
            (main + item) * arrays > budget, c.key
        assert c.footprint() <= budget


def test_cpu_backend_runs_only_fp32_and_fp64():
    cases, skipped = select_cases(CpuBackend(), workloads=["vector_add"], quick=True)
    assert {c.dtype for c in cases} <= {"fp32", "fp64"}


def test_an_invalid_case_does_not_carry_the_previous_cases_noise_record():
    be = CpuBackend()
    w = workloads()["l2norm"]
    ok = run_case(Case(w, w.variants["fused"], "fp32", (4099,)), be, roofs(), FAST,
                  np.random.default_rng(3))
    assert ok.status == "ok" and "timing_environment" in ok.extra
    bad = run_case(planted(_wrong_add, "wrong"), be, roofs(), FAST, np.random.default_rng(4))
    assert bad.status == "invalid" and "timing_environment" not in bad.extra


def test_a_workload_sweep_gives_one_case_per_size_and_size_overrides_it():
    # Workload.sweep: the default run measures every size of the sweep (attention over N);
    # --size measures that one size; a workload without a sweep keeps its one default.
    be = CpuBackend()
    w = workloads()["attention"]
    cases, _ = select_cases(be, workloads=["attention"], variant="flash", dtypes=["fp32"])
    from roofbench.kernels.attention import CPU_SWEEP
    assert [c.size[2] for c in cases] == list(CPU_SWEEP)
    assert [c.size for c in cases] == w.default_sizes(_ctx(be, "fp32"))
    one, _ = select_cases(be, workloads=["attention"], variant="flash", dtypes=["fp32"],
                          size=(1, 2, 300, 64))
    assert [c.size for c in one] == [(1, 2, 300, 64)]
    quick, _ = select_cases(be, workloads=["attention"], variant="flash", dtypes=["fp32"],
                            quick=True)
    assert [c.size for c in quick] == [w.quick_size]
    plain = workloads()["vector_add"]
    assert plain.sweep is None
    assert plain.default_sizes(_ctx(be, "fp32")) == [plain.default_size(_ctx(be, "fp32"))]


def _ctx(be, dtype):
    from roofbench.kernels.spec import SizeContext

    return SizeContext(kind=be.kind, llc_bytes=be.last_level_cache(),
                       budget_bytes=be.memory_budget(), dtype=dtype)
