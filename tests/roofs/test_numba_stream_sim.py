"""Numba CUDA twins of the STREAM probes, run in the CUDA simulator against float64 references.

NUMBA_ENABLE_CUDASIM=1 must be set before numba.cuda is first imported, so the cases run in a
pytest process of their own: the outer test starts it; the inner cases exist only in that
process (defined under NUMBA_ENABLE_CUDASIM=1), so the main run lists no skips for them.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from patience import patience
from testpaths import ROOT

IN_SIM = os.environ.get("NUMBA_ENABLE_CUDASIM") == "1"


@pytest.mark.cudasim
@pytest.mark.skipif(IN_SIM, reason="this is the launcher; the cases run below")
def test_stream_twins_in_simulator_process():
    env = {**os.environ, "NUMBA_ENABLE_CUDASIM": "1"}
    p = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                        "--import-mode=importlib", str(Path(__file__)), "-k", "sim_case"],
                       capture_output=True, text=True, timeout=patience(300), env=env,
                       cwd=ROOT)
    assert p.returncode == 0, p.stdout[-4000:] + p.stderr[-2000:]
    assert " passed" in p.stdout and "skipped" not in p.stdout.split("\n")[-2], p.stdout[-2000:]


@pytest.mark.parametrize("n", [1, 37, 1000])  # odd sizes: a grid-stride tail must be right
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("name", ["copy", "scale", "add", "triad", "read", "fill"])
def _case(name, dtype, n):
    from numba import cuda
    from roofbench.roofs.probes import numba_stream as ns

    rng = np.random.default_rng(n)
    a, b, c = (rng.uniform(0.25, 0.75, n).astype(dtype) for _ in range(3))
    s = 0.5
    ref = ns.reference(name, a, b, c, s)
    d = {"a": cuda.to_device(a), "b": cuda.to_device(b), "c": cuda.to_device(c),
         "out": cuda.to_device(np.zeros(1, dtype))}
    for key in ref:  # poison what the kernel writes: an element it skips is caught
        if key != "out":
            d[key] = cuda.to_device(np.full(n, np.nan, dtype))
    ns.run(name, d, s, grid=3, block=8)  # few blocks: the simulator is slow, still strides
    tol = 1e-6 if dtype == np.float32 else 1e-12
    for key, want in ref.items():
        got = d[key].copy_to_host()
        if key == "out":
            assert got[0] == pytest.approx(want, rel=tol * 10)
        else:
            assert not np.isnan(got).any(), f"{name}: element(s) never written"
            np.testing.assert_allclose(got, want, rtol=tol)


if IN_SIM:  # collected only inside the simulator process
    test_sim_case = _case
