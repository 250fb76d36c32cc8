"""scripts/compare_env_roofs.py: the shells it builds, its reading of a real roofs file, its
rows, and the C loop really taking the shell's thread count (the contrast the roof must not
show)."""

from __future__ import annotations

import json
import os
import shutil
import sys

import pytest
from testpaths import ROOT

sys.path.insert(0, str(ROOT / "scripts"))
import compare_env_roofs as ce  # noqa: E402

REAL_ROOFS = ROOT / "results" / "intel-r-xeon-r-processor" / "20261203T070026Z" / "results.json"


def test_a_shell_keeps_only_its_own_thread_variables():
    caller = {"PATH": "/bin", "OMP_NUM_THREADS": "7", "KMP_AFFINITY": "scatter",
              "MKL_NUM_THREADS": "3"}
    bind = next(s for s in ce.SETTINGS if "bind" in s.name)
    env = ce.shell_env(bind, caller)
    assert env == {"PATH": "/bin", "OMP_NUM_THREADS": "1", "OMP_PROC_BIND": "close",
                   "OMP_PLACES": "cores"}
    pinned = ce.pinned_env(bind, [0, 1, 2], caller)
    assert pinned["OMP_NUM_THREADS"] == "3" and pinned["OMP_PROC_BIND"] == "close"
    assert "KMP_AFFINITY" not in pinned and "MKL_NUM_THREADS" not in pinned
    # Every variable a setting sets is one the probes leave out: else the matrix would test
    # nothing.
    for s in ce.SETTINGS:
        assert set(s.variables) <= set(ce.cpu_env.THREAD_VARIABLES), s.name


def test_reads_the_roofs_of_a_real_run():
    doc = json.loads(REAL_ROOFS.read_text())["roofs"]
    got = ce.read_roofs(doc)
    assert got["cores"] == [0, 1] and got["threads"]["numba"] == 2
    assert {k for k in got if "fma-peak" in k or "blas-gemm" in k} == {
        "fp64 fma-peak", "fp32 fma-peak", "fp64 blas-gemm", "fp32 blas-gemm"}
    assert 240 < got["fp64 fma-peak"] < 250  # GFLOP/s: this run's 247 GFLOP/s roof


def _record(setting: str, roof64: float, c64: float, shell64: float) -> dict:
    rb = {"cores": [0, 1], "threads": {"numba": 2, "blas": 2}, "fp64 fma-peak": roof64,
          "fp32 fma-peak": 2 * roof64, "fp64 blas-gemm": 0.8 * roof64,
          "fp32 blas-gemm": 1.6 * roof64}
    return {"setting": setting, "roofbench": rb,
            "c_probe_cores": {"threads": 2, "fp64": c64, "fp32": 2 * c64},
            "c_shell": {"threads": 1, "fp64": shell64, "fp32": 2 * shell64}}


def test_a_row_is_the_median_of_the_rounds_ratios_and_judged_within_5_percent():
    rounds = [[_record("a", 100, 100, 50), _record("b", 50, 100, 50)],
              [_record("a", 96, 100, 50), _record("b", 52, 100, 50)],
              [_record("a", 120, 100, 50), _record("b", 100, 100, 50)]]
    a, b = ce.table(rounds)
    assert a["ratio fp64"] == pytest.approx(1.0) and a["within"]
    assert b["ratio fp64"] == pytest.approx(0.52) and not b["within"]
    assert a["c shell fp64"] == 50 and a["c_shell_threads"] == 1
    md = ce.markdown([a, b]).splitlines()
    assert len(md) == 4 and "**1.000**" in md[2] and "**0.520**" in md[3]


@pytest.mark.skipif(shutil.which("gcc") is None, reason="no gcc to build the C loop")
def test_the_c_loop_takes_the_shells_threads_and_the_pinned_run_every_core(tmp_path):
    exe, _ = ce.compile_program("fma_peak", tmp_path,
                                defines=(f"NACC={ce.fma.probe_shape().accumulators}",))
    one = next(s for s in ce.SETTINGS if s.name == "OMP_NUM_THREADS=1")
    cores = sorted(os.sched_getaffinity(0))
    shell = ce.run_c(exe, ce.shell_env(one), None, steps=1000, reps=1)
    pinned = ce.run_c(exe, ce.pinned_env(one, cores), cores, steps=1000, reps=1)
    assert shell["threads"] == 1
    assert pinned["threads"] == len(cores)
    assert shell["fp64"] > 0 and pinned["fp64"] > 0
