"""`make gpu-check` from a fresh clone on this machine (no GPU, nothing installed in the clone):
the first H200 run died in every step with ``No module named 'roofbench.bench'``. Here every
step that needs a GPU must fail for that reason, in a line, and never for an import; the steps
run in their order (the wgmma validation right after the facts), their limits fit the device
call, and what comes back fits the device tool (at most 8 files, 16 MiB each). The CUDA tools
(nvcc, ncu, compute-sanitizer) come from a stand-in CUDA install that is not on PATH: the
script must find them by their absolute paths. The core steps fit 300 s (a second run fits a
15-minute GPU slot); pytest steps write each outcome as they go and go on after a trap."""

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

GPU_STEPS = ("wgmma-tests", "sanitize", "gpu-tests", "calibrate", "make-bench", "triton",
             "triton-table", "gemm-8192", "bench-numba", "launch-overhead", "ncu")
CORE_STEPS = ("facts", "wgmma-tests", "sanitize", "gpu-tests", "calibrate", "make-bench")
ALL_STEPS = (*CORE_STEPS, "triton", "triton-table", "gemm-8192", "bench-numba",
             "pycuda-install", "bench-pycuda", "launch-overhead", "ncu")
CORE_TOTAL_S = 300  # a second run fits a 15-minute GPU slot with its start-up
SANITIZER_TOOLS = ("memcheck", "racecheck", "synccheck", "initcheck")
SCRIPT = ROOT / "scripts" / "gpu_check.sh"
DEVICE_CALL_S = 600  # the device tool's limit of one command
TOTAL_S = 240  # the check's total here (its extras included), before GPU_CHECK_TIME_SCALE
KEPT = {"gpu-check.tar.gz", "summary.txt", "gpu_check.log", "wgmma-tests.log",
        "make-bench.log", "bench-report.md", "sanitizer.txt"}
# What a machine without a usable NVIDIA GPU says, through CuPy, Numba or the driver.
GPU_REASON = re.compile(r"no GPU|no CUDA|CUDA device|CuPy is not importable|CUDA driver"
                        r"|cudaError|CUDA_ERROR|nvidia-smi"
                        r"|triton and torch are needed", re.IGNORECASE)

pytestmark = pytest.mark.slow


GPU_MARK = re.compile(r"\bpytest\.mark\.gpu\b")  # a decorator, pytestmark, marks=...


def gpu_test_files(root: Path) -> list[str]:
    """The files under ``root`` that hold gpu-marked tests (found by the marker), the wgmma
    file left to its own step: what the gpu-tests step runs of the suite. Given to it as
    GPU_CHECK_TESTS, the step collects these alone instead of the whole suite, whose other
    3,400 tests `-m gpu` deselects (collecting them was half this file's time: 103 s of a
    208 s fixture, loaded); its command, its plug-in, its skips and its verdict are the same."""
    return sorted(str(p.relative_to(root)) for p in (root / "tests").rglob("test_*.py")
                  if p.name != "test_wgmma.py" and GPU_MARK.search(p.read_text()))


def _gpu_here() -> bool:
    smi = shutil.which("nvidia-smi")
    return bool(smi) and subprocess.run([smi, "-L"], capture_output=True).returncode == 0


FAKE_SANITIZER = """#!/usr/bin/env bash
# compute-sanitizer stand-in: logs its argv, drops its options, runs the program.
echo "$*" >>"$FAKE_SANITIZER_LOG"
while [ $# -gt 0 ]; do
  case $1 in --tool|--print-limit|--error-exitcode) shift 2 ;; --*) shift ;; *) break ;; esac
done
"$@"
rc=$?
echo "========= ERROR SUMMARY: 0 errors"
exit $rc
"""


def fake_cuda_install(root: Path) -> Path:
    """A CUDA install as the GPU image lays it out (bin/nvcc, bin/ncu, compute-sanitizer/),
    with stand-ins; not on PATH."""
    (root / "bin").mkdir(parents=True)
    (root / "compute-sanitizer").mkdir()
    (root / "bin" / "nvcc").write_text("#!/bin/sh\necho 'Cuda compilation tools, release 13.0, "
                                       "V13.0.0 (stand-in)'\necho 'Build stand-in'\n")
    shutil.copyfile(ROOT / "tests" / "standins" / "fake_ncu", root / "bin" / "ncu")
    (root / "compute-sanitizer" / "compute-sanitizer").write_text(FAKE_SANITIZER)
    for f in (root / "bin" / "nvcc", root / "bin" / "ncu",
              root / "compute-sanitizer" / "compute-sanitizer"):
        f.chmod(0o755)
    return root


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
    cuda = fake_cuda_install(tmp / "cuda")
    scale = time_scale
    env.update(PYTHON=sys.executable, OUT=str(out), GPU_CHECK_TOTAL_S=str(TOTAL_S),
               GPU_CHECK_TIME_SCALE=str(scale), PYTHONPATH=str(hide), GPU_CHECK_EXTRAS="1",
               GPU_CHECK_CUDA_DIRS=str(cuda), FAKE_SANITIZER_LOG=str(tmp / "sanitizer-argv.log"),
               GPU_CHECK_TESTS=" ".join(gpu_test_files(clone)))
    env.pop("CUDA_HOME", None)
    env.pop("ROOFBENCH_NCU", None)
    r = subprocess.run(["make", "--no-print-directory", "gpu-check"], cwd=clone, env=env,
                       capture_output=True, text=True, timeout=(TOTAL_S + 180) * scale)
    # OUT is set, as on the device tool: only the archive and a few files stay; the rest is
    # read from the archive, as a reader of the device's output does.
    tree = tmp / "unpacked"
    tree.mkdir()
    if (out / "gpu-check.tar.gz").exists():
        with tarfile.open(out / "gpu-check.tar.gz") as tar:
            tar.extractall(tree, filter="data")
    return clone, out, tree, r


@pytest.fixture(scope="module")
def cuda_dir(run) -> Path:
    clone, out, tree, r = run
    return out.parent / "cuda"


def _summary(out: Path) -> dict[str, str]:
    lines = (out / "summary.txt").read_text().splitlines()
    return {ln.split()[0]: ln for ln in lines if ln.strip()}


def _limits() -> dict[str, int]:
    """Each step's limit in seconds, in the order the steps are declared: the one table of
    `L_NAME=SECONDS` values, and `step NAME "$L_NAME" ...`."""
    text = SCRIPT.read_text()
    values = {m[1]: int(m[2]) for m in re.finditer(r"\b(L_[A-Z0-9_]+)=(\d+)\b", text)}
    return {m[1]: values[m[2]]
            for m in re.finditer(r'^\s*step (\S+) "\$(L_[A-Z0-9_]+)" ', text, re.M)}


def test_order_and_budget_fit_one_device_call():
    limits = _limits()
    steps = [s for s in ALL_STEPS if s in limits]
    assert list(limits) == steps  # declared in the order they run
    assert steps[:3] == ["facts", "wgmma-tests", "sanitize"]  # the flagship, then the sanitizer
    assert limits["facts"] + limits["wgmma-tests"] <= 40  # validated within the first 40 s
    text = SCRIPT.read_text()
    assert re.search(r"echo \$\(\( 300 \+ EXTRAS_S \)\) \|\| echo 300\)", text)
    # the core steps within 300 s, with room for the script's own seconds between them
    assert sum(limits[s] for s in CORE_STEPS) <= CORE_TOTAL_S - 5
    assert CORE_TOTAL_S * 2 + 2 * 60 <= 15 * 60  # two runs and two start-ups in a 15-min slot
    extras = sum(v for s, v in limits.items() if s not in CORE_STEPS)
    assert extras <= DEVICE_CALL_S - 60  # the extras fit a call of their own
    # sized from the models with a fresh machine's caches (docs/gpu-check.md): the quick
    # calibration's 22.8 s (tests/roofs/test_gpu_probes_nogpu.py); make bench's 105 s
    # (tests/bench/suite/test_bench_time_model.py, NVRTC without a kernel cache) plus
    # matplotlib's font cache built on a fresh machine
    assert limits["calibrate"] >= 22.8 + 5
    assert limits["make-bench"] >= 105 + 10


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
    assert r.returncode != 0  # steps failed: the check says so


def test_what_comes_back_fits_the_device_tool(run):
    clone, out, tree, r = run
    files = [p for p in out.rglob("*") if p.is_file()]
    assert {p.name for p in files} <= KEPT | {"nvidia-h200.json"}
    assert "sanitizer.txt" in {p.name for p in files}
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
    # gpu-tests ran every file of gpu tests it was given: each one's tests skipped, for no GPU
    skips = (tree / "gpu-tests.log").read_text()
    files = gpu_test_files(clone)
    assert "tests/bench/backends/test_gpu.py" in files and len(files) >= 4
    for f in files:
        assert re.search(rf"^SKIPPED \[\d+\] {re.escape(f)}:.*no GPU", skips, re.M), f
    # The command-line steps end in roofbench's one-line error, not a traceback.
    for step in ("calibrate", "make-bench", "triton", "bench-numba"):
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


def test_triton_step_beside_make_bench_and_its_table_says_why_empty(run):
    """The Triton variants run after make-bench (whose CUDA C and library cases the table sets
    beside them); with no GPU the table step fails in one line naming the triton run's
    error."""
    clone, out, tree, r = run
    log = (out / "gpu_check.log").read_text()
    triton = re.search(r"^== triton \(limit \d+s, at \d+s\): (.*)$", log, re.M)[1]
    assert "-m roofbench.bench.cli run --backend triton" in triton
    assert f"--out {out}/triton" in triton
    table = re.search(r"^== triton-table \(limit \d+s, at \d+s\): (.*)$", log, re.M)[1]
    assert (f"{out}/triton {out}/bench --out {out}/triton-vs-cuda.md --log {out}/triton.log "
            f"--append {out}/gpu_check.log") in table
    said = (tree / "triton-table.log").read_text().splitlines()
    assert len(said) == 1 and said[0].startswith(
        f"gpu_check_triton: no Triton case recorded under {out}/triton; triton.log: "
        "roofbench: error: backend 'triton' is unavailable: ")
    assert "== Triton vs CUDA C vs library" not in log  # no table, none appended


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


def test_cuda_tools_found_by_absolute_path(run, cuda_dir):
    """nvcc, ncu and compute-sanitizer are not on PATH: found under the CUDA install, named
    by absolute path in the facts, and used (the ncu step runs instead of being skipped)."""
    clone, out, tree, r = run
    facts = (tree / "facts.log").read_text()
    assert f"nvcc: {cuda_dir}/bin/nvcc" in facts
    assert "release 13.0, V13.0.0 (stand-in)" in facts
    assert f"ncu: {cuda_dir}/bin/ncu" in facts
    assert f"compute-sanitizer: {cuda_dir}/compute-sanitizer/compute-sanitizer" in facts
    assert "skipped" not in _summary(out)["ncu"]


def test_sanitizer_runs_every_tool_and_its_reports_come_back(run, cuda_dir):
    clone, out, tree, r = run
    argv = (out.parent / "sanitizer-argv.log").read_text().splitlines()
    assert [t for t in SANITIZER_TOOLS if any(f"--tool {t} " in a for a in argv)] == list(
        SANITIZER_TOOLS)
    assert all(a.endswith("sanitize_kernels.py --progress " + str(
        out / f"sanitizer-{a.split()[1]}.progress")) for a in argv)
    report = (out / "sanitizer.txt").read_text()  # kept beside the archive
    assert report.count("ERROR SUMMARY") >= len(SANITIZER_TOOLS)
    assert "sanitize_kernels: no GPU backend:" in report  # this machine's reason, in a line
    for t in SANITIZER_TOOLS:
        assert (tree / f"sanitizer-{t}.txt").is_file()


def test_sanitize_cases_cover_every_hand_written_kernel():
    sys.path.insert(0, str(ROOT / "scripts"))
    import sanitize_kernels as sk
    from roofbench.kernels.cuda_impl import CudaLibrary
    from roofbench.kernels.registry import workloads

    hand = set()
    for name, w in workloads().items():
        for vname, v in w.variants.items():
            table = v.impls.get("cuda") or {}
            if any(not isinstance(e.resolve((9, 0)), CudaLibrary) for e in table.values()):
                hand.add((name, vname))
    assert hand and hand <= {(w, v) for w, v, _, _ in sk.CASES}
    assert ("gemm", "tensor") in hand  # the wgmma GEMM among them
    assert len(sk.case_names()) == len(set(sk.case_names()))


PLANTED = """
import time
from pathlib import Path

def test_a():
    pass

def test_b():
    raise RuntimeError("CUDA_ERROR_ILLEGAL_ADDRESS: an illegal memory access was encountered")

def test_c():
    pass

def test_d():
    assert False, "planted failure"

def test_hang():
    time.sleep(float(__import__("os").environ.get("HANG_S", "0")))
"""


def _plugin_env(tmp_path: Path) -> dict[str, str]:
    (tmp_path / "test_planted.py").write_text(PLANTED)
    (tmp_path / "pytest.ini").write_text("[pytest]\n")
    env = dict(os.environ, ROOT=str(ROOT), PYTHON=sys.executable,
               PYTHONPATH=os.pathsep.join(filter(None, [os.environ.get("PYTHONPATH")])))
    return env


def _functions() -> str:
    """The script's pytest_resumable and died_in, to run on their own."""
    text = SCRIPT.read_text()
    return "\n".join(re.search(rf"^{f}\(\) {{\n.*?^}}$", text, re.M | re.S)[0]
                     for f in ("pytest_resumable", "died_in"))


def test_pytest_step_goes_on_after_a_trap(tmp_path):
    """A test that ends in a sticky CUDA error costs that test: pytest stops (every later CUDA
    call would fail) and the script starts it again for the tests not yet run."""
    env = _plugin_env(tmp_path)
    log = tmp_path / "step.log"
    cmd = (_functions() + f'\ncd {tmp_path} && pytest_resumable {log} -q -p no:cacheprovider '
           '-p no:xdist test_planted.py')
    r = subprocess.run(["bash", "-c", cmd], env=env, capture_output=True, text=True,
                       timeout=300)
    assert r.returncode == 1, r.stdout[-2000:]
    lines = (tmp_path / "step.progress").read_text().splitlines()
    outcomes = [ln.split(" ", 1)[0] + " " + ln.split("::")[1].split(":")[0] for ln in lines
                if not ln.startswith("start ")]
    assert outcomes == ["passed test_a", "failed test_b", "passed test_c", "failed test_d",
                        "passed test_hang"]
    assert "the tests not yet run go on" in r.stdout
    assert "gpu-check: failed test_planted.py::test_d: AssertionError: planted failure" in r.stdout


def test_killed_pytest_step_still_says_what_failed(tmp_path):
    """The step's limit kills pytest before it prints or writes its report: the progress file
    has already said which test failed and which one it died in."""
    env = dict(_plugin_env(tmp_path), HANG_S="600",
               GPU_CHECK_PROGRESS=str(tmp_path / "p.progress"))
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT / "scripts"),
                                                      env["PYTHONPATH"]]))
    p = subprocess.Popen([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                          "-p", "no:xdist", "-p", "gpu_check_progress", "-k", "test_d or test_hang",
                          "test_planted.py"], cwd=tmp_path, env=env,
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    progress = tmp_path / "p.progress"
    try:
        for _ in range(3000):  # until the hanging test has started (a bound, not a race)
            if progress.is_file() and "start test_planted.py::test_hang" in progress.read_text():
                break
            if p.poll() is not None:
                break
            subprocess.run(["sleep", "0.1"])
    finally:
        p.kill()
        p.wait()
    text = progress.read_text()
    assert "failed test_planted.py::test_d: AssertionError: planted failure" in text
    died = subprocess.run(["bash", "-c", _functions() + f"\ndied_in {progress}"],
                          capture_output=True, text=True).stdout.split()
    assert died == ["test_planted.py::test_hang"]
