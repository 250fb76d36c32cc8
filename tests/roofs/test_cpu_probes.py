"""CPU roof probes and their C references: behaviour, not speed."""

from __future__ import annotations

import importlib.util
import json
import math
import shutil
import statistics
import sys
import time
from pathlib import Path

import numpy as np
import pytest
from patience import patience
from roofbench.kernels import nt_stores
from roofbench.roofs.probes import cpu as cp
from roofbench.roofs.probes import cpu_features as feat
from roofbench.roofs.probes import cpu_fma, x86_asm
from roofbench.roofs.probes import cpu_fma as fma
from roofbench.roofs.probes import cpu_stream as cs
from roofbench.roofs.probes import host_memory as hm
from testpaths import ROOT

from roofbench import cpu_cache as llc
from roofbench.cpu_cache import parse_size
from roofbench.roof_records import Roof, RoofSet

MiB = 1 << 20

def _load_script(name: str):
    """scripts/ holds developer tools outside the package: load one by path."""
    path = ROOT / "scripts" / f"{name}.py"
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    sys.modules[name] = mod  # dataclasses resolve their module by name
    spec.loader.exec_module(mod)
    return mod


cr = _load_script("cpu_reference")


class FakeTiming:
    """Duck-typed Timing: what the probes may use of roofbench.timing.Timing."""

    def __init__(self, samples: list[float]) -> None:
        self.samples = samples

    @property
    def median(self) -> float:
        return statistics.median(self.samples)

    def summary(self) -> dict:
        return {"n": len(self.samples), "median_s": self.median}

    def to_dict(self) -> dict:
        return {**self.summary(), "samples_s": list(self.samples)}


def run_three_times(fn) -> FakeTiming:
    """A minimal time_fn: really runs ``fn`` and times it, three samples, no warm-up."""
    samples = []
    for _ in range(3):
        t0 = time.perf_counter()
        fn()
        samples.append(time.perf_counter() - t0)
    return FakeTiming(samples)


# ----------------------------------------------------------------------------- STREAM


@pytest.mark.parametrize("n", [1, 7, 1001, 4099])
def test_stream_kernels_match_numpy(n: int) -> None:
    rng = np.random.default_rng(n)
    a, b, c = (rng.standard_normal(n) for _ in range(3))
    s = 3.0
    out = np.full(n, np.nan)
    cs.stream_copy(out, a)
    assert np.array_equal(out, a)
    cs.stream_scale(out, c, s)
    assert np.array_equal(out, s * c)
    cs.stream_add(out, a, b)
    assert np.array_equal(out, a + b)
    cs.stream_triad(out, b, c, s)  # a = b + s * c
    np.testing.assert_allclose(out, b + s * c, rtol=1e-15, atol=0)


@pytest.mark.parametrize("kernel", cs.STREAM_KERNELS)
def test_stream_arrays_check_every_element(kernel: str) -> None:
    arrays = cs.StreamArrays(3001)
    assert np.all(np.isfinite(arrays.b)) and np.any(arrays.b != 0)  # never timed on zeros
    arrays.check(kernel)  # poisons the output, runs, compares every element


def test_stream_arrays_are_aligned() -> None:
    arr = cs.aligned_empty(1001)
    assert arr.ctypes.data % (2 * MiB) == 0 and arr.shape == (1001,) and arr.dtype == np.float64
    assert cs.aligned_empty(10, offset=128).ctypes.data % (2 * MiB) == 128
    arrays = cs.StreamArrays(2048)
    starts = [x.ctypes.data for x in (arrays.a, arrays.b, arrays.c)]
    assert all(s % 64 == 0 for s in starts)
    assert len({s % 4096 for s in starts}) == 3  # no 4K aliasing between a[i], b[i], c[i]


def test_stream_accounting_is_streams() -> None:
    assert cs.STREAM_BYTES_PER_ELEMENT == {"copy": 16, "scale": 16, "add": 24, "triad": 24,
                                           "add-nt": 24}
    assert cs.STREAM_FLOPS_PER_ELEMENT["triad"] == 2


def test_stream_roof_is_well_formed() -> None:
    arrays = cs.StreamArrays(4096)
    timing = FakeTiming([2e-6, 1e-6, 3e-6])
    roof = cs.stream_roof("triad", arrays, timing, llc_bytes=1 * MiB)
    assert isinstance(roof, Roof)
    assert (roof.kind, roof.level, roof.source) == ("memory", "dram", "measured")
    assert roof.name == "dram stream-triad"
    assert roof.value == pytest.approx(24 * 4096 / 1e-6)  # STREAM's best rate: the ceiling
    ev = roof.evidence
    assert ev["probe"] == "stream-triad" and ev["bytes_per_run"] == 24 * 4096
    assert ev["array_bytes"] == 8 * 4096 and ev["threads"] >= 1
    assert ev["llc_multiple"] == pytest.approx(8 * 4096 / MiB)
    assert ev["timing"]["samples_s"] == [2e-6, 1e-6, 3e-6]
    assert ev["median_bytes_per_s"] == pytest.approx(24 * 4096 / 2e-6)
    assert ev["value_from"] == "best time"
    assert ev["sets_roof"] is True  # the triad's record: it may set the DRAM roof
    json.dumps(roof.to_dict())  # evidence is JSON-serialisable


def _codegen_child():
    path = ROOT / "tests" / "roofs" / "codegen_child.py"
    spec = importlib.util.spec_from_file_location("codegen_child", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_every_stream_kernel_is_one_record_the_codegen_child_compiles() -> None:
    """The table is the one list: the probe's kernels, their accounting and the codegen
    child's units all come from it (a kernel missing from the child fails here)."""
    assert tuple(k.name for k in cs.STREAM) == cs.STREAM_KERNELS
    assert len(set(cs.STREAM_KERNELS)) == len(cs.STREAM)
    child = _codegen_child()
    jobs = child.stream_jobs()
    assert set(jobs) == {k.name for k in cs.STREAM if not k.nontemporal}
    for name, (fn, sig) in jobs.items():
        k = cs.STREAM_BY_NAME[name]
        assert fn is k.fn and len(sig) == len(k.args)
    streaming = {getattr(nt_stores, n) for n, _, _ in child.STREAMING}
    assert all(k.fn in streaming for k in cs.STREAM if k.nontemporal)
    for k in cs.STREAM:  # every record states its accounting and whether it may set the roof
        assert k.out in k.args and isinstance(k.sets_roof, bool)
        assert k.bytes_per_element == 8 * sum(x in "abc" for x in k.args)


def test_a_new_stream_kernel_is_one_record(monkeypatch) -> None:
    """A kernel added as a record runs and is checked through it alone."""
    twin = cs.StreamKernel("copy-twin", cs.stream_copy, ("b", "a"), "b",
                           lambda a, b, c, s: a, 16, 0, sets_roof=False)
    monkeypatch.setitem(cs.STREAM_BY_NAME, twin.name, twin)
    arrays = cs.StreamArrays(3001)
    arrays.check("copy-twin")
    roof = cs.stream_roof("copy-twin", arrays, FakeTiming([1e-6]))
    assert roof.evidence["sets_roof"] is False and roof.value == pytest.approx(16 * 3001 / 1e-6)
    wrong = cs.StreamKernel("copy-wrong", cs.stream_copy, ("b", "a"), "b",
                            lambda a, b, c, s: c, 16, 0, sets_roof=False)
    monkeypatch.setitem(cs.STREAM_BY_NAME, wrong.name, wrong)
    with pytest.raises(RuntimeError, match="differs from numpy"):
        arrays.check("copy-wrong")


def test_a_probe_that_may_not_set_the_roof_never_does() -> None:
    """Not "the highest wins": the highest of the probes that may set the roof does."""
    setter = Roof("dram stream-triad", "memory", 40e9, "measured", level="dram",
                  evidence={"sets_roof": True})
    other = Roof("dram stream-copy-twin", "memory", 90e9, "measured", level="dram",
                 evidence={"sets_roof": False})
    old = Roof("dram stream-add", "memory", 30e9, "measured", level="dram")  # before the field
    assert RoofSet("cpu", [setter, other, old]).memory("dram") is setter
    assert RoofSet("cpu", [other, old]).memory("dram") is old
    assert RoofSet("cpu", [other]).memory("dram") is None


# ----------------------------------------------------------------------------- sizing


def test_stream_elements_at_least_4x_llc_when_memory_allows() -> None:
    llc = 32 * MiB
    n = cs.stream_elements(llc, mem_budget=4 << 30)
    assert 8 * n >= 4 * llc
    assert n % 1024 == 0
    assert 8 * cs.stream_elements(llc, 4 << 30, factor=8) >= 8 * llc


def test_stream_elements_capped_by_budget() -> None:
    llc = 32 * MiB
    budget = 96 * MiB  # three arrays of 4 x 32 MiB would need 384 MiB
    n = cs.stream_elements(llc, budget)
    assert 3 * 8 * n <= budget
    assert n == budget // 24 // 1024 * 1024
    assert cs.stream_elements(llc, 1) == 1024  # never below one block


def test_stream_elements_rejects_nonsense() -> None:
    with pytest.raises(ValueError):
        cs.stream_elements(0, 1 << 30)
    with pytest.raises(ValueError):
        cs.stream_elements(32 * MiB, -1)


@pytest.mark.parametrize("text,size", [("32768K", 32 * MiB), ("1024KiB", MiB), ("2M", 2 * MiB),
                                       ("4096", 4096)])
def test_cache_size_parsing(text: str, size: int) -> None:
    assert parse_size(text) == size


def test_machine_facts_are_positive() -> None:
    assert llc.last_level_cache_bytes() > 0
    assert hm.available_memory_bytes() > 0
    assert 0 < cs.default_stream_budget() <= 2 << 30


def test_the_memory_budget_honours_ulimit_v(monkeypatch) -> None:
    """RLIMIT_AS (`ulimit -v`) caps what is free: the soft limit less what is mapped now."""
    import resource

    meminfo = "MemTotal: 100000000 kB\nMemAvailable: 50000000 kB\n"
    status = "VmSize:  1000000 kB\n"
    monkeypatch.setattr(resource, "getrlimit", lambda which: (3 << 30, resource.RLIM_INFINITY))
    monkeypatch.setattr(hm, "address_space_left",
                        lambda status_text=status, f=hm.address_space_left: f(status_text))
    assert hm.available_memory_bytes(meminfo) == (3 << 30) - 1000000 * 1024
    monkeypatch.setattr(resource, "getrlimit", lambda which: (resource.RLIM_INFINITY,) * 2)
    assert hm.available_memory_bytes(meminfo) == 50000000 * 1024


# ----------------------------------------------------------------------------- FMA


def test_fma_flop_count_formula() -> None:
    # 2 FLOPs per FMA per lane: threads x row elements x steps x iterations FMAs.
    assert fma.fma_flops(threads=2, row=96, steps=8, iters=10) == 2 * 2 * 96 * 8 * 10
    assert fma.fma_flops(1, 1, 1, 1) == 2


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_fma_kernel_computes_the_chains(dtype) -> None:
    lanes, accumulators, steps, iters = 4, 4, 8, 5
    row = lanes * accumulators
    kernel = cpu_fma.fma_kernel(lanes, accumulators, steps)
    x = np.random.default_rng(0).uniform(0.5, 1.5, size=(2, 32)).astype(dtype)
    a, b = dtype(0.75), dtype(0.125)
    ref = x.astype(np.float64)
    for _ in range(steps * iters):
        ref[:, :row] = ref[:, :row] * 0.75 + 0.125
    kernel(x, a, b, iters)
    rtol = 1e-12 if dtype == np.float64 else 1e-5
    np.testing.assert_allclose(x[:, :row], ref[:, :row], rtol=rtol)
    np.testing.assert_array_equal(x[:, row:], ref[:, row:])  # padding untouched


@pytest.mark.parametrize("precision", ["fp64", "fp32"])
def test_fma_probe_gives_finite_positive_flops(precision: str) -> None:
    probe = fma.FmaProbe(precision, target_s=0.002)
    assert probe.flops == fma.fma_flops(probe.threads, probe.row, fma.STEPS, probe.iters)
    assert probe.row == probe.accumulators * probe.lanes
    roof = probe.roof(run_three_times(probe))
    assert (roof.kind, roof.precision, roof.source) == ("compute", precision, "measured")
    assert math.isfinite(roof.value) and roof.value > 0
    ev = roof.evidence
    assert ev["probe"] == "fma-peak" and ev["flops_per_run"] == probe.flops
    model = ev["model"]
    assert ev["accumulators"] == model["accumulators"] >= model["needed_chains"]
    bits = ev["vector_bits"]
    assert bits == model["vector_bits"] == feat.widest_vector_bits(
        feat.parse_features(feat.host_cpu_features()))  # this machine's widest, in this process
    assert probe.lanes == bits // (8 * probe.dtype.itemsize)
    assert str(bits) in roof.name
    loop = ev["asm"]["hot_loop"]  # the loop that ran: every chain a register, nothing spilled
    assert loop["fma_chains"] == probe.accumulators and loop["stack_operands"] == 0


def test_fma_asm_facts_counts_widths() -> None:
    asm = ("\tvfmadd213pd\t%zmm1, %zmm0, %zmm13\n\tvfmadd231ps\t%ymm2, %ymm3, %ymm4\n"
           "\tvfmadd213pd\t%zmm1, %zmm0, %zmm12\n\tvmovupd\t%zmm1, (%rax)\n")
    facts = x86_asm.fma_asm_facts(asm)
    assert facts["fma_instructions"] == {"xmm": 0, "ymm": 1, "zmm": 2, "scalar": 0}
    assert facts["vector_bits"] == 512
    assert x86_asm.fma_asm_facts("\taddsd\t%xmm0, %xmm1\n")["vector_bits"] is None
    # Scalar FMAs name xmm registers but are one lane: not 128-bit vectors (the old FP64
    # probe on AVX2 was 48 of these, reported as 128-bit).
    scalar = x86_asm.fma_asm_facts("\tvfmadd213sd\t%xmm1, %xmm0, %xmm7\n")
    assert scalar["vector_bits"] is None and scalar["fma_instructions"]["scalar"] == 1


def test_fma_probe_rejects_unknown_precision() -> None:
    with pytest.raises(ValueError):
        fma.FmaProbe("fp16")


# ----------------------------------------------------------------------------- all roofs


def test_measure_cpu_roofs_well_formed(monkeypatch) -> None:
    # Small LLC and GEMM so the whole pipeline runs in seconds; the shapes are what is tested.
    monkeypatch.setattr(cp, "last_level_cache_bytes", lambda: 1 * MiB)
    monkeypatch.setattr(fma.FmaProbe, "_calibrate", lambda self, target_s: 200)
    real_gemm = cp.blas_gemm_roof
    monkeypatch.setattr(cp, "blas_gemm_roof", lambda prec, n, tf: real_gemm(prec, 128, tf))
    seen: list[str] = []
    # The cache sweep has its own tests (tests/roofs/test_cpu_cache_sweep.py): left out here.
    roofs = cp.measure_cpu_roofs(run_three_times, quick=True, progress=seen.append,
                                 cache_roofs=lambda quick, progress: [])
    names = [r.name for r in roofs]
    assert names[:5] == [f"dram stream-{k}" for k in cs.STREAM_KERNELS]
    nt = next(r for r in roofs if r.name == "dram stream-add-nt")
    assert "non-temporal" in nt.evidence["implementation"] and nt.value > 0
    assert any(n.startswith("fp64 FMA peak") for n in names)
    assert any(n.startswith("fp32 FMA peak") for n in names)
    assert "fp64 BLAS dgemm" in names and "fp32 BLAS sgemm" in names
    for r in roofs:
        assert isinstance(r, Roof) and r.source == "measured"
        assert math.isfinite(r.value) and r.value > 0
        assert r.evidence["probe"] and "timing" in r.evidence
        json.dumps(r.to_dict())
    mem = [r for r in roofs if r.kind == "memory"]
    assert all(r.level == "dram" and 8 * r.evidence["array_elements"] >= 4 * MiB for r in mem)
    blas = [r for r in roofs if r.evidence["probe"] == "blas-gemm"]
    assert {r.precision for r in blas} == {"fp64", "fp32"}
    assert all(r.evidence["flops_per_run"] == 2 * 128 ** 3 for r in blas)
    # One progress line per probe run: STREAM, each FMA repeat of both precisions, 2 BLAS.
    assert len(seen) == len(cs.STREAM_KERNELS) + 2 * cp.FMA_REPEATS[True] + 2
    fmas = [r for r in roofs if r.evidence["probe"] == "fma-peak"]
    assert [len(r.evidence["repeats"]) for r in fmas] == [cp.FMA_REPEATS[True]] * 2
    rs = RoofSet("cpu", roofs)
    assert rs.memory("dram").value == max(r.value for r in mem)
    assert rs.compute("fp64").value == max(r.value for r in roofs if r.precision == "fp64")
    assert not [r for r in roofs if r.source == "datasheet"]  # never invented for a CPU


def test_cpu_probes_do_not_import_bench() -> None:
    import ast

    tree = ast.parse(Path(cp.__file__).read_text())
    mods = [n.module or "" for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)]
    mods += [a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names]
    # roofs/ never knows bench/
    assert not [m for m in mods if m.startswith(("roofbench.bench", "bench"))], mods


# ----------------------------------------------------------------------------- C references


needs_gcc = pytest.mark.skipif(cr.find_cc() is None,
                               reason="no C compiler (gcc or $CC) to build scripts/c_ref")


@needs_gcc
def test_c_triad_compiles_and_reports(tmp_path) -> None:
    exe, cmd = cr.compile_program("triad", tmp_path)
    assert "-fopenmp" in cmd and "-O3" in cmd
    d = cr.run_program(exe, ["100003", "3"], threads=2)
    assert d["program"] == "triad" and d["valid"] is True
    assert d["n"] == 100003 and d["bytes_per_rep"] == 24 * 100003
    assert len(d["seconds"]) == 3 and d["best_gbs"] >= d["median_gbs"] > 0


@needs_gcc
def test_c_fma_peak_compiles_and_reports(tmp_path) -> None:
    exe, _ = cr.compile_program("fma_peak", tmp_path)
    d = cr.run_program(exe, ["20000", "2"], threads=2)
    assert d["vector_bits"] in (256, 512) and d["accumulators"] >= 8
    for prec, lanes in (("fp64", d["vector_bits"] // 64), ("fp32", d["vector_bits"] // 32)):
        assert d[prec]["flops_per_run"] == 2 * lanes * d["accumulators"] * 20000 * d["threads"]
        assert d[prec]["best_gflops"] >= d[prec]["median_gflops"] > 0


@needs_gcc
def test_c_programs_reject_bad_arguments(tmp_path) -> None:
    exe, _ = cr.compile_program("triad", tmp_path)
    with pytest.raises(cr.ReferenceError, match="exit 2"):
        cr.run_program(exe, ["0"], threads=1)


def test_missing_compiler_is_one_line_error(monkeypatch, tmp_path) -> None:
    monkeypatch.setenv("CC", str(tmp_path / "no-such-cc"))
    with pytest.raises(cr.ReferenceError):
        cr.compile_program("triad", tmp_path)
    monkeypatch.delenv("CC")
    monkeypatch.setattr(shutil, "which", lambda name: None)
    with pytest.raises(cr.ReferenceError, match="no C compiler"):
        cr.compile_program("triad", tmp_path)


def test_reference_table_verdicts() -> None:
    row = cr.Row("triad", "GB/s", numba_best=[19.0, 20.0, 21.0], numba_median=[18.0] * 3,
                 c_best=[20.0, 20.0, 20.0], c_median=[19.0] * 3)
    assert row.ratio == pytest.approx(1.0) and row.passed is True
    low = cr.Row("fp64 FMA", "GFLOP/s", numba_best=[80.0], numba_median=[80.0],
                 c_best=[100.0], c_median=[100.0])
    assert low.passed is False
    info = cr.Row("fp32 FMA", "GFLOP/s", numba_best=[1.0], numba_median=[1.0], c_best=[1.0],
                  c_median=[1.0])
    assert info.passed is None
    result = {"rows": [r.to_dict() for r in (row, low, info)], "estimator": "e", "rounds": 1,
              "reps_per_round": 1, "threads": 2, "triad_array_bytes": 128 * MiB,
              "numba": {"fp64_fma": {"vector_bits": 512}}, "c": {"fma_vector_bits": 512}}
    table = cr.format_table(result)
    assert "pass" in table and "FAIL" in table and "info" in table


def test_reference_cli_rejects_bad_rounds(capsys) -> None:
    assert cr.main(["--rounds", "0"]) == 2
    assert "error:" in capsys.readouterr().err


def test_reference_script_starts_as_make_cpu_ref_starts_it() -> None:
    """`make cpu-ref` runs the script by path; on a CPU that needs the widest-vector
    environment (AVX-512 Intel) it re-executes itself first. Either way it reaches main."""
    import os
    import subprocess

    env = {k: v for k, v in os.environ.items() if k != "NUMBA_CPU_FEATURES"}
    p = subprocess.run([sys.executable, str(ROOT / "scripts" / "cpu_reference.py"),
                        "--rounds", "0"], capture_output=True, text=True, env=env,
                       timeout=patience(300))
    assert p.returncode == 2, p.stderr
    assert "--rounds and --reps must be at least 1" in p.stderr
    assert "Traceback" not in p.stderr


# ----------------------------------------------------------------------------- widest vectors


def _roof(name: str, prec: str, probe: str, gflops: float) -> Roof:
    return Roof(name=name, kind="compute", precision=prec, value=gflops * 1e9,
                source="measured", evidence={"probe": probe})


def test_compute_roof_below_blas_is_noted_and_blas_is_used() -> None:
    roofs = [_roof("fp64 FMA peak (256-bit)", "fp64", "fma-peak", 36.2),
             _roof("fp64 BLAS dgemm", "fp64", "blas-gemm", 150.0),
             _roof("fp32 FMA peak (512-bit)", "fp32", "fma-peak", 300.0),
             _roof("fp32 BLAS sgemm", "fp32", "blas-gemm", 297.0)]
    notes = cp.compute_roof_notes(roofs)
    assert len(notes) == 1  # fp32's probe is above its BLAS: nothing to say
    assert notes[0].startswith("fp64:") and "fp64 BLAS dgemm" in notes[0]
    assert "36.2" in notes[0] and "150.0" in notes[0]
    rs = RoofSet("cpu", roofs)
    assert rs.compute("fp64").name == "fp64 BLAS dgemm"  # the roof used is the higher one
    assert rs.compute("fp32").name.startswith("fp32 FMA peak")
    assert cp.compute_roof_notes(roofs[2:]) == []


def test_best_of_repeats_keeps_the_highest_and_flags_disagreement() -> None:
    # Three consecutive FP32 runs once seen on a Zen 3 VM: 192.6, 183.8, 98.1 GFLOP/s.
    reps = [_roof("fp32 FMA peak (256-bit)", "fp32", "fma-peak", g) for g in (192.6, 183.8, 98.1)]
    roof = fma.best_of_repeats(reps)
    assert roof.value == pytest.approx(192.6e9) and roof.name == "fp32 FMA peak (256-bit)"
    ev = roof.evidence
    assert [r["flop_per_s"] for r in ev["repeats"]] == [r.value for r in reps]
    assert ev["repeat_spread"] == pytest.approx(192.6 / 98.1 - 1)
    assert len(ev["flags"]) == 1 and "disagree by 96% (> 10%)" in ev["flags"][0]
    assert "192.6, 183.8, 98.1 GFLOP/s" in ev["flags"][0]
    (note,) = fma.repeat_notes([roof])
    assert note.startswith("fp32 FMA peak (256-bit): repeats disagree")
    close = fma.best_of_repeats([_roof("x", "fp64", "fma-peak", g) for g in (100.0, 91.0)])
    assert close.value == pytest.approx(100e9) and close.evidence["flags"] == []
    assert fma.repeat_notes([close]) == []
    with pytest.raises(ValueError):
        fma.best_of_repeats([])


def test_fma_probe_in_its_own_process_uses_the_widest_vectors() -> None:
    from roofbench.roofs.probes.cpu_fma_child import isolated_fma_roof

    roof = isolated_fma_roof("fp64", quick=True)
    widest = feat.widest_vector_bits(feat.parse_features(feat.host_cpu_features()))
    assert roof.kind == "compute" and roof.precision == "fp64" and roof.value > 0
    assert roof.evidence["vector_bits"] == widest  # 512 on AVX-512 CPUs, Intel included
    assert roof.evidence["process"].startswith("own process")
    assert roof.evidence["child_environment"] == feat.widest_vector_env()
    load = roof.evidence["machine_load"]  # what else ran meanwhile, the child's own time apart
    assert 0 <= load["other_busy"] <= 1 and 0 <= load["steal"] <= 1 and load["cause"]


def test_fma_child_failure_is_one_line(monkeypatch) -> None:
    from roofbench.roofs.probes import cpu_fma_child as cpu_fma_probe

    monkeypatch.setattr(cpu_fma_probe.sys, "executable", "/nonexistent/python")
    with pytest.raises(RuntimeError, match="FMA probe child"):
        cpu_fma_probe.isolated_fma_roof("fp32", quick=True)
