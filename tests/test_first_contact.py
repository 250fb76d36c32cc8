"""What the first run on a real H200 broke, tested on the files it wrote (tests/fixtures).

The readers of results and roofs files must handle every real file; the roof-set schema is
typed; every case meets the roof of the unit that runs it; a report renders section by
section; the stopping rule converges on real GPU samples.
"""

from __future__ import annotations

import json
import statistics
from pathlib import Path

import pytest
from roofbench.bench.cli import main
from roofbench.bench.present import report as report_mod
from roofbench.bench.results import load_run
from roofbench.kernels.registry import workloads
from roofbench.kernels.spec import Case

from roofbench.readers import read_roofset
from roofbench.records import CaseResult, DatasheetMatch, ProbeFailure, Roof, RoofSet
from roofbench.roofline import apply_roofs, roof_precision
from roofbench.timing import TimerConfig, converged, median_ci, sample_loop

FIXTURES = Path(__file__).parent / "fixtures" / "h200-2026-11-30"
RESULTS = sorted(FIXTURES.glob("results-*.json"))


def test_fixtures_are_there():
    assert len(RESULTS) == 3, RESULTS


# -- typed roof-set schema --------------------------------------------------------------

def _v1(info: dict) -> dict:
    return {"device": "d", "info": info, "roofs": [
        {"name": "hbm", "kind": "memory", "level": "dram", "value": 1e12, "source": "measured"}]}


def test_v1_failed_probes_as_list_or_dict_become_typed():
    as_list = read_roofset(_v1({"failed_probes": [{"probe": "mma_fp8_tc", "reason": "x"}]}))
    as_dict = read_roofset(_v1({"failed_probes": {"mma_fp8_tc": "x"}}))
    assert as_list.failed_probes == as_dict.failed_probes == [ProbeFailure("mma_fp8_tc", "x")]
    assert "failed_probes" not in as_list.info  # one place for each fact


def test_v1_datasheet_of_the_cpu_and_the_gpu_path_become_one_field():
    cpu = read_roofset(_v1({"datasheet": "unknown for CPUs"}))
    gpu = read_roofset(_v1({"datasheet_match": {"entry": "h200-sxm", "reason": "r"}}))
    assert cpu.datasheet == DatasheetMatch(None, "unknown for CPUs")
    assert gpu.datasheet == DatasheetMatch("h200-sxm", "r")


def test_roof_set_round_trip_is_version_2_and_unknown_versions_are_refused():
    rs = RoofSet("d", [Roof("hbm", "memory", 1e12, "measured", level="dram")],
                 info={"sweep": [1, 2]}, datasheet=DatasheetMatch("e", "r"),
                 failed_probes=[ProbeFailure("p", "why")], notes=["n"], elapsed_s=1.5)
    d = json.loads(json.dumps(rs.to_dict()))
    assert d["schema_version"] == 2
    assert read_roofset(d) == rs
    d["schema_version"] = 99
    with pytest.raises(ValueError, match="schema version 99"):
        read_roofset(d)


@pytest.mark.parametrize("path", RESULTS, ids=lambda p: p.name)
def test_every_real_results_file_loads_with_typed_roofs(path: Path):
    run = load_run(path)
    assert run.roofs is not None and run.roofs.datasheet.entry == "h200-sxm"
    assert all(isinstance(f, ProbeFailure) for f in run.roofs.failed_probes)
    assert run.cases and all(isinstance(c, CaseResult) for c in run.cases)


# -- report and plot on every real file ------------------------------------------------

@pytest.mark.parametrize("path", RESULTS, ids=lambda p: p.name)
def test_report_and_plot_succeed_on_every_real_file(path: Path, tmp_path: Path, capsys):
    assert main(["report", str(path), "--out", str(tmp_path / "report.md")]) == 0
    text = (tmp_path / "report.md").read_text()
    for section in ("## Roofs", "## Cases", "## Environment"):
        assert section in text
    assert "could not be rendered" not in text
    assert "Datasheet: `h200-sxm`" in text  # the GPU path's datasheet line is no longer lost
    assert "Probes that failed: mma_fp8_tc" in text
    assert main(["plot", str(path), "--out", str(tmp_path / "roofline")]) == 0
    assert (tmp_path / "roofline.png").stat().st_size > 0


def test_a_section_that_fails_is_named_and_the_others_are_written(monkeypatch):
    def broken(run):
        raise KeyError("planted")

    sections = [(t, broken if t == "Fusion" else f) for t, f in report_mod.SECTIONS]
    monkeypatch.setattr(report_mod, "SECTIONS", sections)
    text = report_mod.render(load_run(FIXTURES / "results-rownorm-default.json"))
    assert "## Fusion\n\n_This section could not be rendered: KeyError: 'planted'_" in text
    assert "## Cases" in text and "## Environment" in text and "## Roofs" in text


# -- the roof of the unit that runs a case ---------------------------------------------

def _gemm_case(variant: str, dtype: str) -> Case:
    w = workloads()["gemm"]
    return Case(w, w.variants[variant], dtype, (64, 64, 64))


@pytest.mark.parametrize("dtype,gpu,cpu", [("fp16", "fp16_tc", "fp32"),
                                           ("bf16", "bf16_tc", "fp32"),
                                           ("fp64", "fp64_tc", "fp64"),
                                           ("fp32", "fp32", "fp32")])
def test_library_gemm_meets_the_roof_of_the_unit_that_runs_it(dtype, gpu, cpu):
    case = _gemm_case("library", dtype)
    assert case.precision_on("gpu") == gpu
    if dtype != "bf16":  # numpy has no bf16 BLAS
        assert case.precision_on("cpu") == cpu
    assert _gemm_case("regblock", dtype).precision_on("gpu") in ("fp32", "fp64")
    assert _gemm_case("tensor", "fp16").precision_on("gpu") == "fp16_tc"


def test_a_device_without_the_tensor_roof_falls_back_to_its_cuda_core_roof():
    rs = RoofSet("sm_89", [Roof("fp64", "compute", 1e12, "measured", precision="fp64"),
                           Roof("hbm", "memory", 1e12, "measured", level="dram")])
    assert roof_precision("fp64_tc", rs) == "fp64"
    assert roof_precision("fp16_tc", rs) == "fp16_tc"  # no fp16 roof either: stays, unbounded
    rec = CaseResult("gemm", "library", "cuda", "fp64", [1024] * 3, "fp64_tc", "tensor",
                     flops=2 * 1024**3, bytes={"dram": 3 * 8 * 1024**2},
                     ai={"dram": 2 * 1024**3 / (3 * 8 * 1024**2)}, status="ok", valid=True,
                     median_s=0.01, flop_per_s=2 * 1024**3 / 0.01)
    apply_roofs(rec, rs)
    assert rec.limiting_roof == "fp64" and rec.efficiency == pytest.approx(0.2147, rel=1e-3)


def test_the_real_hgemm_is_no_longer_held_against_the_fp32_roof(tmp_path: Path):
    run = load_run(FIXTURES / "results-gemm-4096.json")
    lib16 = next(c for c in run.cases if c.variant == "library" and c.dtype == "fp16")
    assert lib16.precision == "fp16_tc" and lib16.cores == "tensor"
    assert lib16.limiting_roof.startswith("FP16 tensor") and 0.5 < lib16.efficiency < 1
    assert lib16.timing.samples[:3] == json.loads(
        (FIXTURES / "results-gemm-4096.json").read_text())["cases"][-1]["timing"]["samples_s"][:3]
    assert any("schema version 1" in n for n in run.notes)
    text = report_mod.render(run)
    assert "781%" not in text


def test_a_point_above_its_roof_is_flagged_with_its_likely_cause():
    run = load_run(FIXTURES / "results-rownorm-default.json")
    fused = next(c for c in run.cases if c.variant == "fused")
    assert fused.efficiency > 1  # the re-read of x hits the 60 MiB L2 on the H200
    text = report_mod.render(run)
    line = next(x for x in text.splitlines() if x.startswith(f"- {fused.key}"))
    assert "likely cause" in line and "cache" in line


# -- the stopping rule on real GPU samples ---------------------------------------------

def _series(min_n: int = 100) -> list[tuple[str, list[float]]]:
    out = []
    for path in RESULTS:
        for c in json.loads(path.read_text())["cases"]:
            t = c.get("timing")
            if t and len(t["samples_s"]) >= min_n:
                out.append((f"{c['variant']}/{c['dtype']}", t["samples_s"]))
            for la in c.get("launches") or []:
                lt = la.get("timing")
                if lt and len(lt["samples_s"]) >= min_n:
                    out.append((f"{c['variant']}/{la['kernel']}", lt["samples_s"]))
    return out


def _replay(samples: list[float], cfg: TimerConfig):
    it = iter(samples)
    now = [0.0]

    def one() -> float:
        x = next(it)
        now[0] += x
        return x

    return sample_loop(one, cfg, clock=lambda: now[0])


def test_recorded_series_ran_to_their_budget_under_the_cv_rule():
    series = _series()
    assert len(series) >= 6
    for name, s in series:  # what made every GPU loop run its full 2 s: CV never under 1%
        assert statistics.stdev(s) / statistics.fmean(s) > 0.01, name


def test_median_ci_rule_stops_early_on_real_samples_and_keeps_the_median():
    stopped_early = 0
    for name, s in _series():
        cfg = TimerConfig(warmup_s=0.0, warmup_min_runs=0, budget_s=10.0, max_samples=len(s))
        t = _replay(s, cfg)
        if t.stopped_by == "median_ci":
            stopped_early += 1
            assert t.n <= 400, name
            # The device drifts a little over two seconds; the early median stays within
            # 2.5% of the median of the whole recorded series.
            assert abs(t.median / statistics.median(s) - 1) < 0.025, name
    assert stopped_early >= 5


def test_median_ci_is_distribution_free_and_narrows():
    bimodal = sorted([275e-6, 300e-6] * 50)
    lo, hi = median_ci(bimodal)
    assert lo == 275e-6 and hi == 300e-6  # a 50/50 two-mode series: the CI spans both modes
    tight = sorted([1.0] * 40 + [1.001] * 40 + [5.0] * 3)  # rare outliers do not matter
    assert converged(tight, tight, TimerConfig(target_cv=0.0)) == "median_ci"
    assert converged(bimodal, bimodal, TimerConfig(target_cv=0.0)) is None


def test_gpu_sampling_is_bounded_per_case_and_per_launch():
    from roofbench.bench.measure.session import (
        GPU_CASE_BUDGET_S,
        GPU_LAUNCH_BUDGET_S,
        RunOptions,
        timer_configs,
    )

    case, launch = timer_configs(RunOptions(), "gpu")
    assert case.budget_s == GPU_CASE_BUDGET_S and launch.budget_s == GPU_LAUNCH_BUDGET_S
    case, launch = timer_configs(RunOptions(), "cpu")
    assert case.budget_s == launch.budget_s == TimerConfig().budget_s


def test_kernels_not_yet_validated_on_hardware_are_marked_in_the_report():
    from roofbench.kernels.cuda_impl import NOT_VALIDATED_ON_HARDWARE

    assert "gemm_wgmma" in NOT_VALIDATED_ON_HARDWARE
    run = load_run(FIXTURES / "results-gemm-4096.json")  # mma.sync at ea800a6: validated
    assert "not yet validated" not in report_mod.render(run)
    tensor = next(c for c in run.cases if c.variant == "tensor")
    facts = tensor.launches[0].facts
    facts.function, facts.validated_on_hardware = "gemm_wgmma_fp16", False  # as on sm_90
    text = report_mod.render(run)
    assert ("gemm/tensor/fp16/4096x4096x4096 (gemm_wgmma_fp16 on sm_90): not yet validated on "
            "hardware before this run; here it is `ok`") in text


def test_atomic_writes_honour_the_umask(tmp_path: Path):
    import os

    from roofbench.fileio import atomic_write_text

    old = os.umask(0o022)
    try:
        atomic_write_text(tmp_path / "r.json", "{}")
    finally:
        os.umask(old)
    assert (tmp_path / "r.json").stat().st_mode & 0o777 == 0o644
    assert [p.name for p in tmp_path.iterdir()] == ["r.json"]


def test_hand_written_variants_are_given_as_a_fraction_of_the_library():
    text = report_mod.render(load_run(FIXTURES / "results-gemm-4096.json"))
    line = next(x for x in text.splitlines() if x.startswith("Hand-written vs library"))
    # regblock fp32 39.4 vs cuBLAS 49.1 TFLOP/s, mma.sync fp16 142.8 vs HGEMM 500.7 (README)
    assert "regblock fp32 4096x4096x4096 0.80" in line
    assert "tensor fp16 4096x4096x4096 0.29" in line


def test_a_silent_case_gets_still_running_lines(capsys):
    import time

    from roofbench.bench.cli.progress import Heartbeat

    with Heartbeat(every_s=0.2) as beat:
        beat.start("gemm/naive/fp64/4096x4096x4096")
        time.sleep(1.3)
        beat.say("[1/1] gemm/naive/fp64/4096x4096x4096 ok")
        time.sleep(0.8)  # between cases (no case running): nothing more is said
    err = capsys.readouterr().err.splitlines()
    running = [x for x in err if "gemm/naive/fp64/4096x4096x4096 still running" in x]
    assert len(running) >= 2
    assert err[-1] == "[1/1] gemm/naive/fp64/4096x4096x4096 ok"
