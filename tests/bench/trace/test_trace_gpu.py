"""GPU traces: real ones from HTA's test data (tests/fixtures/traces/README.md: NVIDIA A100
with and without Triton, AMD MI250 under ROCm, two ranks of a 128-rank job) and a synthetic
one in Kineto's exact format for what those do not hold (two streams at once, Inductor's
kernel_flop, a kernel whose launch is missing, NCCL kernels, clock skew, an ac2g flow without
correlation)."""

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
from roofbench.bench.trace.placed import sections  # noqa: E402
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
        kernel("fill_kernel_orphan", 340 - shift, 10, 1003),  # its launch is not here
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
                     "fill_kernel_orphan": None, "relu_kernel": "aten::relu"}
    assert ln.how == {"External id": 1, "nesting": 3, "missing": 1}


def test_two_streams_at_once_are_shared_not_counted_twice(tmp_path):
    a = analyse([read_trace(synthetic(tmp_path / "t.json.gz"))])
    t = {o.name: o.total_s for o in a.ops}
    # mm alone 200-220, with add 220-240 (half each); add alone 240-260
    assert t["aten::mm"] == pytest.approx(30e-6) and t["aten::add"] == pytest.approx(30e-6)
    assert a.trace_s == pytest.approx(60e-6 + 10e-6 + 10e-6 + 8e-6)  # the device's busy time
    assert a.ops_s + a.unclaimed_s == pytest.approx(a.trace_s)
    assert list(a.unclaimed) == ["kernel: fill_kernel_orphan (its op is missing)"]
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
    assert any(k.startswith("communication: ncclKernel") for k in a.unclaimed)
    # that old trace records no message sizes: the kernels are listed, on no roof
    assert tp.comm and all(r["roof"] is None and r["why"] for r in tp.comm)
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


AR = {"Collective name": "allreduce", "In msg nelems": 1 << 20, "Out msg nelems": 1 << 20,
      "Group size": 8, "dtype": "Float"}
AG = {"Collective name": "_allgather_base", "In msg nelems": 1 << 18,
      "Out msg nelems": 1 << 21, "Group size": 8, "dtype": "BFloat16"}


def comm_trace(path: Path) -> Path:
    """An all-reduce launched inside an aten op (its sizes on the kernel, torch >= 2.1), an
    all-gather inside `record_param_comms` (its sizes on the op only), and a send/recv whose
    launch is not in the trace and whose sizes were never recorded."""
    ev = [
        op("aten::mm", 100, 50, 10, [[256, 512], [512, 128]], ["float"] * 2),
        launch(110, 1000, ext=10),
        kernel("sm90_xmma_gemm_f32", 200, 40, 1000),
        launch(120, 1001),
        kernel("ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevComm*, unsigned long, "
               "ncclWork*)", 250, 100, 1001, stream=9, **AR),
        {"ph": "X", "cat": "cpu_op", "name": "record_param_comms", "pid": 1, "tid": 1,
         "ts": 400, "dur": 30, "args": {"External id": 20, **AG}},
        launch(410, 1002),
        kernel("ncclKernel_AllGather_RING_LL_Sum_bf16(ncclDevComm*, unsigned long, "
               "ncclWork*)", 500, 50, 1002, stream=9),
        kernel("ncclKernel_SendRecv_RING_SIMPLE_Sum_int8_t(ncclDevComm*)", 600, 20, 1003),
    ]
    d = {"schemaVersion": 1, "deviceProperties": [H100], "record_shapes": 1,
         "traceEvents": ev}
    path.write_text(json.dumps(d))
    return path


def test_communication_kernels_are_placed_on_the_measured_interconnect_roof(tmp_path):
    from roofbench.roof_records import Roof, RoofSet

    roofs = RoofSet("NVIDIA H100 80GB HBM3", [
        Roof("hbm", "memory", 3e12, "measured", level="dram"),
        Roof("fp32", "compute", 5e13, "measured", precision="fp32"),
        Roof("nccl all-reduce busbw", "interconnect", 1e11, "measured",
             level="nccl_allreduce")])
    tp = trace(comm_trace(tmp_path / "t.json"), roofs=roofs)
    rows = {r["collective"]: r for r in tp.comm}
    # all-reduce: 4 MiB x 2(8-1)/8 bus bytes in 100 us
    ar = rows["allreduce"]
    assert ar["bus_bytes_per_call"] == (1 << 20) * 4 * 2 * 7 // 8
    assert ar["efficiency"] == pytest.approx((1 << 20) * 4 * 1.75 / 100e-6 / 1e11)
    assert ar["roof"] == "nccl all-reduce busbw" and ar["status"] == "ok"
    # all-gather: its sizes from the record_param_comms op around its launch; no all-gather
    # roof measured, so the all-reduce's (roofs/distributed.py's order), named
    ag = rows["allgather"]
    assert ag["bus_bytes_per_call"] == (1 << 21) * 2 * 7 // 8 and ag["roof"] == ar["roof"]
    # no sizes recorded: timed, listed, on no roof
    sr = rows["sendrecv"]
    assert sr["roof"] is None and sr["time_s"] == pytest.approx(20e-6) and sr["why"]
    # never an op's work, never against DRAM: the mm keeps only its GEMM
    mm = next(o for o in tp.analysis.ops if o.name == "aten::mm")
    assert mm.kernels == 1 and set(mm.kernel_names) == {"sm90_xmma_gemm_f32"}
    comm_s = sum(v for k, v in tp.analysis.unclaimed.items()
                 if k.startswith("communication: "))
    assert comm_s == pytest.approx(170e-6)
    assert "Communication" in "".join(s.title for s in sections(tp))


def test_communication_without_a_measured_interconnect_roof_names_no_roof(tmp_path):
    tp = trace(comm_trace(tmp_path / "t.json"))  # the H100's datasheet: no link measured
    assert "datasheet" in tp.roofs_from
    assert tp.comm and all(r["roof"] is None and r["efficiency"] is None for r in tp.comm)
    ar = next(r for r in tp.comm if r["collective"] == "allreduce")
    assert ar["bus_bytes_per_s"] and "no interconnect roof measured" in ar["why"]
    assert any("communication kernels: not placed" in n for n in tp.notes)
    assert tp.record()["communication"] == tp.comm
