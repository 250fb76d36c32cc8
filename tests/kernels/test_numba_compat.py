"""numba-cuda 0.30.4 with numpy 2.5 (the H200 image): numpy.row_stack is gone, and every Numba
CUDA compile failed with an AttributeError. numpy here still has the alias, so each case runs in
its own process and deletes it first, which is what numpy 2.5 looks like to numba-cuda."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
import textwrap

import numpy
import pytest
from patience import patience

pytestmark = pytest.mark.skipif(importlib.util.find_spec("numba_cuda") is None,
                                reason="numba-cuda is not installed (the cudatools extra)")

# A grid-stride kernel compiled to PTX for sm_90 (H100/H200): no GPU needed, only NVVM.
COMPILE = """
from numba import cuda, float32

def scale(a):
    for i in range(cuda.grid(1), a.size, cuda.gridsize(1)):
        a[i] = a[i] * 2.0

ptx, _ = cuda.compile_ptx(scale, (float32[:],), cc=(9, 0))
print(next(ln for ln in ptx.splitlines() if ln.startswith(".target")))
"""

# numpy as 2.5 has it (a no-op where numpy is 2.5 already).
DROP = "import numpy\nif hasattr(numpy, 'row_stack'):\n    del numpy.row_stack\n"
ROW_STACK_ERROR = "AttributeError: module 'numpy' has no attribute 'row_stack'"


def _run(code: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != "NUMBA_ENABLE_CUDASIM"}
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True,
                          text=True, timeout=patience(120), env=env)


def test_without_the_fix_numba_cuda_fails_as_on_numpy_2_5():
    """The bug reproduces here: with row_stack deleted, compile_ptx raises the H200 error."""
    r = _run(DROP + COMPILE)
    assert r.returncode != 0
    assert ROW_STACK_ERROR in r.stderr
    assert "arrayobj.py" in r.stderr  # raised while numba-cuda's registries load


def test_with_the_fix_compile_ptx_succeeds():
    r = _run(DROP + "import roofbench.kernels.numba_compat\n"
             "assert numpy.row_stack is numpy.vstack\n" + COMPILE)
    if r.returncode != 0 and "NvvmSupportError" in r.stderr:
        pytest.skip(f"NVVM not found: {r.stderr.strip().splitlines()[-1]}")
    assert r.returncode == 0, r.stderr[-2000:]
    assert r.stdout.strip() == ".target sm_90"


@pytest.mark.parametrize("module", ["roofbench.kernels.numba_cuda_twins",
                                    "roofbench.bench.backends.numba_cuda",
                                    "roofbench.roofs.probes.numba_stream"])
def test_every_numba_cuda_importer_applies_the_fix(module):
    """Each module that imports numba.cuda restores the alias on import, before any compile."""
    r = _run(DROP + f"import {module}\n"
             "print(numpy.row_stack is numpy.vstack)")
    assert r.returncode == 0, r.stderr[-2000:]
    assert r.stdout.strip() == "True"


def test_noop_where_numpy_has_row_stack():
    from roofbench.kernels import numba_compat

    before = numpy.row_stack
    assert numba_compat.restore_row_stack() is False
    assert numpy.row_stack is before


# The H200 image: no nvidia-nvvm wheel and the toolkit's nvvm/lib64 off the library path, so
# cuda-pathfinder finds no libNVVM, while NVRTC comes from the nvidia-cuda-nvrtc wheel (found
# via site-packages), from which numba-cuda 0.30 will not infer the toolkit. This loader
# stands in for pathfinder there: it finds libNVVM only through a CUDA_HOME that has nvvm/.
H200_IMAGE = """
import os
from cuda import pathfinder
real = pathfinder.load_nvidia_dynamic_lib
def image(name):
    lib = real(name)
    if name == "nvvm":
        home = os.environ.get("CUDA_HOME")
        if not home or not os.path.isdir(os.path.join(home, "nvvm")):
            raise pathfinder.DynamicLibNotFoundError("Failure finding libnvvm.so")
        lib.found_via = "CUDA_HOME"
    elif name == "nvrtc":
        lib.found_via = "site-packages"
    return lib
pathfinder.load_nvidia_dynamic_lib = image
"""


def _toolkit(tmp_path):
    """A toolkit folder as /usr/local/cuda has it: bin/nvcc on PATH and nvvm/."""
    root = tmp_path / "cuda"
    (root / "bin").mkdir(parents=True)
    (root / "nvvm" / "lib64").mkdir(parents=True)
    nvcc = root / "bin" / "nvcc"
    nvcc.write_text("#!/bin/sh\nexit 0\n")
    nvcc.chmod(0o755)
    env = {k: v for k, v in os.environ.items()
           if k not in ("NUMBA_ENABLE_CUDASIM", "CUDA_HOME", "CUDA_PATH")}
    env["PATH"] = os.pathsep.join([str(root / "bin"), "/usr/bin", "/bin"])
    return root, env


def _run_env(code: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True,
                          text=True, timeout=patience(120), env=env)


def test_nvvm_lookup_fails_on_the_h200_image_without_the_fix(tmp_path):
    _, env = _toolkit(tmp_path)
    r = _run_env(H200_IMAGE + COMPILE, env)
    assert r.returncode != 0
    # numba-cuda's own lookup ("nvrtc found via site-packages, cannot infer CUDA_HOME") or
    # cuda-bindings' NVVM loader, whichever asks pathfinder first: libNVVM is not found
    last = r.stderr.strip().splitlines()[-1]
    assert "DynamicLibNotFoundError" in last and "nvvm" in last.lower(), r.stderr[-2000:]


def test_nvvm_found_through_cuda_home_set_from_the_toolkit(tmp_path):
    root, env = _toolkit(tmp_path)
    r = _run_env(H200_IMAGE + "import os, roofbench.kernels.numba_compat\n"
                 f"assert os.environ['CUDA_HOME'] == {str(root)!r}\n" + COMPILE, env)
    assert r.returncode == 0, r.stderr[-2000:]
    assert r.stdout.strip() == ".target sm_90"


def test_cuda_home_already_set_is_left_alone(tmp_path, monkeypatch):
    from roofbench.kernels import numba_compat as nc

    root, env = _toolkit(tmp_path)
    monkeypatch.setenv("PATH", env["PATH"])
    monkeypatch.delenv("CUDA_PATH", raising=False)
    monkeypatch.setenv("CUDA_HOME", "/opt/elsewhere")
    assert nc.nvvm_home() is None
    monkeypatch.delenv("CUDA_HOME")
    assert nc.nvvm_home() == str(root)
    (root / "nvvm" / "lib64").rmdir()
    (root / "nvvm").rmdir()
    assert nc.nvvm_home() in (None, "/usr/local/cuda")  # no nvvm/ in that toolkit
