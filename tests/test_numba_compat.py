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
                          text=True, timeout=120, env=env)


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
