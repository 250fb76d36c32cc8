"""The real CuPy (and PyCUDA) backends, runner and CLI end to end without a GPU: stand-ins
`cupy` / `pycuda` (tests/standins/fake_cupy: host memory, CUDA events on the host clock) launch the
CUDA C kernels through the CPU emulation of tests/standins/cuda_emu; the sm_90a wgmma GEMM goes
through the stand-in cuda.bindings (NVRTC, tensor maps, driver launch) as on a Hopper GPU.
Proves the backends' plumbing (launch geometry, storage types, poisoning, per-launch timing,
occupancy facts, results files); the times they record are emulation times and mean
nothing."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import cuda_tools as ct
import pytest
from flat_cases import flat_cases
from patience import patience
from roof_sets import FAKE_GPU
from roofbench.kernels import wgmma_gemm as wg
from testpaths import FAKE_CUPY

pytestmark = pytest.mark.skipif(ct.emulation_missing() is not None,
                                reason=ct.emulation_missing() or "")


RUNS = [
    ["--workload", "vector_add", "--variant", "vec4", "--dtype", "fp8", "--dtype", "fp32",
     "--size", "1003"],
    ["--workload", "rownorm", "--variant", "naive", "--dtype", "fp16", "--size", "3x1001"],
    # sm_90: `tensor` is the wgmma kernel (test_cli_run_wgmma_emulated); tensor_mma mma.sync
    ["--workload", "gemm", "--variant", "tensor_mma", "--dtype", "bf16", "--size", "130x136x97"],
    ["--workload", "gemm", "--variant", "library", "--dtype", "fp32", "--size", "33x17x9"],
]


def run_cli(tmp_path: Path, args: list[str], cc: str = "9.0",
            backend: str = "cuda", command: str = "run") -> list[dict]:
    roofs = tmp_path / "roofs.json"
    roofs.write_text(json.dumps(FAKE_GPU))
    env = dict(os.environ, RB_EMU_LIBDIR=str(ct.build_emulation()), RB_FAKE_CC=cc,
               PYTHONPATH=os.pathsep.join([str(FAKE_CUPY),
                                           os.environ.get("PYTHONPATH", "")]))
    nvcc = ct.pip_tool("nvcc")  # the PyCUDA backend wants an nvcc (the fake never calls it)
    if nvcc is not None:
        env["PATH"] = os.pathsep.join([str(nvcc.parent), env.get("PATH", "")])
    cmd = [sys.executable, "-m", "roofbench.bench.cli", command, "--backend", backend, "--quick",
           "--samples", "2", "--no-figures",  # the records are checked, never a figure
           "--roofs", str(roofs), "--out", str(tmp_path / "out"), *args]
    p = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=patience(300))
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-3000:]
    (res,) = list((tmp_path / "out").glob("*/*/results.json"))
    cases = flat_cases(json.loads(res.read_text()))
    assert cases
    return cases


def test_fp8_tensor_refused_before_sm89(tmp_path):
    (c,) = run_cli(tmp_path, ["--workload", "gemm", "--variant", "tensor", "--dtype", "fp8",
                              "--size", "64x64x64"], cc="8.0")
    assert c["status"] == "unsupported" and "8.9" in c["error"]


@pytest.mark.parametrize("args", RUNS, ids=[r[1] + "-" + r[3] for r in RUNS])
def test_cli_run_backend_cuda_emulated(tmp_path, args):
    cases = run_cli(tmp_path, args)
    for c in cases:
        assert c["status"] == "ok" and c["valid"], (c["workload"], c["variant"], c["error"])
        assert c["backend"] == "cuda"
        assert c["timing"]["config"]["timer"] == "cuda_events"
        assert "launches" not in c["extra"]  # typed facts of each launch (records.py)
        for lr in c["launches"]:
            la = lr["facts"]
            if la["function"]:
                assert la["function"].endswith("_" + c["dtype"])
                assert 0 < la["occupancy"]["occupancy"] <= 1
        if len(c["launches"]) > 1:
            assert all(lr["timing"]["n"] >= 1 for lr in c["launches"])


def test_cli_run_backend_pycuda_emulated(tmp_path):
    """The PyCUDA backend through the same emulation (tests/standins/fake_cupy/pycuda)."""
    cases = run_cli(tmp_path, ["--workload", "l2norm", "--dtype", "bf16", "--size", "2051"],
                    backend="pycuda")
    assert {c["variant"] for c in cases} == {"naive", "fused"}
    for c in cases:
        assert c["status"] == "ok" and c["valid"], c["error"]
        assert c["backend"] == "pycuda" and c["extra"]["compiler"].startswith("nvcc")


def test_pycuda_library_gemm_is_unsupported(tmp_path):
    (c,) = run_cli(tmp_path, ["--workload", "gemm", "--variant", "library", "--dtype", "fp32",
                              "--size", "32x32x32"], backend="pycuda")
    assert c["status"] == "unsupported" and "cuBLAS" in c["error"]


def test_attention_and_gemv_through_the_cupy_backend(tmp_path):
    """The new workloads' launches through the real CuPy backend (emulated): names, geometry
    and facts recorded per launch; the torch baseline is refused with its reason without
    torch."""
    import importlib.util

    cases = run_cli(tmp_path, ["--workload", "attention", "--dtype", "fp16", "--size",
                               "1x1x17x64"])
    by = {c["variant"]: c for c in cases}
    for v, names in (("naive", ["attn_scores_fp16", "attn_softmax_fp16", "attn_pv_fp16"]),
                     ("flash", ["attn_flash_fp16"])):
        c = by[v]
        assert c["status"] == "ok" and c["valid"], c["error"]
        assert [la["facts"]["function"] for la in c["launches"]] == names
        assert c["cores"] == "tensor" and c["precision"] == "fp16_tc"
    from roofbench.kernels.cuda_impl import _cpu_build

    if importlib.util.find_spec("torch") is None or _cpu_build("torch"):  # the dev extra's
        assert by["library"]["status"] == "unsupported" and "torch" in by["library"]["error"]
    (tmp_path / "g").mkdir()
    (g,) = run_cli(tmp_path / "g", ["--workload", "gemv", "--variant", "rows", "--dtype", "fp8",
                                    "--size", "37x1001"])
    assert g["status"] == "ok" and g["valid"], g["error"]
    assert g["launches"][0]["facts"]["function"] == "gemv_warp_fp8"
    assert not g["launches"][0]["facts"]["validated_on_hardware"]


def test_occupancy_levels_give_the_intended_blocks_per_sm_and_grid(tmp_path):
    """`roofbench occupancy` through the CuPy backend (emulated, sm_90, one SM): level b asks
    for b resident blocks per SM through dynamic shared memory (the arch's shared memory per
    SM over b, in allocation units, less the runtime's 1 KiB per block) and a grid of at most
    b blocks per SM; every level validates, with the same counts."""
    from roofbench.bench.backends.occupancy_calc import occupancy

    m, k = 37, 1001
    cases = run_cli(tmp_path, ["--workload", "gemv", "--variant", "rows", "--dtype", "fp16",
                               "--size", f"{m}x{k}"], command="occupancy")
    top = occupancy(256, 32, 0, (9, 0)).blocks_per_sm  # the fake reports 32 registers
    assert [c["occupancy_level"] for c in cases] == [
        {"axis": "blocks_per_sm", "value": b, "of": top} for b in range(1, top + 1)]
    own_grid = min(-(-m // 8), 1 * (512 // 256))  # a row per warp, one wave of the fake SM
    for c in cases:
        b = c["occupancy_level"]["value"]
        assert c["status"] == "ok" and c["valid"], c["error"]
        (la,) = c["launches"]
        f = la["facts"]
        want_smem = 0 if b == top else (233472 // b) // 128 * 128 - 1024
        assert f["dynamic_smem"] == want_smem
        assert f["occupancy"]["blocks_per_sm"] == b
        assert f["occupancy"]["limiter"] == ("shared_memory" if b < top else "warps")
        assert f["grid"] == [min(own_grid, b * 1), 1, 1]  # b blocks on the one SM at most
    assert len({(c["flops"], c["bytes"]["dram"]) for c in cases}) == 1


def test_a_library_call_cannot_be_scanned_on_a_gpu(tmp_path):
    (c,) = run_cli(tmp_path, ["--workload", "gemv", "--variant", "library", "--dtype", "fp16",
                              "--size", "64x64"], command="occupancy")
    assert c["status"] == "unsupported" and "sizes its own resources" in c["error"]


# Partial tiles in every dimension the TMA stride rule allows (N, K multiples of 16 bytes);
# 1001 rows: 8 tile rows, a grouped raster of one full group over two tile columns (the second
# partial, 16 wide, as 784's fourth was: half the CTAs); K = 1024: 16 fp16 k tiles wrap the
# 4-stage ring 4 times, 8 fp8 ones the 3-stage ring 2.7 times: every stage's barriers are
# waited on with both parities, and reused after a wrap, as at K = 2048. Cost: --quick samples
# each case 12 times (or until its 20 s cap), each sample a whole emulated launch, so the
# emulated time goes as CTAs x k tiles (test_wgmma_sizes_cover_their_cases_at_their_cost).
WGMMA_SIZES = ("130x272x112", "1001x272x336", "128x256x1024")
WGMMA_DTYPES = ("fp16", "bf16", "fp8")
WGMMA_WORK_BUDGET = 320  # CTAs x k tiles over the sizes and dtypes (1001x784x336, K 2048: 580)


def _wgmma_dims(size: str) -> tuple[int, int, int]:
    m, n, k = map(int, size.split("x"))
    return m, n, k


def test_wgmma_sizes_cover_their_cases_at_their_cost():
    """What each size of test_cli_run_wgmma_emulated is there for, from the kernel's own
    constants, and the emulated work they cost together kept within a budget."""
    c = wg.wgmma_constants()
    tiles = [wg.wgmma_tiles(m, n) for m, n, _ in map(_wgmma_dims, WGMMA_SIZES)]
    m, n, k = zip(*map(_wgmma_dims, WGMMA_SIZES), strict=True)
    assert any(x % c["WG_BM"] for x in m) and any(x % c["WG_BN"] for x in n)  # partial tiles
    for d in WGMMA_DTYPES:
        bk = c["WG_BK_BYTES"] // wg.itemsize(d)
        assert any(x % bk for x in k), d  # a partial k tile
        assert max(-(-x // bk) for x in k) >= 2 * wg.wgmma_stages(d) + 1, d  # the ring wraps
        assert all(x * wg.itemsize(d) % 16 == 0 for x in n + k), d  # TMA's stride rule
    # one whole raster group over more than one tile column
    assert any(tm == c["WG_GROUP_M"] and tn >= 2 for tm, tn in tiles)
    work = sum(len(wg.wgmma_schedule(*_wgmma_dims(s), d)) * -(-_wgmma_dims(s)[2] // (
        c["WG_BK_BYTES"] // wg.itemsize(d))) for s in WGMMA_SIZES for d in WGMMA_DTYPES)
    assert work <= WGMMA_WORK_BUDGET, work


@pytest.mark.slow
@pytest.mark.parametrize("size", WGMMA_SIZES)
def test_cli_run_wgmma_emulated(tmp_path, size):
    """`roofbench run --backend cuda --variant tensor` on the sm_90 stand-in: the real CuPy
    backend plans the wgmma/TMA GEMM, builds it with NVRTC for sm_90a, encodes both tensor maps
    with cuTensorMapEncodeTiled and launches it with cuLaunchKernel
    (tests/standins/fake_cupy/cuda: the
    stand-in bindings store the encoded fields, the emulated TMA reads them), and validates
    fp16, bf16 and fp8 against float64."""
    dtypes = [a for d in WGMMA_DTYPES for a in ("--dtype", d)]
    cases = run_cli(tmp_path, ["--workload", "gemm", "--variant", "tensor", *dtypes,
                               "--size", size])
    assert sorted(c["dtype"] for c in cases) == ["bf16", "fp16", "fp8"]
    for c in cases:
        assert c["status"] == "ok" and c["valid"], (c["dtype"], c["error"])
        (la,) = [x["facts"] for x in c["launches"]]
        assert la["function"] == f"gemm_wgmma_{c['dtype']}", la
        assert la["compiler"] == "nvrtc sm_90a (cuda-python driver launch)", la
        assert la["grid"][0] == len(wg.wgmma_schedule(*map(int, size.split("x")), c["dtype"]))
