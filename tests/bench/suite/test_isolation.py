"""Cases whose kernels declare ``isolated`` run in a process of their own: a hang or a sticky
CUDA error costs that case, recorded with its reason, and the run goes on.

Proven on the CuPy stand-in (tests/standins/fake_cupy) with a plug-in workload whose kernels are
planted:
one never returns (an unbounded barrier wait), one fails stickily (every later call of its
process fails too, as after an illegal address); the real CLI runs them beside good cases.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import time

import cuda_tools as ct
import pytest
from flat_cases import flat_cases
from h200_planner import H200Planner
from patience import patience
from roofbench.bench.errors import UserError
from roofbench.bench.suite import isolation
from roofbench.kernels.cuda_impl import CudaKernel
from roofbench.kernels.registry import workloads
from roofbench.kernels.spec import Case
from roofbench.kernels.wgmma_gemm import TmaKernel
from testpaths import FAKE_CUPY

TIMEOUT_S = round(patience(30))  # every case's limit: the hang's, and the slowest ok case's

PLANTED = '''
"""Planted faults for the isolation test: c = a + b by vadd_scalar, and the same launch
through kernels the stand-in makes hang (planted_hang_*) or fail stickily (planted_sticky_*)."""
from dataclasses import replace

from roofbench.kernels import cuda_impl as cu
from roofbench.kernels.spec import Buf, Launch, Variant, Workload

ADD = cu.elementwise("vector_add.cu", "vadd_scalar", vector=False)
KERNELS = {"ok": replace(ADD, isolated=True),
           "hang": replace(ADD, prefix="planted_hang", isolated=True),
           "sticky": replace(ADD, prefix="planted_sticky", isolated=True),
           "after": replace(ADD, isolated=True)}


def _plan(size, dtype):
    (n,) = size
    return [Launch("add", n, ("a", "b"), ("c",), ("a", "b", "c", n))]


def _reference(x, size, xp):
    a = x["a"]
    a += x["b"]
    return {"c": a}


WORKLOAD = Workload(
    name="planted", description="c = a + b through planted kernels", size_names=("n",),
    inputs=lambda size, dtype: {"a": Buf(size, dtype, "input"), "b": Buf(size, dtype, "input")},
    outputs=lambda size, dtype: {"c": Buf(size, dtype, "output")},
    reference=_reference, tolerance={"fp32": 1e-6},
    variants={v: Variant(name=v, description=v, dtypes=("fp32",), plan=_plan,
                         impls={"cuda": {"add": k}}) for v, k in KERNELS.items()},
    default_size=lambda ctx: (ctx.elements(3),), quick_size=(4099,), order=-1)
'''

ROOFS = {"device": "Fake Emulated GPU", "roofs": [
    {"name": "hbm", "kind": "memory", "level": "dram", "value": 4e12, "source": "measured"},
    {"name": "fp32", "kind": "compute", "precision": "fp32", "value": 6e13,
     "source": "measured"}]}


def test_isolation_is_declared_by_the_kernel_not_by_a_list():
    assert TmaKernel("gemm_wgmma.cu", "gemm_wgmma").isolated
    assert not CudaKernel("gemm.cu", "gemm_tensor", grid=None, block=None).isolated
    be, ws = H200Planner(), workloads()
    g = ws["gemm"]
    sz = (4096, 4096, 4096)
    assert be.isolated(Case(g, g.variants["tensor"], "fp16", sz))  # wgmma on sm_90
    assert not be.isolated(Case(g, g.variants["tensor_mma"], "fp16", sz))  # mma.sync
    assert not be.isolated(Case(g, g.variants["library"], "fp16", sz))
    v = ws["vector_add"]
    assert not be.isolated(Case(v, v.variants["scalar"], "fp32", (1 << 20,)))


def test_case_timeout_from_the_environment(monkeypatch):
    monkeypatch.delenv(isolation.TIMEOUT_ENV, raising=False)
    assert isolation.case_timeout() == isolation.CASE_TIMEOUT_S
    monkeypatch.setenv(isolation.TIMEOUT_ENV, "12.5")
    assert isolation.case_timeout() == 12.5
    for bad in ("0", "-3", "soon"):
        monkeypatch.setenv(isolation.TIMEOUT_ENV, bad)
        with pytest.raises(UserError, match="positive number"):
            isolation.case_timeout()


@pytest.mark.slow
@pytest.mark.skipif(ct.emulation_missing() is not None, reason=ct.emulation_missing() or "")
def test_a_hang_and_a_sticky_error_cost_one_case_each(tmp_path):
    site = tmp_path / "site" / "plantedplug"
    site.mkdir(parents=True)
    (site / "__init__.py").write_text("")
    (site / "workload.py").write_text(textwrap.dedent(PLANTED))
    roofs = tmp_path / "roofs.json"
    roofs.write_text(json.dumps(ROOFS))
    env = dict(os.environ, RB_EMU_LIBDIR=str(ct.build_emulation()),
               ROOFBENCH_PLUGINS="plantedplug.workload",
               ROOFBENCH_CASE_TIMEOUT_S=str(TIMEOUT_S),
               PYTHONPATH=os.pathsep.join([str(FAKE_CUPY), str(tmp_path / "site"),
                                           os.environ.get("PYTHONPATH", "")]))
    out = tmp_path / "out"
    t0 = time.monotonic()
    p = subprocess.run([sys.executable, "-m", "roofbench.bench.cli", "run", "--backend",
                        "cuda", "--workload", "planted", "--workload", "vector_add", "--dtype",
                        "fp32", "--size", "4099", "--quick", "--roofs", str(roofs), "--out",
                        str(out)], capture_output=True, text=True, env=env, timeout=patience(600))
    elapsed = time.monotonic() - t0
    assert p.returncode == 1, p.stdout[-3000:] + p.stderr[-3000:]  # cases failed: it says so
    assert "Traceback" not in p.stderr
    (res,) = out.glob("*/*/results.json")
    cases = {c["variant"] if c["workload"] == "planted" else c["workload"] + "/" + c["variant"]:
             c for c in flat_cases(json.loads(res.read_text()))}
    assert set(cases) == {"ok", "hang", "sticky", "after", "vector_add/scalar",
                          "vector_add/vec4"}
    hang, sticky = cases["hang"], cases["sticky"]
    assert hang["status"] == "error" and hang["error"].startswith(
        f"timed out after {TIMEOUT_S} s in its own process (a hang")
    assert sticky["status"] == "error" and "cudaErrorIllegalAddress" in sticky["error"]
    for name in ("ok", "after", "vector_add/scalar", "vector_add/vec4"):
        c = cases[name]
        assert c["status"] == "ok" and c["valid"] and c["median_s"] > 0, c
        assert c["efficiency"] is not None  # the parent placed it under the roofs
    for name in ("ok", "hang", "sticky", "after"):
        assert cases[name]["extra"]["isolated"] == "ran in its own process"
    assert "isolated" not in cases["vector_add/scalar"]["extra"]
    # one hang cost its limit once, not the run
    assert elapsed < TIMEOUT_S + patience(150)
