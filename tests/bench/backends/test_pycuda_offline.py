"""scripts/pycuda_offline.sh (PyCUDA for a GPU machine without network) without a GPU: it finds
the wheelhouse, the toolkit and libcuda, writes PyCUDA's configuration and the pip command, and
skips with one line when something is missing. The real build takes minutes: its run through
this script is recorded in the report, not repeated here."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest
from patience import patience
from testpaths import ROOT

SCRIPT = ROOT / "scripts" / "pycuda_offline.sh"


def _run(tmp: Path, **env: str) -> subprocess.CompletedProcess[str]:
    base = {k: v for k, v in os.environ.items() if k not in ("CUDA_HOME", "PYCUDA_LIBCUDA")}
    return subprocess.run(["bash", str(SCRIPT), str(tmp / "target")], capture_output=True,
                          text=True, timeout=patience(60),
                          env={**base, "PYTHON": sys.executable, **env})


@pytest.fixture
def toolkit(tmp_path: Path) -> Path:
    """A stand-in CUDA toolkit: bin/nvcc that reports a release, include/cuda.h."""
    root = tmp_path / "cuda"
    (root / "bin").mkdir(parents=True)
    (root / "include").mkdir()
    (root / "include" / "cuda.h").write_text("/* stand-in */\n")
    nvcc = root / "bin" / "nvcc"
    nvcc.write_text("#!/bin/sh\necho 'Cuda compilation tools, release 13.0, V13.0.88'\n")
    nvcc.chmod(0o755)
    return root


def test_empty_wheelhouse_is_one_skip_line(tmp_path):
    (tmp_path / "wh").mkdir()
    r = _run(tmp_path, WHEELHOUSE=str(tmp_path / "wh"))
    assert r.returncode == 3
    assert r.stdout.splitlines() == [
        f"pycuda-offline: skipped: no PyCUDA sdist or wheel in {tmp_path}/wh (run `make "
        "wheelhouse` on a machine with network, then bring that folder here)"]
    assert not (tmp_path / "target").exists()


def test_dry_run_builds_the_offline_pip_command(tmp_path, toolkit):
    if shutil.which("g++") is None:
        pytest.skip("no g++")
    if not Path(sysconfig.get_paths()["include"], "Python.h").is_file():
        pytest.skip("no Python.h for this interpreter")
    wh = tmp_path / "wh"
    wh.mkdir()
    (wh / "pycuda-2026.1.tar.gz").write_bytes(b"")
    libcuda = tmp_path / "libcuda.so.1"
    libcuda.write_bytes(b"")
    r = _run(tmp_path, WHEELHOUSE=str(wh), CUDA_HOME=str(toolkit), PYCUDA_LIBCUDA=str(libcuda),
             PYCUDA_OFFLINE_DRY_RUN="1", PARALLEL_CC_JOBS="3")
    assert r.returncode == 0, r.stdout + r.stderr
    lines = r.stdout.splitlines()
    assert lines[0] == (f"pycuda-offline: pycuda-2026.1.tar.gz against {toolkit} (release 13.0), "
                        f"libcuda {libcuda}, 3 compiler jobs, into {tmp_path}/target")
    cmd = lines[1].removeprefix("pycuda-offline: ").split()
    assert cmd[:3] == [sys.executable, "-m", "pip"]
    assert cmd[3:13] == ["install", "--no-index", "--find-links", str(wh), "--target",
                         f"{tmp_path}/target", "--upgrade", "--no-build-isolation", "--no-deps",
                         "--no-cache-dir"]
    assert cmd[13] == "pycuda"
    assert "numpy" not in cmd  # the interpreter's own numpy is built against, never replaced
    conf = r.stdout.split("aksetup defaults:\n")[1]
    assert f"CUDA_ROOT = '{toolkit}'" in conf
    assert "CUDA_ENABLE_CURAND = False" in conf
    assert "CUDADRV_LIB_DIR = ['/" in conf
    assert not (tmp_path / "target").exists()  # a dry run installs nothing


def test_missing_libcuda_is_one_skip_line(tmp_path, toolkit):
    if shutil.which("g++") is None or not Path(sysconfig.get_paths()["include"],
                                               "Python.h").is_file():
        pytest.skip("no C++ toolchain or Python.h: the script stops before libcuda")
    wh = tmp_path / "wh"
    wh.mkdir()
    (wh / "pycuda-2026.1.tar.gz").write_bytes(b"")
    r = _run(tmp_path, WHEELHOUSE=str(wh), CUDA_HOME=str(toolkit),
             PYCUDA_LIBCUDA=str(tmp_path / "absent" / "libcuda.so"))
    assert r.returncode == 3
    assert r.stdout.splitlines() == [
        "pycuda-offline: skipped: no libcuda.so to link against (the NVIDIA driver's library, "
        "or the toolkit's lib64/stubs); set PYCUDA_LIBCUDA"]


def test_parallel_compile_keeps_setuptools_objects_in_order(tmp_path):
    """scripts/parallel_cc: setuptools' compile, one source per thread, same objects."""
    if shutil.which("gcc") is None:
        pytest.skip("no gcc")
    srcs = []
    for i in range(5):
        p = tmp_path / f"s{i}.c"
        p.write_text(f"int f{i}(void) {{ return {i}; }}\n")
        srcs.append(str(p))
    code = ("import sys\n"
            "from setuptools._distutils import ccompiler\n"
            "cc = ccompiler.new_compiler()\n"
            "print(ccompiler.CCompiler.compile.__module__)\n"
            f"objs = cc.compile({srcs!r}, output_dir={str(tmp_path / 'o')!r})\n"
            "print('\\n'.join(objs))\n")
    env = {**os.environ, "PARALLEL_CC_JOBS": "3",
           "PYTHONPATH": str(ROOT / "scripts" / "parallel_cc")}
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                       timeout=patience(120), env=env, cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    out = r.stdout.splitlines()
    assert out[0] == "sitecustomize"  # the parallel compile is the one in use
    objs = out[1:]
    assert [Path(o).stem for o in objs] == [f"s{i}" for i in range(5)]
    assert all((tmp_path / o).is_file() for o in objs)  # relative to cwd, or absolute
