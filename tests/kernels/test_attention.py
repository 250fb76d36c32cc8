"""The attention and gemv workloads beyond their kernels: the reference is the definition, the
sweeps are the stated ones, the GPU kernels' limits are refused with a reason, the launches'
kernel names reach ncu, and `roofbench run` measures attention end to end on the CPU."""

from __future__ import annotations

import json
import math
from types import SimpleNamespace

import numpy as np
import pytest
from flat_cases import flat_cases
from roof_sets import write_roofs
from roofbench.bench.backends.cpu import CpuBackend
from roofbench.bench.backends.gpu_common import plan_launches
from roofbench.bench.cli import main
from roofbench.bench.counters import ncu, ncu_csv
from roofbench.bench.suite.case_record import case_record
from roofbench.bench.suite.runner import validate
from roofbench.kernels import attention
from roofbench.kernels.cuda_impl import CudaLibrary, DeviceProps
from roofbench.kernels.registry import workloads
from roofbench.kernels.spec import Case, SizeContext

from roofbench.records import LaunchFacts, NcuSettings

H200 = DeviceProps(cc=(9, 0), sm_count=132, name="test H200")


def _definition(q, k, v, causal):
    """O for one head straight from the formula, one query at a time, in Python floats."""
    n, d = q.shape
    out = np.zeros((n, d))
    for i in range(n):
        keys = range(i + 1) if causal else range(n)
        s = [sum(q[i, c] * k[j, c] for c in range(d)) / math.sqrt(d) for j in keys]
        m = max(s)
        e = [math.exp(x - m) for x in s]
        for j, ej in zip(keys, e, strict=True):
            out[i] += ej / sum(e) * v[j]
    return out


@pytest.mark.parametrize("causal", [False, True])
def test_reference_is_the_definition_in_several_row_blocks(monkeypatch, causal):
    # REF_BYTES small: the reference takes 3 rows at a time, so the causal mask's offset per
    # block is exercised too.
    monkeypatch.setattr(attention, "REF_BYTES", 8 * 7 * 3)
    w = attention.workload(causal)
    size = (1, 2, 7, 3)
    x = w.make_inputs(size, "fp64", np.random.default_rng(0))
    got = w.expected(x, size, "fp64")["O"]
    for h in range(2):
        want = _definition(*(x[n][0, h] for n in "QKV"), causal)
        assert np.allclose(got[0, h], want, rtol=1e-13, atol=1e-15)


def test_causal_and_full_attention_are_told_apart():
    """Planted: each CPU flash kernel validated against the other mask's reference fails."""
    size = (1, 2, 67, 37)
    for mine, other in (("attention", "attention_causal"), ("attention_causal", "attention")):
        w, o = workloads()[mine], workloads()[other]
        c = Case(w, w.variants["flash"], "fp32", size)
        x = w.make_inputs(size, "fp32", np.random.default_rng(1))
        prep = CpuBackend().prepare(c, x)
        prep.poison()
        prep.run()
        assert validate(c, prep.outputs(), w.expected(x, size, "fp32"))[0]
        ok, _, why = validate(c, prep.outputs(), o.expected(x, size, "fp32"))
        assert not ok and "relative error" in why


def test_a_wrong_scale_is_caught():
    w = workloads()["attention"]
    size = (1, 1, 50, 16)
    c = Case(w, w.variants["flash"], "fp32", size)
    x = w.make_inputs(size, "fp32", np.random.default_rng(2))
    out = np.empty_like(x["Q"])
    w.variants["flash"].impls["cpu"]["flash"](x["Q"], x["K"], x["V"], out, 50, 16, 1.0)
    ok, _, why = validate(c, {"O": out}, w.expected(x, size, "fp32"))
    assert not ok and "relative error" in why


def _ctx(kind: str, dtype: str, quick: bool = False) -> SizeContext:
    return SizeContext(kind=kind, llc_bytes=32 << 20, budget_bytes=64 << 30, dtype=dtype,
                       quick=quick)


def test_default_sweeps():
    w, wc = workloads()["attention"], workloads()["attention_causal"]
    gpu = w.default_sizes(_ctx("gpu", "fp16"))
    assert [s[2] for s in gpu] == [512, 1024, 2048, 4096, 8192, 16384]
    assert all(b * n == 16384 and h == 16 and d == 128 for b, h, n, d in gpu)
    assert w.default_sizes(_ctx("gpu", "bf16")) == gpu
    assert w.default_sizes(_ctx("gpu", "fp32")) == [(4, 16, 4096, 128)]
    assert wc.default_sizes(_ctx("gpu", "fp16")) == [(4, 16, 4096, 128)]
    cpu = w.default_sizes(_ctx("cpu", "fp32"))
    assert [s[2] for s in cpu] == [256, 512, 1024, 2048]
    assert [b for b, _, _, _ in cpu] == [4, 2, 1, 1]
    assert all(h == 2 and d == 64 for _, h, _, d in cpu)
    assert w.default_sizes(_ctx("cpu", "fp64")) == [(1, 2, 1024, 64)]
    assert wc.default_sizes(_ctx("cpu", "fp32")) == [(1, 2, 1024, 64)]
    assert w.default_size(_ctx("cpu", "fp32")) == cpu[0]
    # the largest CPU case's S and P outgrow a 32 MiB last-level cache, the others' fit
    naive = [Case(w, w.variants["naive"], "fp32", s) for s in cpu]
    sp = [c.buffers()["S"].nbytes + c.buffers()["P"].nbytes for c in naive]
    assert sp == [4 << 20, 8 << 20, 16 << 20, 64 << 20]


def test_gemv_default_size_follows_the_memory_rule():
    w = workloads()["gemv"]
    for dtype, item in (("fp32", 4), ("fp64", 8)):
        m, k = w.default_size(_ctx("cpu", dtype))
        assert k == 4096 and m * k * item >= 128 << 20 and (m - 1) * k * item < 128 << 20
    m, k = w.default_size(_ctx("gpu", "fp8"))
    assert m * k >= 8 * (32 << 20)


def test_gpu_limits_are_refused_with_the_reason_and_the_cpu_runs_anything():
    w = workloads()["attention"]
    naive, flash = w.variants["naive"], w.variants["flash"]
    assert "head dims 64 and 128" in flash.refuse((1, 1, 100, 80), "fp16", "cuda")
    assert "N = 32768 > 16384" in naive.refuse((1, 1, 32768, 64), "fp16", "cuda")
    assert flash.refuse((1, 1, 32768, 64), "fp16", "cuda") is None
    assert naive.refuse((1, 1, 32768, 80), "fp32", "cpu") is None
    assert "65535" in flash.refuse((300, 300, 64, 64), "bf16", "pycuda")


def test_library_needs_torch_on_a_gpu():
    assert CudaLibrary("sdpa", dtypes=("fp16",), module="numpy").unsupported("fp16", (9, 0)) \
        is None
    why = CudaLibrary("sdpa", dtypes=("fp16",), module="no_such_pkg").unsupported("fp16", (9, 0))
    assert "needs no_such_pkg" in why
    lib = workloads()["attention"].variants["library"].impls["cuda"]["library"]
    assert lib.op == "sdpa" and lib.module == "torch"
    causal = workloads()["attention_causal"].variants["library"].impls["cuda"]["library"]
    assert causal.op == "sdpa_causal"


@pytest.mark.parametrize("name,variant,functions", [
    ("attention", "naive", ["attn_scores_fp16", "attn_softmax_fp16", "attn_pv_fp16"]),
    ("attention_causal", "naive",
     ["attn_scores_fp16", "attn_softmax_causal_fp16", "attn_pv_fp16"]),
    ("attention", "flash", ["attn_flash_fp16"]),
    ("attention_causal", "flash", ["attn_flash_causal_fp16"]),
    ("gemv", "rows", ["gemv_warp_fp16"]),
])
def test_launches_carry_kernel_names_ncu_selects(tmp_path, name, variant, functions):
    w = workloads()[name]
    size = (1000, 4096) if name == "gemv" else (2, 16, 4096, 128)
    c = Case(w, w.variants[variant], "fp16", size)
    plans = plan_launches(c, H200)
    assert [pl.function for pl in plans] == functions
    rec = case_record(c, SimpleNamespace(name="cuda", kind="gpu"),
                      [LaunchFacts(function=pl.function) for pl in plans], status="ok")
    s = NcuSettings(path="ncu", version="2025.3.1.0",
                        metrics=[ncu_csv.DRAM_READ, ncu_csv.DRAM_WRITE, ncu_csv.DURATION])
    cmd = ncu.ncu_command(s, rec, tmp_path / "log.csv", seed=1)
    assert cmd[cmd.index("--kernel-name") + 1] == \
        f"regex:^({'|'.join(dict.fromkeys(functions))})$"
    assert cmd[cmd.index("--launch-count") + 1] == str(len(functions))
    # the model's DRAM split per launch, what the counters are held against
    assert rec.launch_split() == [
        (sum(c.buffers()[b].nbytes for b in la.reads),
         sum(c.buffers()[b].nbytes for b in la.writes)) for la in c.launches()]


def test_launch_geometry_on_a_gpu():
    w = workloads()["attention"]
    b, h, n, d = 2, 16, 4096, 128
    scores, softmax, pv = plan_launches(Case(w, w.variants["naive"], "bf16", (b, h, n, d)),
                                        H200)
    assert scores.grid == (64, 64, 32) and pv.grid == (64, 32, 1)
    assert softmax.grid == (b * h * n, 1, 1) and softmax.block == (128, 1, 1)
    assert attention.softmax_threads(16384) == 512 and attention.softmax_threads(67) == 128
    (flash,) = plan_launches(Case(w, w.variants["flash"], "bf16", (b, h, n, d)), H200)
    assert flash.grid == (64, 32, 1) and flash.block == (128, 1, 1)


def test_list_shows_the_new_workloads(capsys):
    assert main(["list"]) == 0
    out = capsys.readouterr().out
    for word in ("attention", "attention_causal", "gemv", "flash", "library", "rows"):
        assert word in out


def test_cli_runs_attention_on_the_cpu(tmp_path, capsys):
    roofs = write_roofs(tmp_path / "roofs.json")
    rc = main(["run", "--backend", "cpu", "--workload", "attention", "--quick", "--roofs",
               str(roofs), "--out", str(tmp_path / "out")])
    assert rc == 0, capsys.readouterr().err
    (res,) = (tmp_path / "out").glob("*/*/results.json")
    cases = flat_cases(json.loads(res.read_text()))
    assert {(c["variant"], c["dtype"]) for c in cases} == {
        (v, d) for v in ("naive", "flash", "library") for d in ("fp32", "fp64")}
    for c in cases:
        assert c["status"] == "ok" and c["valid"], c["error"]
        assert c["size"] == list(workloads()["attention"].quick_size)
        assert c["cores"] == "simt" and c["precision"] == c["dtype"]
    report = (res.parent / "report.md").read_text()
    assert "attention" in report and "naive -> flash" in report
    assert "4d + 4 FLOPs per score" in report


def test_the_new_gpu_kernels_are_marked_not_yet_validated_on_hardware():
    from roofbench.kernels.cuda_impl import NOT_VALIDATED_ON_HARDWARE

    for fn in ("attn_scores_fp16", "attn_softmax_causal_bf16", "attn_pv_fp16",
               "attn_flash_causal_fp16", "gemv_warp_fp8"):
        assert any(fn.startswith(p) for p in NOT_VALIDATED_ON_HARDWARE), fn
