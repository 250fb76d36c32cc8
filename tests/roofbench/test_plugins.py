"""A workload and a backend from outside the tree, through $ROOFBENCH_PLUGINS alone.

The issue's promise: a new workload is one module, a new backend one module plus a registry
line (here the plug-in variable stands for the line). A temporary package holds a toy workload
(y = 2x) and a toy numpy backend; `roofbench run` measures the toy on the toy backend in a
subprocess, and not one file of the checkout changes.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from patience import patience
from testpaths import ROOT

N = 40_000  # elements of the toy case

TOY_WORKLOAD = '''
"""y = 2x: one multiply per element, x read and y written once."""
import numpy as np

from roofbench.kernels.spec import Buf, Launch, Variant, Workload


def double(x, y, n):
    np.multiply(x, 2, out=y)


def _plan(size, dtype):
    (n,) = size
    return [Launch("double", flops=n, reads=("x",), writes=("y",), args=("x", "y", n))]


WORKLOAD = Workload(
    name="toy",
    description="y = 2x",
    size_names=("n",),
    inputs=lambda size, dtype: {"x": Buf(size, dtype, "input")},
    outputs=lambda size, dtype: {"y": Buf(size, dtype, "output")},
    reference=lambda x, size, xp: {"y": 2 * x["x"]},
    tolerance={"fp64": 1e-12, "fp32": 1e-6},
    variants={"plain": Variant(name="plain", description="numpy multiply",
                               dtypes=("fp32", "fp64"), plan=_plan,
                               impls={"numpy": {"double": double}})},
    default_size=lambda ctx: (ctx.elements(2),),
    quick_size=(1 << 16,),
    flop_convention="toy: 1 FLOP (the multiply) per element",
    marker="x",
)
'''

TOY_BACKEND = '''
"""A numpy backend: runs the "numpy" implementations, the CPU backend's clock and facts."""
import numpy as np

from roofbench.bench.backends.base import LaunchListPrepared
from roofbench.bench.backends.cpu import CpuBackend
from roofbench.kernels.arrays import np_dtype


class ToyPrepared(LaunchListPrepared):
    def __init__(self, case, inputs):
        self.case = case
        self.arrays = {n: (np.ascontiguousarray(inputs[n]) if b.role == "input"
                           else np.empty(b.shape, dtype=np_dtype(b.dtype)))
                       for n, b in case.buffers().items()}
        table = case.variant.impls["numpy"]
        self._calls = []
        for la in case.launches():
            args = tuple(self.arrays[a] if isinstance(a, str) else a for a in la.args)
            self._calls.append(lambda fn=table[la.kernel], args=args: fn(*args))

    def poison(self):
        for n, b in self.case.buffers().items():
            if b.role != "input":
                self.arrays[n].fill(np.nan)

    def outputs(self):
        return {n: self.arrays[n] for n, b in self.case.buffers().items()
                if b.role == "output"}


class ToyBackend(CpuBackend):
    name = "toy"
    family = "numpy"

    def prepare(self, case, inputs):
        return ToyPrepared(case, inputs)


BACKEND = ToyBackend
'''

ROOFS = {"device": "toy cpu", "roofs": [
    {"name": "dram", "kind": "memory", "level": "dram", "value": 2e10, "source": "measured"},
    {"name": "fp32", "kind": "compute", "precision": "fp32", "value": 2e11, "source": "measured"},
    {"name": "fp64", "kind": "compute", "precision": "fp64", "value": 1e11, "source": "measured"},
]}


def _git_status() -> str:
    return subprocess.run(["git", "status", "--porcelain", "--untracked-files=all"], cwd=ROOT,
                          capture_output=True, text=True, check=True).stdout


def _cli(tmp: Path, plugins: str, *args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "ROOFBENCH_PLUGINS": plugins,
           "PYTHONPATH": os.pathsep.join(filter(None, [str(tmp / "site"),
                                                       os.environ.get("PYTHONPATH")]))}
    return subprocess.run([sys.executable, "-m", "roofbench.bench.cli", *args], cwd=tmp,
                          env=env, capture_output=True, text=True, timeout=patience(600))


@pytest.fixture()
def site(tmp_path: Path) -> Path:
    pkg = tmp_path / "site" / "toyplug"
    pkg.mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "workload.py").write_text(textwrap.dedent(TOY_WORKLOAD))
    (pkg / "backend.py").write_text(textwrap.dedent(TOY_BACKEND))
    (pkg / "bad.py").write_text("WORKLOAD = 42\n")
    (tmp_path / "roofs.json").write_text(json.dumps(ROOFS))
    return tmp_path


@pytest.mark.slow
def test_toy_workload_on_toy_backend_without_editing_the_tree(site: Path):
    before = _git_status()
    out = site / "results"
    p = _cli(site, "toyplug.workload,toyplug.backend", "run", "--backend", "toy", "--workload",
             "toy", "--size", str(N), "--quick", "--roofs", str(site / "roofs.json"),
             "--samples", "2", "--no-figures",  # the records are checked, not a time or figure
             "--out", str(out))
    assert p.returncode == 0, p.stderr[-3000:]
    assert _git_status() == before  # nothing in the checkout was written or edited
    (path,) = out.glob("*/*/results.json")
    d = json.loads(path.read_text())
    assert d["backend"] == "toy"
    cases = {c["identity"]["dtype"]: c for c in d["cases"]}
    assert set(cases) == {"fp32", "fp64"}
    for dtype, item in (("fp32", 4), ("fp64", 8)):
        c, dc = cases[dtype], cases[dtype]["declaration"]
        assert (c["identity"]["workload"], c["identity"]["variant"], c["outcome"]["status"]) \
            == ("toy", "plain", "ok"), c["outcome"].get("error")
        assert dc["flops"] == N  # the toy's own declaration: one multiply per element
        assert dc["bytes"]["dram"] == 2 * N * item  # x read once, y written once
        assert c["measurement"]["median_s"] > 0


def test_plugin_backend_is_listed_beside_the_registry(site: Path):
    p = _cli(site, "toyplug.workload,toyplug.backend", "list")
    assert p.returncode == 0, p.stderr[-3000:]
    assert "toy:" in p.stdout and "cpu:" in p.stdout
    assert "numpy" in p.stdout  # the toy workload, implemented for the numpy family


@pytest.mark.parametrize("plugins,needle", [
    ("toyplug.nothere", "does not import: ModuleNotFoundError"),
    ("toyplug.bad", "WORKLOAD is a int"),
    ("toyplug.workload,toyplug.workload", "'toy' already exists"),
])
def test_bad_plugin_is_one_line_and_exit_2(site: Path, plugins, needle):
    for args in (["list"], ["run", "--backend", "cpu", "--workload", "vector_add", "--quick",
                            "--roofs", str(site / "roofs.json"), "--out", str(site / "r")]):
        p = _cli(site, plugins, *args)
        assert p.returncode == 2, (args, p.stderr[-3000:])
        assert "Traceback" not in p.stderr
        lines = p.stderr.strip().splitlines()
        assert len(lines) == 1 and needle in lines[0], (args, p.stderr)
