"""A new workload is one module: a copy of gemv under another name, joined as a plug-in
($ROOFBENCH_PLUGINS), is taken in by every table the suite and the scripts derive from the
registry (CPU and GPU test cases, codegen rows, sanitizer cases, emulated CUDA sources) and
passes its CPU check, with no line written anywhere else."""

from __future__ import annotations

import re
import sys

import numpy as np
import pytest
from roofbench.bench.backends.cpu import CpuBackend
from roofbench.bench.suite.runner import validate
from roofbench.kernels import registry
from roofbench.kernels.spec import Case
from testpaths import ROOT

TWIN = "gemv_twin"


def twin_source() -> str:
    """kernels/gemv.py as a module outside the package: absolute imports, its own name, and
    its CUDA table pointing at a source of its own name (the tables read it from there)."""
    text = (ROOT / "kernels" / "gemv.py").read_text()
    text = re.sub(r"^from \. import ", "from roofbench.kernels import ", text, flags=re.M)
    text = re.sub(r"^from \.(\w+) import ", r"from roofbench.kernels.\1 import ", text, flags=re.M)
    assert text.count('name="gemv",') == 1 and text.count('"gemv.cu"') == 1
    return text.replace('name="gemv",', f'name="{TWIN}",').replace('"gemv.cu"', f'"{TWIN}.cu"')


@pytest.fixture
def twin(tmp_path, monkeypatch):
    (tmp_path / f"{TWIN}.py").write_text(twin_source())
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.syspath_prepend(str(ROOT / "scripts"))
    monkeypatch.setenv("ROOFBENCH_PLUGINS", TWIN)
    yield registry.workloads()[TWIN]
    sys.modules.pop(TWIN, None)


def test_the_twin_is_a_workload_of_its_own(twin):
    ws = registry.workloads()
    assert TWIN in ws and "gemv" in ws
    assert twin.suite_sizes() == ws["gemv"].suite_sizes()


def test_every_derived_table_takes_the_new_module_in(twin):
    import codegen_kernels as ck
    import sanitize_kernels as sk
    from workload_cases import cpu_cases, gpu_cases

    gemv = registry.workloads()["gemv"]
    cpu = [c for c in cpu_cases() if c[0] == TWIN]
    assert {c[3] for c in cpu} == set(gemv.suite_sizes().cpu)
    assert {(c[1], c[2]) for c in cpu} == {("rows", "fp32"), ("rows", "fp64"),
                                           ("library", "fp32"), ("library", "fp64")}
    assert {c[3] for c in gpu_cases("cuda") if c[0] == TWIN} == set(gemv.suite_sizes().gpu)
    rows = {r.name: r for r in ck.kernel_rows()}
    mine, theirs = rows[f"{TWIN}._rows"], rows["gemv._rows"]
    assert (mine.min_packed, mine.why) == (theirs.min_packed, theirs.why)
    assert ck.signature(mine, "float32") == ck.signature(theirs, "float32")
    assert mine.dispatcher() is sys.modules[TWIN]._rows
    assert (TWIN, "rows", ("fp16", "fp8"), (37, 1001)) in sk.cases()
    assert f"{TWIN}.cu" in registry.cuda_sources("runtime")


def test_the_new_module_passes_its_cpu_check(twin):
    size = twin.suite_sizes().cpu[1]  # (37, 1001): tails of every vector width
    case = Case(twin, twin.variants["rows"], "fp32", size)
    inputs = twin.make_inputs(size, "fp32", np.random.default_rng(7))
    prep = CpuBackend().prepare(case, inputs)
    prep.poison()
    prep.run()
    ok, err, why = validate(case, prep.outputs(), twin.expected(inputs, size, "fp32"))
    assert ok and err <= twin.tolerance["fp32"], why


def test_without_the_plugin_no_table_names_it():
    import codegen_kernels as ck
    from workload_cases import cpu_cases

    assert TWIN not in registry.workloads()
    assert all(c[0] != TWIN for c in cpu_cases())
    assert all(not r.module.startswith(TWIN) for r in ck.kernel_rows())


def test_shared_device_primitives_live_in_common_cuh():
    """block_sum and block_max are common.cuh's; no kernel source keeps a private one."""
    cuda = ROOT / "kernels" / "cuda"
    common = (cuda / "common.cuh").read_text()
    for name in ("block_sum", "block_max"):
        assert re.search(rf"__device__[^;{{]*\b{name}\(", common), name
    for src in sorted(cuda.glob("*.cu")):
        assert not re.search(r"__device__[^;{]*\w*block_(max|sum)\(", src.read_text()), src.name
    assert "block_max(mx, ATT_NEG)" in (cuda / "attention.cu").read_text()
