"""GPU traces: real ones from HTA's test data (tests/fixtures/traces/README.md: NVIDIA A100
with and without Triton, AMD MI250 under ROCm, two ranks of a 128-rank job) and a synthetic
one in Kineto's exact format for what those do not hold (two streams at once, Inductor's
kernel_flop, a kernel whose launch is missing, clock skew, an ac2g flow without correlation)."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")

from roofbench.bench.errors import UserError  # noqa: E402
from roofbench.bench.trace.analyse import analyse  # noqa: E402
from roofbench.bench.trace.api import trace  # noqa: E402
from roofbench.bench.trace.link import link  # noqa: E402
from roofbench.bench.trace.reader import read_trace  # noqa: E402

FIX = Path(__file__).resolve().parents[2] / "fixtures" / "traces"
H100 = {"id": 0, "name": "NVIDIA H100 80GB HBM3", "totalGlobalMem": 85520809984,
        "computeMajor": 9, "computeMinor": 0, "numSms": 132}


def op(name, ts, dur, ext, dims=None, types=None, tid=1):
    args = {"External id": ext}
    if dims is not None:
        args.update({"Input Dims": dims, "Input type": types,
                     "Input Strides": [[d[-1], 1] if len(d) == 2 else [] for d in dims],
                     "Concrete Inputs": ["" for _ in dims]})
    return {"ph": "X", "cat": "cpu_op", "name": name, "pid": 1, "tid": tid, "ts": ts,
            "dur": dur, "args": args}


def launch(ts, corr, ext=None, name="cudaLaunchKernel"):
    args = {"correlation": corr, "cbid": 211}
    if ext is not None:
        args["External id"] = ext
    return {"ph": "X", "cat": "cuda_runtime", "name": name, "pid": 1, "tid": 1, "ts": ts,
            "dur": 5, "args": args}


def kernel(name, ts, dur, corr, stream=7, **extra):
    args = {"device": 0, "stream": stream, **({"correlation": corr} if corr else {}), **extra}
    return {"ph": "X", "cat": "kernel", "name": name, "pid": 0, "tid": stream, "ts": ts,
            "dur": dur, "args": args}


def synthetic(path: Path, *, skew: bool = False) -> Path:
    shift = 300 if skew else 0  # the GPU clock behind the CPU's
    ev = [
        {"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#3", "pid": 1, "tid": 1,
         "ts": 90, "dur": 400, "args": {"External id": 1}},
        op("aten::mm", 100, 50, 10, [[256, 512], [512, 128]], ["c10::BFloat16"] * 2),
        launch(110, 1000, ext=10),
        kernel("sm90_xmma_gemm_bf16", 200 - shift, 40, 1000, stream=7),
        op("aten::add", 160, 20, 11, [[256, 128], [256, 128], []],
           ["c10::BFloat16", "c10::BFloat16", "Scalar"]),
        launch(165, 1001),  # no External id: charged by its nesting in aten::add
        kernel("vectorized_elementwise_kernel", 220 - shift, 40, 1001, stream=8),
        op("CompiledFunction", 300, 50, 12),
        launch(310, 1002, name="cuLaunchKernel"),
        kernel("triton_poi_fused_mul_0", 320 - shift, 10, 1002, kernel_flop=1000,
               kernel_num_gb=1e-6),
        kernel("ncclKernel_AllReduce", 340 - shift, 10, 1003),  # its launch is not here
        op("aten::relu", 400, 30, 13, [[256, 128]], ["c10::BFloat16"]),
        {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1,
         "ts": 405, "dur": 5, "args": {"cbid": 211, "correlation": 77}},
        kernel("relu_kernel", 450 - shift, 8, None, stream=7),  # linked by its flow only
        {"ph": "s", "id": 77, "pid": 1, "tid": 1, "ts": 405, "cat": "ac2g", "name": "ac2g"},
        {"ph": "f", "id": 77, "pid": 0, "tid": 7, "ts": 450 - shift, "cat": "ac2g",
         "name": "ac2g", "bp": "e"},
    ]
    d = {"schemaVersion": 1, "deviceProperties": [H100],
         "distributedInfo": {"backend": "nccl", "rank": 0, "world_size": 1},
         "record_shapes": 1, "traceEvents": ev, "traceName": "synthetic"}
    with gzip.open(path, "wt") as f:
        json.dump(d, f)
    return path


def test_kernels_reach_their_op_by_every_link_a_trace_holds(tmp_path):
    tr = read_trace(synthetic(tmp_path / "t.json.gz"))
    ln = link(tr)
    names = {tr.work[w].name: (tr.ops[u].name if u >= 0 else None)
             for w, u in enumerate(ln.work_unit)}
    assert names == {"sm90_xmma_gemm_bf16": "aten::mm",
                     "vectorized_elementwise_kernel": "aten::add",
                     "triton_poi_fused_mul_0": "CompiledFunction",
                     "ncclKernel_AllReduce": None, "relu_kernel": "aten::relu"}
    assert ln.how == {"External id": 1, "nesting": 3, "missing": 1}


def test_two_streams_at_once_are_shared_not_counted_twice(tmp_path):
    a = analyse([read_trace(synthetic(tmp_path / "t.json.gz"))])
    t = {o.name: o.total_s for o in a.ops}
    # mm alone 200-220, with add 220-240 (half each); add alone 240-260
    assert t["aten::mm"] == pytest.approx(30e-6) and t["aten::add"] == pytest.approx(30e-6)
    assert a.trace_s == pytest.approx(60e-6 + 10e-6 + 10e-6 + 8e-6)  # the device's busy time
    assert a.ops_s + a.unclaimed_s == pytest.approx(a.trace_s)
    assert list(a.unclaimed) == ["kernel: ncclKernel_AllReduce (its op is missing)"]
    assert a.steps == [{"rank": 0, "step": "ProfilerStep#3", "ops_s": pytest.approx(78e-6)}]


def test_a_compiled_region_is_counted_from_inductors_kernel_flop(tmp_path):
    tp = trace(synthetic(tmp_path / "t.json.gz"))
    region = next(p for p in tp.ops if p.op.name == "CompiledFunction")
    assert (region.op.flops, region.op.bytes) == (1000, 1000)
    mm = next(p for p in tp.ops if p.op.name == "aten.mm.default")
    assert mm.op.flops == 2 * 256 * 512 * 128 and mm.case.identity.precision == "bf16_tc"
    assert "datasheet" in tp.roofs_from and tp.roofs is not None
    assert tp.roofs.notes == ["datasheet roofs: the vendor's peaks, not measured"]


def test_clock_skew_is_said_and_changes_no_link(tmp_path):
    tp = trace(synthetic(tmp_path / "t.json.gz", skew=True))
    assert any("clocks of this trace disagree" in n for n in tp.notes)
    assert tp.analysis.links == {"External id": 1, "nesting": 3, "missing": 1}


def test_a100_without_shapes_links_by_nesting_and_is_timed_only():
    a = analyse([read_trace(FIX / "hta-a100-alexnet.json.gz")])
    assert a.gpu and a.links == {"nesting": 98} and not a.has_shapes
    assert a.ops_s == pytest.approx(a.trace_s) and a.ops_s > 0
    assert {o.name for o in a.ops} >= {"aten::convolution", "aten::addmm"}


def test_two_ranks_from_a_folder_with_steps_and_their_nccl_time_unclaimed():
    tp = trace(FIX / "hta-sampled-ranks", device="NVIDIA H100 80GB HBM3")
    a = tp.analysis
    assert [r["rank"] for r in a.ranks] == [0, 1]
    assert {s["step"] for s in a.steps} >= {"ProfilerStep#551", "ProfilerStep#552"}
    assert a.ops_s + a.unclaimed_s == pytest.approx(a.trace_s)
    assert any(k.startswith("kernel: ncclKernel") for k in a.unclaimed)
    assert sum(1 for o in a.ops if o.counted.distinct) > 300  # recorded shapes, torch 2.0 era


def test_amd_names_its_gpu_badly_and_asks_for_the_device():
    with pytest.raises(UserError, match="--device NAME"):
        trace(FIX / "hta-mi250-rocm62.json.gz")
    tp = trace(FIX / "hta-mi250-rocm62.json.gz", device="MI300X")
    assert tp.analysis.links == {"External id": 16} and tp.device == "MI300X"
    assert "datasheet" in tp.roofs_from


def test_an_uncounted_triton_kernel_is_listed_with_its_time():
    a = analyse([read_trace(FIX / "hta-a100-triton.json.gz")])
    assert list(a.uncounted_kernels) == ["triton_poi_fused_add_cos_sin_0"]
    assert a.uncounted_kernels["triton_poi_fused_add_cos_sin_0"] == pytest.approx(1.76e-6)


def test_a_gpu_trace_without_device_properties_asks_for_the_device():
    with pytest.raises(UserError, match="names no GPU"):
        trace(FIX / "hta-sampled-ranks")
