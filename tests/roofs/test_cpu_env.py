"""A CPU probe's cores and threads are its own: the caller's environment never reaches them.

Each setting users routinely carry (taskset, OpenMP / MKL / OpenBLAS / Numba thread
variables, OpenMP binding and places) runs a fresh Python under it that starts a probe child
(``probe_setup``: set up exactly as a probe, measure nothing) and reads back what the child
recorded: its affinity, its thread counts and the caller's variables it left out.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys

import pytest
from roofbench.roofs.probes import cpu_env
from roofbench.roofs.probes.cpu_roofs_child import name_for_cores

from roofbench.paths import child_env
from roofbench.roof_context import ProbeEnvironment
from roofbench.roof_records import Roof

MACHINE = cpu_env.machine_cores()
ALL = sorted(set(MACHINE) & set(os.sched_getaffinity(0)))
# What the probe calls the cores of a caller with no --cores: the machine's, or, where this
# test process itself runs restricted (`taskset -c 0 make test`), the affinity it was given.
CALLERS = "machine" if set(ALL) >= set(MACHINE) else "affinity"

SETUP = """
import json, sys
{before}
from roofbench.roofs.probes.cpu_roofs_child import probe_setup
print(json.dumps(probe_setup().to_dict()))
"""


def run_setup(variables: dict[str, str], prefix: list[str] | None = None,
              before: str = "") -> ProbeEnvironment:
    env = {k: v for k, v in child_env().items() if k not in cpu_env.THREAD_VARIABLES}
    env.update(variables)
    r = subprocess.run([*(prefix or []), sys.executable, "-c", SETUP.format(before=before)],
                       capture_output=True, text=True, env=env, timeout=180)
    assert r.returncode == 0, r.stderr[-2000:]
    d = json.loads(r.stdout.strip().splitlines()[-1])
    return ProbeEnvironment(**d)


def assert_probe_on(pe: ProbeEnvironment, cores: list[int]) -> None:
    assert pe.cores == cores
    assert pe.threads["numba"] == len(cores) and pe.threads["numba_pool"] == len(cores)
    assert pe.threads["blas"] in (None, len(cores))  # None: no BLAS pool could be asked
    assert pe.fingerprint["cores"] == cpu_env.cpu_list(cores)


OMP_PIN = """
import numpy as np
from numba import njit, prange
@njit(parallel=True)
def f(a):
    for i in prange(a.shape[0]):
        a[i] += 1
f(np.zeros(1000))  # the OpenMP runtime starts here and pins this process's main thread
"""


@pytest.mark.parametrize("variables,before", [
    ({"OMP_NUM_THREADS": "1"}, ""),
    ({"MKL_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1", "NUMBA_NUM_THREADS": "1"}, ""),
    ({"OMP_PROC_BIND": "close", "OMP_PLACES": "cores"}, ""),
    ({"OMP_PROC_BIND": "close", "OMP_PLACES": "cores", "OMP_NUM_THREADS": "1"}, OMP_PIN),
    ({"GOMP_CPU_AFFINITY": str(ALL[0]), "KMP_AFFINITY": "compact"}, OMP_PIN),
], ids=["omp-threads", "blas-numba-threads", "omp-bind-places", "omp-bound-caller",
        "gomp-affinity"])
def test_the_callers_thread_and_binding_variables_never_reach_the_probe(variables, before):
    pe = run_setup(variables, before=before)
    assert_probe_on(pe, ALL)
    assert pe.cores_from == CALLERS and pe.restricted == (CALLERS != "machine")
    assert pe.variables == variables  # recorded as found, and left out of the probe


@pytest.mark.skipif(shutil.which("taskset") is None or len(ALL) < 2,
                    reason="needs taskset and two cores")
def test_taskset_gives_roofs_for_those_cores_named_as_such():
    pe = run_setup({"OMP_NUM_THREADS": "4"}, prefix=["taskset", "-c", str(ALL[-1])])
    assert_probe_on(pe, [ALL[-1]])
    assert pe.cores_from == "affinity" and pe.restricted
    roofs = [Roof("dram stream-add", "memory", 1e9, "measured", level="dram")]
    notes = name_for_cores(roofs, pe)
    assert roofs[0].name == f"dram stream-add (cores {ALL[-1]})"
    assert len(notes) == 1 and "taskset" in notes[0] and "OMP_NUM_THREADS=4" in notes[0]


@pytest.mark.skipif(len(ALL) < 2, reason="needs two cores")
def test_cores_option_restricts_the_probe_and_refuses_cores_not_allowed():
    before = f"from roofbench.roofs.probes import cpu_env; cpu_env.choose_cores([{ALL[0]}])"
    pe = run_setup({}, before=before)
    assert_probe_on(pe, [ALL[0]])
    assert pe.cores_from == "option"
    with pytest.raises(ValueError, match="not allowed here"):
        cpu_env.choose_cores([max(MACHINE) + 1000])


def test_unrestricted_roofs_keep_their_names():
    pe = ProbeEnvironment(cores=[0, 1], machine_cores=[0, 1])
    roofs = [Roof("dram stream-add", "memory", 1e9, "measured", level="dram")]
    assert name_for_cores(roofs, pe) == [] and roofs[0].name == "dram stream-add"


@pytest.mark.skipif(shutil.which("taskset") is None, reason="needs taskset")
def test_fma_child_runs_on_the_cores_and_threads_chosen_for_it():
    """A real (quick) FMA probe under taskset and OMP/NUMBA thread variables: its recorded
    affinity and thread count are the cores it was given, never the caller's setting."""
    code = ("import json; from roofbench.roofs.probes.cpu_fma_child import isolated_fma_roof; "
            "r = isolated_fma_roof('fp64', quick=True); "
            "print(json.dumps({'cores': r.evidence['cores'], 'threads': r.evidence['threads']}))")
    env = child_env(OMP_NUM_THREADS="2", NUMBA_NUM_THREADS="2", OMP_PROC_BIND="close")
    r = subprocess.run(["taskset", "-c", str(ALL[0]), sys.executable, "-c", code],
                       capture_output=True, text=True, env=env, timeout=300)
    assert r.returncode == 0, r.stderr[-2000:]
    got = json.loads(r.stdout.strip().splitlines()[-1])
    assert got == {"cores": str(ALL[0]), "threads": 1}


def test_probe_env_leaves_the_callers_variables_out_and_sets_one_thread_per_core():
    caller = {"PATH": "/bin", "OMP_NUM_THREADS": "1", "OMP_PROC_BIND": "close",
              "GOMP_CPU_AFFINITY": "0", "NUMBA_NUM_THREADS": "1", "NUMBA_CPU_NAME": "x"}
    env = cpu_env.probe_env([2, 3, 4], caller, NUMBA_CPU_FEATURES="+avx")
    assert env["PATH"] == "/bin" and env["NUMBA_CPU_NAME"] == "x"  # not a thread variable
    assert "OMP_PROC_BIND" not in env and "GOMP_CPU_AFFINITY" not in env
    assert all(env[k] == "3" for k in cpu_env.SET_PER_CORE)
    assert env[cpu_env.CORES_ENV] == "2-4" and env["NUMBA_CPU_FEATURES"] == "+avx"
    assert cpu_env.found_variables(caller) == {
        "OMP_NUM_THREADS": "1", "OMP_PROC_BIND": "close", "GOMP_CPU_AFFINITY": "0",
        "NUMBA_NUM_THREADS": "1"}


def test_cgroup_cpuset_reads_the_process_group_then_the_root(tmp_path):
    proc = tmp_path / "cgroup"
    proc.write_text("0::/job/step\n")
    (tmp_path / "job" / "step").mkdir(parents=True)
    (tmp_path / "cpuset.cpus.effective").write_text("0-63\n")
    assert cpu_env.cgroup_cpuset(tmp_path, proc) == list(range(64))  # the root's
    (tmp_path / "job" / "step" / "cpuset.cpus.effective").write_text("4-7,12\n")
    assert cpu_env.cgroup_cpuset(tmp_path, proc) == [4, 5, 6, 7, 12]  # its own group's
    v1 = tmp_path / "v1"
    (v1 / "cpuset" / "slurm").mkdir(parents=True)
    (v1 / "cpuset" / "slurm" / "cpuset.effective_cpus").write_text("2,3\n")
    proc.write_text("5:cpuset:/slurm\n")
    assert cpu_env.cgroup_cpuset(v1, proc) == [2, 3]
    assert cpu_env.cgroup_cpuset(tmp_path / "none", tmp_path / "nothing") is None
