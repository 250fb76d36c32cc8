"""`make gpu-check` from a fresh clone on this machine (no GPU, nothing installed in the clone):
the first H200 run died in every step with ``No module named 'roofbench.bench'``. Here every
step that needs a GPU must fail for that reason, in a line, and never for an import; the steps
run in their order (the wgmma validation right after the facts), their limits fit the device
call, and what comes back fits the device tool (at most 8 files, 16 MiB each)."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest
from patience import patience, whole_scale
from testpaths import ROOT

GPU_STEPS = ("wgmma-tests", "calibrate", "make-bench", "gemm-8192", "gpu-tests",
             "bench-numba", "launch-overhead")
ALL_STEPS = ("facts", "wgmma-tests", "calibrate", "make-bench", "gemm-8192", "gpu-tests",
             "bench-numba", "pycuda-install", "bench-pycuda", "launch-overhead", "ncu")
SCRIPT = ROOT / "scripts" / "gpu_check.sh"
DEVICE_CALL_S = 600  # the device tool's limit of one command
TOTAL_S = 150  # the check's total here, before GPU_CHECK_TIME_SCALE
KEPT = {"gpu-check.tar.gz", "summary.txt", "gpu_check.log", "wgmma-tests.log",
        "make-bench.log", "bench-report.md"}
# What a machine without a usable NVIDIA GPU says, through CuPy, Numba or the driver.
GPU_REASON = re.compile(r"no GPU|no CUDA|CUDA device|CuPy is not importable|CUDA driver"
                        r"|cudaError|CUDA_ERROR|nvidia-smi", re.IGNORECASE)

pytestmark = pytest.mark.slow


def _gpu_here() -> bool:
    smi = shutil.which("nvidia-smi")
    return bool(smi) and subprocess.run([smi, "-L"], capture_output=True).returncode == 0


@pytest.fixture(scope="module")
def time_scale() -> int:
    """GPU_CHECK_TIME_SCALE for the run: the steps' limits are the device's; here they are hang
    guards, scaled by how loaded this machine is (twice the load per core, at least 2), never
    raced against (issue 28: the facts step hit its 15 s at load 20 on 2 cores)."""
    return whole_scale(headroom=2)


@pytest.fixture(scope="module")
def run(tmp_path_factory, time_scale):
    if _gpu_here():
        pytest.skip("a GPU is here: this test checks the no-GPU path of make gpu-check")
    for tool in ("git", "make", "timeout"):
        if shutil.which(tool) is None:
            pytest.skip(f"{tool} is not installed")
    tmp = tmp_path_factory.mktemp("gpu-check")
    clone, out, hide = tmp / "clone", tmp / "out", tmp / "no-install"
    subprocess.run(["git", "clone", "-q", str(ROOT), str(clone)], check=True,
                   timeout=patience(120))
    # This interpreter may hold an editable install of the main checkout, which would quietly
    # supply the modules the clone fails to find (it did hide the H200 bug): drop its finder in
    # every process, as on a GPU box where roofbench was never installed.
    hide.mkdir()
    (hide / "sitecustomize.py").write_text(
        "import sys\n"
        "sys.meta_path[:] = [f for f in sys.meta_path if not getattr(f, '__module__', '')"
        ".startswith('__editable__')]\n")
    env = {k: v for k, v in os.environ.items()
           if k not in ("NUMBA_ENABLE_CUDASIM", "WHEELHOUSE", "PYCUDA_TARGET")}
    scale = time_scale
    env.update(PYTHON=sys.executable, OUT=str(out), GPU_CHECK_TOTAL_S=str(TOTAL_S),
               GPU_CHECK_TIME_SCALE=str(scale), PYTHONPATH=str(hide))
    r = subprocess.run(["make", "--no-print-directory", "gpu-check"], cwd=clone, env=env,
                       capture_output=True, text=True, timeout=(TOTAL_S + 90) * scale)
    # OUT is set, as on the device tool: only the archive and a few files stay; the rest is
    # read from the archive, as a reader of the device's output does.
    tree = tmp / "unpacked"
    tree.mkdir()
    if (out / "gpu-check.tar.gz").exists():
        with tarfile.open(out / "gpu-check.tar.gz") as tar:
            tar.extractall(tree, filter="data")
    return clone, out, tree, r


def _summary(out: Path) -> dict[str, str]:
    lines = (out / "summary.txt").read_text().splitlines()
    return {ln.split()[0]: ln for ln in lines if ln.strip()}


def _limits() -> dict[str, int]:
    """Each step's limit in seconds as the script declares it (`step NAME SECONDS ...`)."""
    text = SCRIPT.read_text()
    return {m[1]: int(m[2]) for m in re.finditer(r"^\s*step (\S+) (\d+) ", text, re.M)}


def test_order_and_budget_fit_one_device_call():
    limits = _limits()
    steps = [s for s in ALL_STEPS if s in limits]
    assert list(limits) == steps  # declared in the order they run
    assert steps[:2] == ["facts", "wgmma-tests"]  # the flagship right after the facts
    assert limits["facts"] + limits["wgmma-tests"] <= 60  # validated within the first 60 s
    total = int(re.search(r"GPU_CHECK_TOTAL_S:-(\d+)", SCRIPT.read_text())[1])
    assert sum(limits.values()) <= total <= 8 * 60 < DEVICE_CALL_S - 60  # ~8 of the 10 min
    # sized from the models tested on the CPU (tests/roofs/test_gpu_probes_nogpu.py: the full
    # calibration under 45 s; tests/bench/measure/test_bench_time_model.py: make bench at most 120
    # s), with
    # the start-up and compile time those models leave out of their step
    assert limits["calibrate"] >= 45 + 10
    assert limits["make-bench"] >= 120


def test_time_scale_multiplies_every_limit(run, time_scale):
    clone, out, tree, r = run
    log = (out / "gpu_check.log").read_text()
    started = {m[0]: int(m[1]) for m in re.findall(r"^== (\S+) \(limit (\d+)s, ", log, re.M)}
    limits = _limits()
    assert started["facts"] == limits["facts"] * time_scale  # the first step: nothing spent
    for name, limit in started.items():  # later ones: scaled, or what is left of the total
        assert 0 < limit <= limits[name] * time_scale, name


def test_time_scale_must_be_a_whole_number(tmp_path):
    env = {**os.environ, "OUT": str(tmp_path), "GPU_CHECK_TIME_SCALE": "1.5"}
    p = subprocess.run(["bash", str(SCRIPT)], env=env, capture_output=True, text=True,
                       timeout=patience(60))
    assert p.returncode == 2
    assert p.stderr.strip() == "GPU_CHECK_TIME_SCALE=1.5: give a whole number >= 1"
    assert not (tmp_path / "facts.log").exists()  # no step ran


def test_every_step_ran_and_summary_and_archive_are_written(run):
    clone, out, tree, r = run
    summary = _summary(out)
    assert list(summary) == [*ALL_STEPS, "pack"], r.stdout[-3000:]
    assert not any("SKIPPED (time)" in ln for ln in summary.values())
    # Every line carries the step's duration in seconds.
    assert all(re.search(r"\s\d+s\s", ln) for ln in summary.values())
    names = {p.name for p in tree.rglob("*")}
    assert {"summary.txt", *(f"{s}.log" for s in ALL_STEPS
                             if s not in ("bench-pycuda", "ncu"))} <= names
    assert "skipped (no ncu on PATH)" in summary["ncu"]
    assert r.returncode != 0  # steps failed: the check says so


def test_what_comes_back_fits_the_device_tool(run):
    clone, out, tree, r = run
    files = [p for p in out.rglob("*") if p.is_file()]
    assert {p.name for p in files} <= KEPT | {"nvidia-h200.json"}
    assert {"gpu-check.tar.gz", "summary.txt", "gpu_check.log", "wgmma-tests.log"} <= {
        p.name for p in files}
    assert len(files) <= 8 and all(p.parent == out for p in files)  # no folder at all
    assert all(p.stat().st_size < 16 << 20 for p in files)
    assert all(re.fullmatch(r"[A-Za-z0-9._-]+", p.name) for p in files)
    assert re.search(r"^pack\s+\d+ KiB", (out / "summary.txt").read_text(), re.M)


def test_source_tree_of_the_clone_is_what_runs(run):
    clone, out, tree, r = run
    assert "facts" in _summary(out) and " ok " in _summary(out)["facts"]
    facts = (tree / "facts.log").read_text()
    assert f"roofbench: {clone.resolve()}/roofbench/__init__.py" in facts
    assert re.search(r"^numba-cuda nvvm: ", facts, re.M)  # what numba resolves, said


def test_gpu_steps_fail_for_a_gpu_reason_in_one_line(run):
    clone, out, tree, r = run
    summary = _summary(out)
    for step in GPU_STEPS:
        assert "FAILED" in summary[step], summary[step]
        log = (tree / f"{step}.log").read_text()
        reasons = [ln for ln in log.splitlines() if GPU_REASON.search(ln)]
        assert reasons, f"{step}: no GPU reason in\n{log[-2000:]}"
    # The command-line steps end in roofbench's one-line error, not a traceback.
    for step in ("calibrate", "make-bench", "bench-numba"):
        log = (tree / f"{step}.log").read_text()
        errors = [ln for ln in log.splitlines() if ln.startswith("roofbench: error:")]
        assert len(errors) == 1 and GPU_REASON.search(errors[0]), log[-2000:]


def test_no_step_fails_for_an_import_reason(run):
    clone, out, tree, r = run
    for log in sorted(tree.glob("*.log")):
        text = log.read_text()
        assert "Traceback" not in text, f"{log.name}:\n{text[-3000:]}"
        assert "No module named 'roofbench" not in text, log.name
    assert "Traceback" not in r.stdout + r.stderr


def test_pycuda_without_a_wheelhouse_is_skipped_with_a_line(run):
    clone, out, tree, r = run
    summary = _summary(out)
    assert "skipped" in summary["pycuda-install"] and "FAILED" not in summary["pycuda-install"]
    assert "skipped (no PyCUDA)" in summary["bench-pycuda"]
    log = (tree / "pycuda-install.log").read_text().strip().splitlines()
    assert log == [f"pycuda-offline: skipped: no PyCUDA sdist or wheel in {clone.resolve()}"
                   "/wheelhouse (run `make wheelhouse` on a machine with network, then bring "
                   "that folder here)"]
    assert not (clone / "build").exists()  # nothing installed, no folder made
