"""Runs tests/kernels/cudasim_cases.py in its own pytest process with NUMBA_ENABLE_CUDASIM=1: the
simulator is chosen when numba.cuda is first imported, so it cannot share this process."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from pathlib import Path

import pytest
from patience import patience
from testpaths import ROOT

HERE = Path(__file__).resolve().parent
pytestmark = [pytest.mark.cudasim,
              pytest.mark.skipif(importlib.util.find_spec("numba_cuda") is None,
                                 reason="numba-cuda is not installed")]


def _env() -> dict[str, str]:
    env = dict(os.environ, NUMBA_ENABLE_CUDASIM="1", PYTHONUNBUFFERED="1")
    env.pop("PYTEST_ADDOPTS", None)
    return env


@pytest.mark.slow
def test_twins_in_simulator():
    cmd = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
           "--import-mode=importlib", str(HERE / "cudasim_cases.py")]
    p = subprocess.run(cmd, capture_output=True, text=True, env=_env(), timeout=patience(900),
                       cwd=ROOT)
    assert p.returncode == 0, p.stdout[-6000:] + p.stderr[-3000:]


def test_sim_backend_refuses_in_a_process_with_real_numba_cuda():
    """Once numba.cuda was imported without the simulator, --backend sim says why in a line."""
    code = ("import numba.cuda\n"
            "from roofbench.bench.backends.base import unavailable_reason\n"
            "print(unavailable_reason('sim'))\n")
    env = dict(os.environ)
    env.pop("NUMBA_ENABLE_CUDASIM", None)
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env,
                       timeout=patience(120))
    assert p.returncode == 0, p.stderr
    assert "fresh process" in p.stdout


def test_cli_sim_run_end_to_end(tmp_path):
    """`roofbench run --backend sim` in a fresh process: a tiny vector_add validates."""
    cmd = [sys.executable, "-m", "roofbench.bench.cli", "run", "--backend", "sim",
           "--workload", "vector_add", "--variant", "scalar", "--dtype", "fp32", "--size", "257",
           "--quick", "--samples", "2", "--no-figures",  # validity, not a time or a figure
           "--out", str(tmp_path)]
    p = subprocess.run(cmd, capture_output=True, text=True, env=_env(), timeout=patience(600))
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-3000:]
