"""The GPU roof probes, proven without a GPU.

- Every probe source compiles for sm_80/89/90 with nvcc (pip) with no spills, and with NVRTC
  (the library CuPy's RawModule uses) without any include path.
- SASS shows intent: FMA probe loops are FFMA/DFMA/HFMA2 dominated, mma probes are HMMA (QMMA
  FP8 on sm_89; none on sm_90, where ptxas lowers FP8 mma.sync to FP16 HMMA), bandwidth probes
  use 128-bit accesses, and every kernel the probes launch exists under its name.
- Config search, roof extraction and the ERT knee are tested as pure functions, and the whole
  measure_gpu_roofs orchestration runs against a fake GPU and a fake timer with planted rates.
- Calibrated files round-trip; corrupt ones are refused by name; calibrate without a GPU is
  one line and exit 2; specs of an unknown device is one line and exit 2.
"""

from __future__ import annotations

import ctypes
import json
import re
import subprocess
import sys
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import cuda_tools as ct
import numpy as np
import pytest
from patience import patience
from roofbench.kernels.cuda_impl import CUDA_DIR as KERNEL_HEADERS
from roofbench.kernels.cuda_impl import expand_includes
from roofbench.roofs.files import RoofsFileError, load_roofs, save_calibrated
from roofbench.roofs.probes import gpu as gp
from roofbench.roofs.probes import gpu_device as gd
from roofbench.roofs.probes import gpu_math as gm
from roofbench.roofs.probes import gpu_memory as gmem
from roofbench.roofs.probes import gpu_run as pr
from testpaths import ROOT, STANDINS

from roofbench.calibrated import CALIBRATED_SCHEMA as SCHEMA
from roofbench.readers import read_roofset
from roofbench.roof_records import Roof, RoofSet
from roofbench.roofline import side_by_side

CUDA_DIR = pr.CUDA_DIR
SOURCES = ("stream.cu", "cache.cu", "fma.cu", "mma.cu", "ert.cu", "wgmma.cu")
ARCHS = ((8, 0), (8, 9), (9, 0))
REPO = ROOT


# ---- the pip CUDA toolchain (tests/standins/cuda_tools.py finds it) -----------------

def _nvrtc_lib() -> Path | None:
    for sp in [Path(p) for p in sys.path if p.endswith("site-packages")]:
        for cand in sorted((sp / "nvidia").glob("cu*/lib/libnvrtc.so*")) + sorted(
                (sp / "nvidia").glob("cuda_nvrtc/lib/libnvrtc.so*")):
            if cand.is_file() and "builtins" not in cand.name:
                return cand
    return None


NVCC, CUOBJDUMP = ct.pip_tool("nvcc"), ct.pip_tool("cuobjdump")
needs_toolchain = pytest.mark.skipif(
    NVCC is None or CUOBJDUMP is None,
    reason="pip CUDA toolchain missing (nvcc, cuobjdump): pip install -e '.[cudatools]'")

_FUNC = re.compile(r"Compiling entry function '([^']+)' for '(sm_\d+)'")
_STACK = re.compile(r"(\d+) bytes stack frame, (\d+) bytes spill stores, (\d+) bytes spill loads")
_USED = re.compile(r"Used (\d+) registers")
_INSN = re.compile(r"/\*([0-9a-f]{4,})\*/\s+(?:@!?U?P\w+\s+)?([A-Z][A-Z0-9_]*(?:\.[A-Z0-9_]+)*)"
                   r"([^;]*);")


def _compile(src: str, cc: tuple[int, int], tmp: Path, defines: tuple[str, ...] = ()
             ) -> dict[str, Any]:
    arch = f"sm_{cc[0]}{cc[1]}"
    out = tmp / f"{src}.{arch}{''.join(defines)}.cubin"
    log = ct.nvcc_cubin(CUDA_DIR / src, arch, out, (KERNEL_HEADERS,), defines)
    res: dict[str, dict[str, int]] = {}
    cur = None
    for line in log.splitlines():
        if m := _FUNC.search(line):
            cur = res.setdefault(m.group(1), {})
        elif cur is not None and (m := _STACK.search(line)):
            cur["stack"], cur["spill_stores"], cur["spill_loads"] = map(int, m.groups())
        elif cur is not None and (m := _USED.search(line)):
            cur["registers"] = int(m.group(1))
    d = ct.sass_listing(out)
    sass: dict[str, list[tuple[int, str, str]]] = {}
    name = None
    for line in d.splitlines():
        if m := re.search(r"Function : (\S+)", line):
            name = m.group(1)
            sass[name] = []
        elif name is not None and (m := _INSN.search(line)):
            sass[name].append((int(m.group(1), 16), m.group(2), m.group(3)))
    return {"resources": res, "sass": sass, "log": log}


@pytest.fixture(scope="module")
def built(tmp_path_factory) -> dict[tuple[str, tuple[int, int]], dict[str, Any]]:
    """Every probe source for every arch, compiled once (two at a time: CI has 2 cores)."""
    if NVCC is None or CUOBJDUMP is None:
        pytest.skip("pip CUDA toolchain missing")
    tmp = tmp_path_factory.mktemp("probe-cubins")
    jobs = [(s, cc) for s in SOURCES for cc in ARCHS]
    with ThreadPoolExecutor(max_workers=2) as ex:
        outs = list(ex.map(lambda j: _compile(j[0], j[1], tmp), jobs))
    return dict(zip(jobs, outs, strict=True))


def _loop_bodies(insns: list[tuple[int, str, str]]) -> list[list[str]]:
    """Opcode lists of every loop: from a backward branch's target up to the branch."""
    bodies = []
    for addr, op, rest in insns:
        if op.startswith("BRA") and (m := re.search(r"0x([0-9a-f]+)", rest)):
            target = int(m.group(1), 16)
            if target < addr:
                bodies.append([o for a, o, _ in insns if target <= a <= addr])
    return bodies


def _hot_loop(insns: list[tuple[int, str, str]], family: str) -> tuple[list[str], float]:
    """Of the loops holding at least 16 ``family`` instructions, the one where they take the
    largest share of the non-NOP ops (the innermost hot loop), with that share."""
    best: tuple[list[str], float] = ([], 0.0)
    for body in _loop_bodies(insns):
        real = [o for o in body if o != "NOP"]
        n = sum(1 for o in real if o.split(".")[0] == family)
        share = n / max(1, len(real))
        if n >= 16 and share > best[1]:
            best = (real, share)
    return best


@needs_toolchain
@pytest.mark.parametrize("cc", ARCHS, ids=lambda c: f"sm_{c[0]}{c[1]}")
@pytest.mark.parametrize("src", SOURCES)
def test_compiles_without_spills(built, src, cc):
    res = built[(src, cc)]["resources"]
    assert res, f"no ptxas report for {src}"
    for fn, r in res.items():
        assert r.get("spill_stores", 0) == 0 and r.get("spill_loads", 0) == 0, (fn, r)
        assert r.get("stack", 0) == 0, (fn, r)  # no local memory at all
        assert 0 < r["registers"] <= 64, (fn, r)  # leaves room for full occupancy


@needs_toolchain
@pytest.mark.parametrize("cc", ARCHS, ids=lambda c: f"sm_{c[0]}{c[1]}")
def test_every_launched_kernel_exists(built, cc):
    for src, names in gp.kernel_names(cc).items():
        have = set(built[(src, cc)]["sass"])
        missing = [n for n in names if n not in have]
        assert not missing, f"{src} sm_{cc[0]}{cc[1]} lacks {missing}"


@needs_toolchain
@pytest.mark.parametrize("cc", ARCHS, ids=lambda c: f"sm_{c[0]}{c[1]}")
@pytest.mark.parametrize("kernel,family", [("fma_fp32", "FFMA"), ("fma_fp64", "DFMA"),
                                           ("fma_fp16x2", "HFMA2"), ("fma_bf16x2", "HFMA2")])
def test_fma_loop_is_fma_dominated(built, cc, kernel, family):
    insns = built[("fma.cu", cc)]["sass"][kernel]
    body, share = _hot_loop(insns, family)
    n = sum(1 for o in body if o.split(".")[0] == family)
    # FMA_UNROLL x FMA_CHAINS FMAs per trip, and nothing much else in the loop.
    assert n >= gm.FMA_UNROLL * gm.FMA_CHAINS, (kernel, Counter(body))
    assert share >= 0.9, (kernel, share, Counter(body))
    if kernel == "fma_bf16x2":
        assert all(".BF16" in o for o in body if o.startswith("HFMA2")), Counter(body)


@needs_toolchain
@pytest.mark.parametrize("cc", ARCHS, ids=lambda c: f"sm_{c[0]}{c[1]}")
@pytest.mark.parametrize("kernel,op", [("mma_fp16", "HMMA.16816.F32"),
                                       ("mma_bf16", "HMMA.16816.F32.BF16"),
                                       ("mma_tf32", "HMMA.1688.F32.TF32")])
def test_mma_probes_run_on_tensor_cores(built, cc, kernel, op):
    insns = built[("mma.cu", cc)]["sass"][kernel]
    body, share = _hot_loop(insns, "HMMA")
    assert sum(1 for o in body if o == op) >= gm.MMA_ACC, Counter(body)
    assert share >= 0.8, (share, Counter(body))  # operands stay in registers: no loads
    assert not any(o.startswith(("LDG", "LDS", "LDL")) for o in body)
    # MMA_ACC independent accumulators, as the FLOPs count them: as many distinct destinations
    # (half of them would still fill an unrolled loop with as many HMMA)
    dests = {ops.split(",")[0].strip() for _, o, ops in insns if o == op}
    assert len(dests) >= gm.MMA_ACC, sorted(dests)


@needs_toolchain
def test_fp8_mma_native_on_sm89_only(built, tmp_path):
    ops89 = [o for _, o, _ in built[("mma.cu", (8, 9))]["sass"]["mma_fp8e4m3"]]
    body, _ = _hot_loop(built[("mma.cu", (8, 9))]["sass"]["mma_fp8e4m3"], "QMMA")
    assert sum(1 for o in body if o == "QMMA.16832.F32.E4M3.E4M3") >= gm.MMA_ACC, Counter(ops89)
    # Not built for sm_80 (no FP8) nor sm_90 (no native FP8 mma.sync on Hopper)...
    assert "mma_fp8e4m3" not in built[("mma.cu", (8, 0))]["sass"]
    assert "mma_fp8e4m3" not in built[("mma.cu", (9, 0))]["sass"]
    # ...and the reason, proven: forced onto sm_90 it becomes FP8->FP16 unpacks and FP16 HMMA.
    forced = _compile("mma.cu", (9, 0), tmp_path, ("ROOFBENCH_FP8_MMA_ON_SM90",))
    ops90 = Counter(o for _, o, _ in forced["sass"]["mma_fp8e4m3"])
    assert not any(o.startswith("QMMA") for o in ops90), ops90
    assert any("F2FP" in o and "E4M3" in o for o in ops90), ops90


@needs_toolchain
@pytest.mark.parametrize("cc", ARCHS, ids=lambda c: f"sm_{c[0]}{c[1]}")
def test_bandwidth_probes_are_vectorized(built, cc):
    sass = built[("stream.cu", cc)]["sass"]
    for k, (r, w) in gmem.STREAM_RW.items():
        for suf in ("f32", "f64"):
            ops = Counter(o for _, o, _ in sass[f"stream_{k}_{suf}"])
            if r:
                assert any(o.startswith("LDG.E.128") for o in ops), (k, suf, ops)
            if w:
                assert any(o.startswith("STG.E.128") for o in ops), (k, suf, ops)
    cache = built[("cache.cu", cc)]["sass"]
    for form in gmem.L2_FORMS:
        for loads in gmem.L2_LOADS:
            for ilp in gmem.L2_ILPS:
                name = gmem.l2_kernel(form, loads, ilp)
                body = max(_loop_bodies(cache[name]),
                           key=lambda b: sum(1 for o in b if o.startswith("LDG.E")))
                ldg = [o for o in body if o.startswith("LDG.E")]
                # 16-byte loads on the path asked for: L2 only (.cg), or the read-only path
                # without allocating in L1 (.nc.L1::no_allocate)
                want = "STRONG.GPU" if loads == "cg" else "NA.128.CONSTANT"
                assert len(ldg) >= ilp and all(".128" in o and want in o for o in ldg), \
                    (name, Counter(body))
                # several loads in flight: issued before the first use of one
                first_use = next(i for i, o in enumerate(body) if o.startswith(("LOP3", "STG")))
                assert sum(1 for o in body[:first_use] if o.startswith("LDG")) >= 3, \
                    (name, body)
                if form == "copy":
                    assert sum(1 for o in body if o.startswith("STG.E.128")) == len(ldg), body
    smem_body, _ = _hot_loop(cache["smem_read"], "LDS")
    assert sum(1 for o in smem_body if o == "LDS.128") >= gmem.SMEM_UNROLL, Counter(smem_body)


@needs_toolchain
@pytest.mark.parametrize("cc", ARCHS, ids=lambda c: f"sm_{c[0]}{c[1]}")
def test_ert_keeps_its_fmas(built, cc):
    sass = built[("ert.cu", cc)]["sass"]
    assert not any(o.startswith("FFMA") for _, o, _ in sass["ert_fp32_k0"])
    for kernel, fam in (("ert_fp32_k1024", "FFMA"), ("ert_fp64_k1024", "DFMA"),
                        ("ert_fp16x2_k1024", "HFMA2"), ("ert_bf16x2_k1024", "HFMA2")):
        body, share = _hot_loop(sass[kernel], fam)
        assert share >= 0.9, (kernel, share, Counter(body))
    # K FMAs per element survive: k8 (4 lanes/thread, 2x unrolled grid loop) has >= 8x4 FFMA.
    ffma8 = sum(1 for _, o, _ in sass["ert_fp32_k8"] if o.startswith("FFMA"))
    assert ffma8 >= 8 * 4, ffma8
    # ...each element through a chain of exactly K dependent FMAs (a count alone is kept by
    # half the chain in a loop unrolled twice as far)
    for k in (1, 2, 4, 8, 16):
        for prec, fam in (("fp32", "FFMA"), ("fp64", "DFMA")):
            if f"ert_{prec}_k{k}" in sass:
                assert _fma_chain(sass[f"ert_{prec}_k{k}"], fam) == k, (prec, k)


def _fma_chain(insns: list[tuple[int, str, str]], family: str) -> int:
    """The longest chain of ``family`` instructions each reading the previous one's result,
    in program order (a register written by anything else starts over; a 64/128-bit load
    writes 2/4 registers)."""
    depth: dict[str, int] = {}
    best = 0
    for _, op, ops in insns:
        regs = [o.strip().split(".")[0] for o in ops.split(",")]
        if op.split(".")[0] != family:
            if regs and re.fullmatch(r"R\d+", regs[0]):
                width = 4 if ".128" in op else 2 if ".64" in op else 1
                for i in range(width):
                    depth.pop(f"R{int(regs[0][1:]) + i}", None)
            continue
        d = 1 + max([depth.get(r, 0) for r in regs[1:]] + [0])
        depth[regs[0]] = d
        best = max(best, d)
    return best


def test_nvrtc_compiles_every_probe_without_includes():
    """CuPy compiles these with NVRTC: they must need no header and no include path. The one
    exception, wgmma.cu (built for sm_90a through cuda_driver.compile_cubin), includes the
    kernels' hopper_ops.cuh, which compile_cubin inlines first: compiled here as it does."""
    lib = _nvrtc_lib()
    if lib is None:
        pytest.skip("pip NVRTC missing: pip install -e '.[cudatools]'")
    nv = ctypes.CDLL(str(lib))
    for src in SOURCES:
        prog = ctypes.c_void_p()
        raw = (CUDA_DIR / src).read_text()
        assert ("#include" in raw) == (src == "wgmma.cu"), src
        text = (expand_includes(raw) if src == "wgmma.cu" else raw).encode()
        assert b"#include" not in text
        assert nv.nvrtcCreateProgram(ctypes.byref(prog), text, src.encode(), 0, None, None) == 0
        opts = [b"--gpu-architecture=sm_90", b"-std=c++17"]
        rc = nv.nvrtcCompileProgram(prog, len(opts), (ctypes.c_char_p * len(opts))(*opts))
        size = ctypes.c_size_t()
        nv.nvrtcGetProgramLogSize(prog, ctypes.byref(size))
        log = ctypes.create_string_buffer(size.value)
        nv.nvrtcGetProgramLog(prog, log)
        nv.nvrtcDestroyProgram(ctypes.byref(prog))
        assert rc == 0, f"NVRTC {src}: {log.value.decode(errors='replace')}"


# ---- pure functions ------------------------------------------------------------------------

def _cr(block, bps, rate, cv=0.01):
    return pr.ConfigResult(block, bps, 132 * bps, 1.0 / rate, rate, cv, 10)


def test_pick_best_config():
    rs = [_cr(256, 8, 3.0e12), _cr(512, 4, 4.2e12), _cr(1024, 2, 4.0e12)]
    assert pr.pick_best_config(rs).block == 512
    # Within 0.5%: the steadier wins, then the smaller launch.
    tie = [_cr(256, 8, 4.2e12, cv=0.03), _cr(512, 4, 4.19e12, cv=0.002)]
    assert pr.pick_best_config(tie).block == 512
    same = [_cr(1024, 4, 4.2e12), _cr(256, 4, 4.2e12)]
    assert pr.pick_best_config(same).block == 256
    with pytest.raises(ValueError):
        pr.pick_best_config([])


def test_roof_from_samples_uses_the_median():
    v, st = pr.roof_from_samples([2.0, 1.0, 4.0, 1.0, 1.0], work=8.0)
    assert v == 8.0 and st["median_s"] == 1.0 and st["rate_at_best_sample"] == 8.0
    assert st["n"] == 5 and st["cv"] > 0
    with pytest.raises(ValueError):
        pr.roof_from_samples([], 1.0)
    with pytest.raises(ValueError):
        pr.roof_from_samples([0.0, float("nan")], 1.0)


def test_knee_from_curve():
    bw, peak = 4e12, 60e12
    curve = [[ai, min(peak, bw * ai) * 0.95] for ai in (0.25, 0.5, 1, 2, 4, 8, 16, 32, 64, 128)]
    k = gm.knee_from_curve(curve)
    assert k["knee_ai"] == pytest.approx(peak / bw)
    assert k["bandwidth"] == pytest.approx(0.95 * bw)
    assert k["ai_at_90pct_peak"] == 16
    assert gm.knee_from_curve([[1, 1e12]]) is None


def test_accounting_helpers():
    assert gmem.stream_bytes("triad", 10, 4) == 120 and gmem.stream_bytes("read", 10, 8) == 80
    assert gm.ert_ai(1, 4) == 0.25 and gm.ert_ai(1024, 2) == 512 and gm.ert_ai(0, 8) == 0
    assert gm.fma_flops(100, 2, packed=False) == 100 * 2 * gm.FMA_UNROLL * gm.FMA_CHAINS * 2
    assert gm.mma_flops(1, 1, 16) == gm.MMA_ACC * 4096
    assert pr.scale_iters(64, 0.001, 0.01) == 640
    assert pr.scale_iters(64, 0.0, 0.01) == 64 * 16
    assert gm.pack2(1.0, "fp16") == 0x3C003C00 and gm.pack2(1.0, "bf16") == 0x3F803F80
    assert len(gmem.bandwidth_configs(True)) < len(gmem.bandwidth_configs(False))
    assert tuple([0] + [2 ** i for i in range(11)]) == gm.ERT_FMAS
    ert = (CUDA_DIR / "ert.cu").read_text()
    assert tuple(int(k) for k in re.findall(r"^ERT_KERNELS\((\d+)\)", ert, re.M)) == gm.ERT_FMAS


# ---- the whole orchestration on a fake GPU with planted rates ---------------------------------

PLANT = {"hbm": 4.0e12, "l2": 10.0e12, "l2_far": 9.6e12, "smem": 30.0e12, "fp64": 33.0e12,
         "fp32": 66.0e12,
         "fp16": 130.0e12, "bf16": 128.0e12, "mma": 600.0e12, "gemm": 790.0e12,
         "torch_gemm": 800.0e12, "copy": 3.9e12, "wgmma": 700.0e12, "wgmma_fp8": 1300.0e12}


class _Arr:
    def __init__(self, n: int, kind: str) -> None:
        self.n, self.kind = n, kind


class FakeGpu:
    """Records launches; a planted model turns each launch into seconds."""

    name, sm_count, cc, l2_bytes, free_bytes, index = "NVIDIA H200", 132, (9, 0), \
        50 * gd.MiB, 100 * gd.GiB, 0

    def __init__(self, no_torch: bool = True, copy_rate: float = PLANT["copy"],
                 torch_gemm: bool = True, torch_triad_rate: float | None = None,
                 torch_fp8: bool = False) -> None:
        self.torch_fp8 = torch_fp8  # torch._scaled_mm present
        self.copy_rate = copy_rate
        self.launches: list[tuple] = []
        self.no_torch = no_torch  # no torch copy/add/triad references
        self.torch_gemm = torch_gemm  # torch.matmul present (never torch._scaled_mm)
        self.torch_triad_rate = torch_triad_rate
        self.compiled: list[str] = []

    def compile(self, source: str, name: str) -> str:
        assert "extern \"C\"" in source
        self.compiled.append(name)
        return name

    def compile_native(self, source: str, name: str, arch: str) -> str:
        assert "extern \"C\"" in source and arch == "sm_90a" and self.cc == (9, 0)
        self.compiled.append(name)
        return name

    def kernel(self, module: str, name: str):
        def launch(grid, block, args):
            self.launches.append((name, grid[0], block[0], args))
        return launch

    def random(self, n, kind):
        return _Arr(n, kind)

    def empty(self, n, kind):
        return _Arr(n, kind)

    def upload(self, arr):
        assert arr.dtype == np.uint32 and arr.size in (32 * 6, gm.WGMMA_IN_WORDS)
        if arr.size == gm.WGMMA_IN_WORDS:  # operand tiles hold data, no zero words
            assert arr.all()
        return _Arr(arr.size, "u32")

    def to_host(self, arr, count):
        return None

    def memcpy(self, dst, src, nbytes):
        self.launches.append(("memcpy", 0, 0, (nbytes,)))

    def seconds(self, launch: tuple) -> float:
        name, grid, block, args = launch
        if name == "memcpy":
            return 2 * args[0] / self.copy_rate
        if name.startswith("lib_"):  # a library's add / triad: 3 arrays moved
            _, lib, op, nbytes = name.split("_")
            rate = self.torch_triad_rate if op == "triad" and self.torch_triad_rate \
                else self.copy_rate
            return 3 * int(nbytes) / rate
        if name == "gemm":
            rate = PLANT["torch_gemm"] if args[2] == "torch" else PLANT["gemm"]
            rate *= 1.6 if args[0] == "fp8_tc" else 1.0
            return 2 * args[1] ** 3 / rate
        if name.startswith("wgmma_"):
            kdim = 32 if name.endswith("e4m3") else 16
            rate = PLANT["wgmma_fp8"] if kdim == 32 else PLANT["wgmma"]
            eff = 1.0 if block == 384 else 0.95  # 3 warpgroups per SM win
            return gm.wgmma_flops(grid, block, int(args[1]), kdim) / (rate * eff)
        if name.startswith("stream_"):
            k, suf = name.split("_")[1:]
            eff = 1.0 if (block, grid // self.sm_count) == (512, 4) else 0.9
            return gmem.stream_bytes(k, args[-1], 4 if suf == "f32" else 8) / (PLANT["hbm"] * eff)
        if name.startswith("l2_"):
            _, form, loads, ilp = name.split("_")
            copy = form == "copy"
            chunk, nchunks = (int(args[2]), int(args[3])) if copy else (int(args[1]),
                                                                         int(args[2]))
            ws = chunk * nchunks * 16 * (2 if copy else 1)
            bw = (PLANT["l2"] if ws <= self.l2_bytes // 2 else PLANT["l2_far"]
                  if ws <= self.l2_bytes else PLANT["hbm"])
            # the planted best launch: read-only path, 8 loads in flight, blocks of 512
            eff = 1.0 if (loads, ilp, block) == ("na", "ilp8", 512) else 0.9
            eff *= 0.95 if copy else 1.0
            return grid * chunk * 16 * (2 if copy else 1) / (bw * eff)
        if name == "smem_read":
            return grid * block * int(args[0]) * gmem.SMEM_UNROLL * 16 / PLANT["smem"]
        if name.startswith("fma_"):
            prec = {"fma_fp64": "fp64", "fma_fp32": "fp32", "fma_fp16x2": "fp16",
                    "fma_bf16x2": "bf16"}[name]
            return gm.fma_flops(grid * block, int(args[2]), "x2" in name) / PLANT[prec]
        if name.startswith("mma_"):
            kdim = {"mma_fp16": 16, "mma_bf16": 16, "mma_tf32": 8}[name]
            return gm.mma_flops(grid * block // 32, int(args[1]), kdim) / PLANT["mma"]
        if name.startswith("ert_"):
            _, suf, k = name.split("_")
            fmas = int(k[1:])
            esz = {"fp64": 8, "fp32": 4, "fp16x2": 2, "bf16x2": 2}[suf]
            n = int(args[2])
            elems = n * 2 if esz == 2 else n
            prec = {"fp64": "fp64", "fp32": "fp32", "fp16x2": "fp16", "bf16x2": "bf16"}[suf]
            return max(2 * elems * esz / PLANT["hbm"], 2 * fmas * elems / PLANT[prec])
        raise AssertionError(name)

    def trial_seconds(self, fn):
        fn()
        return self.seconds(self.launches[-1])

    def busy_snapshot(self, fn, repeats):
        fn()
        return {"sm_clock_mhz": 1980, "throttled": False}

    def library_gemm(self, precision, n, lib):
        if lib == "torch" and ((precision == "fp8_tc" and not self.torch_fp8)
                               or not self.torch_gemm):
            raise gd.ProbeUnavailable("PyTorch is not importable (ModuleNotFoundError)")
        assert lib in gm.GEMM_LIBS[precision]
        return (lambda: self.launches.append(("gemm", 0, 0, (precision, n, lib)))), {
            "library": f"fake.{lib}.matmul (cuBLAS)"}

    def library_stream(self, lib, op, nbytes):
        if lib == "torch" and self.no_torch:
            raise gd.ProbeUnavailable("PyTorch is not importable (ModuleNotFoundError)")
        if op == "copy":
            return lambda: self.memcpy(None, None, nbytes)
        if lib == "cupy" and op == "triad":
            raise gd.ProbeUnavailable("no CuPy triad")
        return lambda: self.launches.append((f"lib_{lib}_{op}_{nbytes}", 0, 0, ()))

    def release(self):
        pass


def _fake_time_fn(gpu: FakeGpu):
    def time_fn(fn, search=False):
        fn()
        t = gpu.seconds(gpu.launches[-1])
        samples = [t * 1.01, t, t * 0.99, t, t]
        return SimpleNamespace(samples=samples, summary=lambda: {"stopped_by": "noise",
                                                                 "flags": []})
    return time_fn


@pytest.fixture(scope="module")
def fake_run() -> tuple[RoofSet, FakeGpu]:
    gpu = FakeGpu()
    seen: list[str] = []
    rs = gp.measure_gpu_roofs(_fake_time_fn(gpu), quick=True, progress=seen.append, gpu=gpu)
    assert seen, "progress was never reported"
    return rs, gpu


def test_fake_run_roofs_equal_planted_rates(fake_run):
    rs, gpu = fake_run
    assert rs.device == "NVIDIA H200"
    # HBM: the best STREAM config (512 x 4 blocks/SM) reaches the planted rate, and it beats
    # the library copy (else the copy would be the roof); the ratio to the copy is recorded.
    hbm = rs.memory("dram", "measured")
    assert hbm.value == pytest.approx(PLANT["hbm"])
    assert hbm.evidence["config"] == {"block": 512, "blocks_per_sm": 4, "grid": 132 * 4}
    assert rs.info["stream"]["triad_fp32"]["config"]["block"] == 512
    assert rs.info["probe_library_ratio"]["triad_fp32/cupy_copy"] == pytest.approx(4.0 / 3.9)
    assert rs.info["probe_library_ratio"]["hbm_roof/best_library"] == pytest.approx(4.0 / 3.9)
    assert rs.info["reference_copies"]["torch_copy"]["unavailable"].startswith("PyTorch")
    assert rs.info["reference_copies"]["cupy_add"]["bytes_per_s"] == pytest.approx(3.9e12)
    assert rs.memory("l2", "measured").value == pytest.approx(PLANT["l2"])
    assert rs.memory("smem", "measured").value == pytest.approx(PLANT["smem"])
    for prec in ("fp64", "fp32", "fp16", "bf16"):
        r = rs.compute(prec, "measured")
        assert r.value == pytest.approx(PLANT[prec]), prec
        # Beside SMs x lanes x 2 x the clock read during the probe.
        lanes = {"fp64": 64, "fp32": 128, "fp16": 256, "bf16": 256}[prec]
        assert r.evidence["sm_x_lanes_x2_x_clock"] == pytest.approx(132 * lanes * 2 * 1980e6)
    fp32 = rs.compute("fp32", "measured").evidence
    assert fp32["fraction_of_clock_peak"] == pytest.approx(66.0e12 / (132 * 128 * 2 * 1.98e9))


def test_fake_run_tensor_ceilings_kept_apart(fake_run):
    rs, _ = fake_run
    by = {(r.precision, r.evidence.get("ceiling")): r for r in rs.roofs if r.source == "measured"
          and r.kind == "compute"}
    assert by[("bf16_tc", "mma.sync")].value == pytest.approx(PLANT["mma"])
    assert "wgmma" in by[("bf16_tc", "mma.sync")].evidence["note"]  # Hopper: says so
    assert by[("bf16_tc", "library")].value == pytest.approx(PLANT["torch_gemm"])
    assert rs.compute("bf16_tc").value == pytest.approx(PLANT["torch_gemm"])  # the highest
    # fp16: the best of cuBLAS through CuPy and torch.matmul, both kept as evidence
    fp16 = by[("fp16_tc", "library")]
    assert fp16.value == pytest.approx(PLANT["torch_gemm"])
    assert fp16.evidence["libraries"]["cupy"]["flop_per_s"] == pytest.approx(PLANT["gemm"])
    # Hopper: the hand-written wgmma ceilings, FP8 included (it replaces FP8 mma.sync)
    for prec, plant in (("fp16_tc", "wgmma"), ("bf16_tc", "wgmma"), ("fp8_tc", "wgmma_fp8")):
        w = by[(prec, "wgmma")]
        assert w.value == pytest.approx(PLANT[plant]), prec
        assert w.evidence["config"]["block"] == 384  # the config search picked 3 warpgroups
    assert rs.compute("fp8_tc").value == pytest.approx(PLANT["wgmma_fp8"])
    assert ("fp8_tc", "mma.sync") not in by  # no native FP8 mma.sync on sm_90
    assert ("fp8_tc", "library") not in by
    failed = {f.probe: f.reason for f in rs.failed_probes}
    assert "mma_fp8_tc" not in failed  # not attempted on Hopper: replaced, not failed
    assert "PyTorch" in failed["gemm_fp8_tc"]
    assert set(failed) == {"gemm_fp8_tc"}  # everything else was measured


def test_fake_run_ert_curves_and_knee(fake_run):
    rs, _ = fake_run
    curves = rs.info["ert_curves"]
    assert set(curves) == {"fp64", "fp32", "fp16", "bf16"}
    assert len(curves["fp32"]) == len(gm.ERT_FMAS) - 1  # K = 0 has no FLOPs: kept apart
    for prec in curves:
        e = rs.info["ert"][prec]
        assert e["measured_ridge"] == pytest.approx(PLANT[prec] / PLANT["hbm"], rel=1e-6)
        assert e["computed_ridge"] == pytest.approx(PLANT[prec] / PLANT["hbm"], rel=1e-6)
        assert e["bandwidth_at_0_fma"] == pytest.approx(PLANT["hbm"])
        for ai, f in curves[prec]:
            assert f <= min(PLANT[prec], PLANT["hbm"] * ai) * (1 + 1e-9)


def test_fake_run_datasheet_and_theoretical_beside(fake_run):
    rs, gpu = fake_run
    assert rs.datasheet.entry == "h200-sxm"
    assert rs.memory("dram", "datasheet").value == pytest.approx(4.8e12)
    assert rs.compute("bf16_tc", "datasheet").value == pytest.approx(989e12)
    assert set(gpu.compiled) == set(SOURCES)  # each source compiled once
    assert rs.elapsed_s >= 0
    rows = {(r["kind"], r["key"]): r for r in side_by_side(rs)}
    assert rows[("memory", "dram")]["measured_over_datasheet"] == pytest.approx(4.0 / 4.8)


def test_library_copy_faster_than_probes_becomes_the_roof():
    gpu = FakeGpu(no_torch=False, copy_rate=4.4e12)
    rs = gp.measure_gpu_roofs(_fake_time_fn(gpu), quick=True, gpu=gpu)
    hbm = rs.memory("dram", "measured")
    assert hbm.value == pytest.approx(4.4e12) and hbm.evidence["probe"] == "cupy copy"
    assert rs.info["probe_library_ratio"]["triad_fp32/torch_copy"] == pytest.approx(4.0 / 4.4)
    assert rs.info["probe_library_ratio"]["hbm_roof/best_library"] == pytest.approx(1.0)


def test_torch_triad_faster_than_everything_becomes_the_roof():
    gpu = FakeGpu(no_torch=False, torch_triad_rate=4.25e12)
    rs = gp.measure_gpu_roofs(_fake_time_fn(gpu), quick=True, gpu=gpu)
    hbm = rs.memory("dram", "measured")
    assert hbm.value == pytest.approx(4.25e12) and hbm.evidence["probe"] == "torch triad"
    refs = rs.info["reference_copies"]
    assert set(refs) == {f"{lib}_{op}" for lib, op in gmem.LIBRARY_STREAMS}
    assert hbm.evidence["library_references"]["torch_triad"] == pytest.approx(4.25e12)
    assert rs.info["probe_library_ratio"]["triad_fp32/torch_triad"] == pytest.approx(4.0 / 4.25)


def test_no_torch_no_bf16_library_roof_but_wgmma_still_measured():
    gpu = FakeGpu(torch_gemm=False)
    rs = gp.measure_gpu_roofs(_fake_time_fn(gpu), quick=True, gpu=gpu)
    failed = {f.probe: f.reason for f in rs.failed_probes}
    assert "PyTorch" in failed["gemm_bf16_tc"]  # CuPy has no bf16 GEMM: torch only
    fp16 = rs.compute("fp16_tc", "measured")
    assert fp16.value == pytest.approx(PLANT["gemm"])  # cuBLAS via CuPy alone
    assert fp16.evidence["libraries"]["torch"]["unavailable"].startswith("PyTorch")
    assert rs.compute("bf16_tc").value == pytest.approx(PLANT["wgmma"])


def test_sustained_rate():
    # a run of 5 samples at 0.5 s is sustained; one lucky 0.1 s sample is not
    assert pr.sustained_rate([1, 1, 1, 1, 1, 0.5, 0.5, 0.5, 0.5, 0.5, 2], 1.0) == 2.0
    assert pr.sustained_rate([1, 1, 0.1, 1, 1, 1], 1.0) == 1.0
    assert pr.sustained_rate([2.0, 4.0], 8.0) == pytest.approx(8.0 / 3.0)  # fewer: median
    # a slow tail (throttling, a neighbour) does not drag the roof down as a median would
    slow_tail = [1.0] * 6 + [3.0] * 10
    assert pr.sustained_rate(slow_tail, 1.0) == 1.0
    assert pr.roof_from_samples(slow_tail, 1.0)[0] == pytest.approx(1 / 3.0)
    with pytest.raises(ValueError):
        pr.sustained_rate([], 1.0)
    with pytest.raises(ValueError):
        pr.sustained_rate([1.0, float("nan")], 1.0)


def test_failing_probe_is_recorded_and_others_go_on():
    gpu = FakeGpu()

    def broken(module, name):
        if name.startswith("smem"):
            raise MemoryError("out of memory allocating 1 GiB")
        return FakeGpu.kernel(gpu, module, name)
    gpu.kernel = broken  # type: ignore[method-assign]
    gpu.cc, gpu.sm_count = (8, 0), 108  # A100: no FP8 at all
    gpu.name = "NVIDIA A100-SXM4-80GB"
    rs = gp.measure_gpu_roofs(_fake_time_fn(gpu), quick=True, gpu=gpu)
    failed = {f.probe: f.reason for f in rs.failed_probes}
    assert failed["smem"].startswith("MemoryError: out of memory")
    assert "sm_89" in failed["mma_fp8_tc"] and "sm_89" in failed["gemm_fp8_tc"]
    assert rs.memory("smem", "measured") is None
    assert rs.memory("dram", "measured") is not None
    assert rs.compute("fp32", "measured").evidence["lanes_per_sm"] == 64  # GA100
    assert rs.datasheet.entry == "a100-sxm-80gb"


def test_calibration_budget_stops_starting_probes_and_says_so(monkeypatch):
    gpu = FakeGpu()
    clock = [0.0]

    def tick() -> float:  # every probe "takes" 10 s of a fake wall clock
        return clock[0]

    def slow(module, name, _orig=FakeGpu.kernel):
        clock[0] += 10.0
        return _orig(gpu, module, name)

    gpu.kernel = slow  # type: ignore[method-assign]
    monkeypatch.setattr(gp.time, "perf_counter", tick)
    rs = gp.measure_gpu_roofs(_fake_time_fn(gpu), quick=True, gpu=gpu, budget_s=25.0)
    skipped = [f.probe for f in rs.failed_probes if "calibration budget of 25 s" in f.reason]
    assert skipped and "hbm" not in skipped  # what the roofline needs most runs first
    assert rs.memory("dram", "measured") is not None
    assert any(p.startswith("ert_") for p in skipped)  # the curves come last
    full = gp.measure_gpu_roofs(_fake_time_fn(FakeGpu()), quick=True, gpu=FakeGpu(),
                                budget_s=1e9)
    assert not [f for f in full.failed_probes if "calibration budget" in f.reason]


# ---- calibrated files -------------------------------------------------------------------------

def _small_set() -> RoofSet:
    return RoofSet("NVIDIA H200", [
        Roof("HBM (stream triad fp32)", "memory", 4.3e12, "measured", level="dram",
             evidence={"probe": "stream triad", "samples": [np.float64(1e-3)]}),
        Roof("FP32 FMA", "compute", 6.3e13, "measured", precision="fp32"),
        Roof("HBM (H200 SXM datasheet)", "memory", 4.8e12, "datasheet", level="dram"),
    ], info={"ert_curves": {"fp32": [[0.25, 1e12], [256.0, 6e13]]}})


def test_calibrated_round_trip(tmp_path):
    p = save_calibrated(_small_set(), tmp_path / "nvidia-h200.json")
    d = json.loads(p.read_text())
    assert d["schema"] == SCHEMA and d["slug"] == "nvidia-h200"
    assert d["table"][0]["measured_over_datasheet"] == pytest.approx(4.3 / 4.8)
    rs = load_roofs(p, require_schema=True)
    assert rs.memory("dram").value == 4.3e12  # measured picked over datasheet
    assert rs.memory("dram", "datasheet").value == 4.8e12
    assert rs.info["ert_curves"]["fp32"][1] == [256.0, 6e13]
    assert not list(tmp_path.glob(".*.tmp"))  # atomic: no temp file left behind
    # The same file is a plain RoofSet for any reader (the runner's --roofs loader too).
    assert read_roofset(d).device == "NVIDIA H200"


@pytest.mark.parametrize("content,what", [
    ("{not json", "corrupt"),
    ('{"schema": "other/9", "device": "x", "roofs": []}', "wrong schema"),
    ('{"device": "x", "roofs": [{"name": "a"}]}', "wrong schema"),  # no schema tag
    (f'{{"schema": "{SCHEMA}", "device": "x", "roofs": [{{"name": "a", "kind": "memory", '
     '"value": -1, "source": "measured", "level": "dram"}]}', "invalid roofs"),
    (f'{{"schema": "{SCHEMA}", "device": "x", "roofs": []}}', "no roofs"),
    ("[1, 2]", "not a calibrated"),
])
def test_corrupt_calibrated_file_is_refused_by_name(tmp_path, content, what):
    p = tmp_path / "nvidia-h200.json"
    p.write_text(content)
    with pytest.raises(RoofsFileError) as ei:
        load_roofs(p, require_schema=True)
    msg = str(ei.value)
    assert str(p) in msg and what in msg and "--recalibrate" in msg


def test_lenient_load_takes_bare_roof_sets_and_results(tmp_path):
    bare = tmp_path / "bare.json"
    bare.write_text(json.dumps(_small_set().to_dict(), default=float))
    assert load_roofs(bare).device == "NVIDIA H200"
    with pytest.raises(RoofsFileError, match="wrong schema"):
        load_roofs(bare, require_schema=True)  # the calibrated cache itself must carry its schema
    run = tmp_path / "results.json"
    run.write_text(json.dumps({"schema": "roofbench.results/1", "cases": [],
                               "roofs": _small_set().to_dict()}, default=float))
    assert load_roofs(run).memory("dram").value == 4.3e12


def test_obtain_roofs_reuses_and_refuses(tmp_path):
    from roofbench.bench.errors import UserError
    from roofbench.bench.measure.roof_source import obtain_roofs

    calls = []

    class Gpu:
        kind = "gpu"

        def device_name(self):
            return "NVIDIA H200"

        def measure_roofs(self, quick=False, progress=None, checkpoint=None):
            calls.append(quick)
            return _small_set()

    f = tmp_path / "h200.json"
    rs = obtain_roofs(Gpu(), cache=f, quick=True)  # absent: measured and saved
    assert calls == [True] and f.exists() and rs.info["calibrated_file"] == str(f)
    obtain_roofs(Gpu(), cache=f)  # present: reused
    assert calls == [True]
    obtain_roofs(Gpu(), cache=f, recalibrate=True)
    assert calls == [True, False]
    f.write_text("{truncated")
    with pytest.raises(UserError, match="--recalibrate"):
        obtain_roofs(Gpu(), cache=f)
    other = tmp_path / "a100.json"
    save_calibrated(RoofSet("NVIDIA A100-SXM4-80GB", _small_set().roofs), other)
    with pytest.raises(UserError, match="A100"):
        obtain_roofs(Gpu(), cache=other)

    class Cpu(Gpu):
        kind = "cpu"
    obtain_roofs(Cpu(), quick=True)
    obtain_roofs(Cpu(), quick=True)
    assert calls == [True, False, True, True]  # the CPU measures every time


# ---- the command line -------------------------------------------------------------------------

def _cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "roofbench.bench.cli", *args],
                          capture_output=True, text=True, timeout=patience(120), cwd=REPO)


def _has_gpu() -> bool:
    from roofbench.bench.backends import base as backends
    return backends.unavailable_reason("cuda") is None


def test_calibrate_without_gpu_is_one_line_exit_2():
    if _has_gpu():
        pytest.skip("a CUDA GPU is present")
    p = _cli("calibrate", "--backend", "cuda", "--quick")  # (auto calibrates the CPU)
    assert p.returncode == 2
    lines = p.stderr.strip().splitlines()
    assert len(lines) == 1 and "no CUDA GPU" in lines[0], p.stderr
    assert "Traceback" not in p.stderr and p.stdout == ""


def test_specs(tmp_path):
    p = _cli("specs", "h100-pcie")
    assert p.returncode == 0 and "H100 PCIe" in p.stdout and "1513" in p.stdout
    assert "H200" not in p.stdout
    assert "h100-pcie: source: NVIDIA H100 Tensor Core GPU Datasheet (2023" in p.stdout
    p = _cli("specs")
    assert p.returncode == 0 and all(n in p.stdout for n in ("MI300X", "L40S", "RTX 4090"))
    p = _cli("specs", "V100")
    assert p.returncode == 2 and len(p.stderr.strip().splitlines()) == 1
    assert "unknown GPU 'V100'" in p.stderr and "H100 PCIe" in p.stderr


def test_roofs_compare_draws_two_devices(tmp_path):
    a = save_calibrated(_small_set(), tmp_path / "a.json")
    other = RoofSet("NVIDIA A100-SXM4-80GB", [
        Roof("HBM", "memory", 1.9e12, "measured", level="dram"),
        Roof("FP32", "compute", 1.9e13, "measured", precision="fp32")])
    b = save_calibrated(other, tmp_path / "b.json")
    out = tmp_path / "cmp.png"
    p = _cli("roofs", "--compare", str(a), str(b), "--out", str(out))
    assert p.returncode == 0, p.stderr
    assert "NVIDIA H200" in p.stdout and "A100" in p.stdout
    assert out.exists() and out.with_suffix(".svg").exists()
    bad = tmp_path / "bad.json"
    bad.write_text("{")
    p = _cli("roofs", "--compare", str(a), str(bad))
    assert p.returncode == 2 and str(bad) in p.stderr and "Traceback" not in p.stderr


def test_wgmma_operand_words_are_finite_and_nonzero():
    rng = np.random.default_rng(1)
    f16 = gm.wgmma_words("fp16_tc", rng).view(np.float16)
    assert f16.size == 2 * gm.WGMMA_IN_WORDS and ((f16 >= 0.25) & (f16 <= 0.75)).all()
    bf = gm.wgmma_words("bf16_tc", rng)
    hi = (bf >> 16).astype(np.uint32) << 16
    lo = (bf & 0xFFFF).astype(np.uint32) << 16
    for half in (hi, lo):
        v = half.view(np.float32)
        assert ((v >= 0.24) & (v <= 0.76)).all()
    import ml_dtypes

    e4m3 = gm.wgmma_words("fp8_tc", rng).view(np.uint8).view(ml_dtypes.float8_e4m3fn)
    vals = e4m3.astype(np.float32)
    assert np.isfinite(vals).all() and (vals > 0).all()


@needs_toolchain
def test_wgmma_probe_is_native_hopper(tmp_path):
    """Built for sm_90a (the target the probe uses): the loop is HGMMA / QGMMA from shared
    memory descriptors, one block of up to 3 warpgroups fits the register file, no spills."""
    arch_out = tmp_path / "wgmma.sm_90a.cubin"
    log = ct.nvcc_cubin(CUDA_DIR / "wgmma.cu", "sm_90a", arch_out, (KERNEL_HEADERS,))
    assert "spill" in log and "0 bytes spill stores" in log
    regs = [int(r) for r in re.findall(r"Used (\d+) registers", log)]
    assert len(regs) == 3 and all(128 < r <= 65536 // 384 for r in regs), regs
    sass = ct.sass_listing(arch_out)
    funcs = dict(re.findall(r"Function : (\S+)\n(.*?)(?=\n\s*Function : |\Z)", sass, re.S))
    want = {"wgmma_fp16": r"HGMMA\.64x256x16\.F32 ", "wgmma_bf16": r"HGMMA\.64x256x16\.F32\.BF16 ",
            "wgmma_fp8e4m3": r"QGMMA\.64x256x32\.F32\.E4M3\.E4M3 "}
    for name, pat in want.items():
        text = funcs[name]
        assert len(re.findall(pat, text)) >= gm.WGMMA_STEPS, name
        assert "LDL" not in text and "STL" not in text and "HMMA" not in text, name


@needs_toolchain
@pytest.mark.parametrize("cc", ARCHS, ids=lambda c: f"sm_{c[0]}{c[1]}")
def test_stream_loops_keep_several_loads_in_flight(built, cc):
    """Each trip of the main loop loads STREAM_ILP vectors of every array it reads (16 bytes
    each); on sm_89/sm_90 at least STREAM_ILP of them are issued before the trip's first
    store."""
    ilp = int(re.search(r"#define STREAM_ILP (\d+)", (CUDA_DIR / "stream.cu").read_text())[1])
    assert ilp >= 4
    sass = built[("stream.cu", cc)]["sass"]
    for k, (r, w) in gmem.STREAM_RW.items():
        if not r:
            continue
        body = max(_loop_bodies(sass[f"stream_{k}_f32"]),
                   key=lambda b: sum(1 for o in b if o.startswith("LDG.E.128")))
        loads = [o for o in body if o.startswith("LDG.E.128")]
        assert len(loads) == r * ilp, (k, Counter(body))
        if w and cc >= (8, 9):  # (ptxas for sm_80 sinks part of the batch below a store)
            first_store = next(i for i, o in enumerate(body) if o.startswith("STG"))
            ahead = sum(1 for o in body[:first_store] if o.startswith("LDG.E.128"))
            assert ahead >= ilp, (k, body)


def test_calibrate_summary_prints_the_ratios(fake_run):
    import io

    from rich.console import Console
    from roofbench.bench.present.tables import print_summary, summary_ratios

    rs, _ = fake_run
    got = {what: (v, target) for what, v, target in summary_ratios(rs)}
    assert got["HBM roof / best library copy-add-triad"] == (pytest.approx(4.0 / 3.9), 1.0)
    assert got["HBM roof / datasheet"] == (pytest.approx(4.0 / 4.8), 0.90)
    assert got["fp16 FMA / clock peak"][0] == pytest.approx(130e12 / (132 * 256 * 2 * 1.98e9))
    assert got["bf16_tc wgmma probe / library GEMM"][0] == pytest.approx(700 / 800)
    assert got["bf16_tc mma.sync probe / library GEMM"][0] == pytest.approx(600 / 800)
    assert got["fp8_tc roof / datasheet"][0] > 0  # the wgmma FP8 ceiling against the sheet
    buf = io.StringIO()
    print_summary(rs, Console(file=buf, width=200))
    text = buf.getvalue()
    assert "ratios against their targets" in text and "HBM roof / datasheet" in text
    assert "0.833" in text and "NO" in text  # 4.0 of 4.8 TB/s misses the 0.90 target


def test_probe_constants_match_their_sources():
    fma = (CUDA_DIR / "fma.cu").read_text()
    assert int(re.search(r"#define FMA_CHAINS (\d+)", fma)[1]) == gm.FMA_CHAINS
    assert int(re.search(r"#define FMA_UNROLL (\d+)", fma)[1]) == gm.FMA_UNROLL
    wg = (CUDA_DIR / "wgmma.cu").read_text()
    assert int(re.search(r"#define WGMMA_STEPS (\d+)", wg)[1]) == gm.WGMMA_STEPS
    assert gm.WGMMA_IN_WORDS == (64 * 128 + 256 * 128) // 4  # WGMMA_IN_WORDS of the source
    assert "(WGMMA_TILE_A + WGMMA_TILE_B) / 4" in wg


@needs_toolchain
@pytest.mark.parametrize("kernel", ["fma_fp16x2", "fma_bf16x2"])
def test_packed_fma_uses_both_pipes_on_hopper(built, kernel):
    """ptxas splits the packed 16-bit FMAs evenly between the FMA pipe (HFMA2) and the MMA
    pipe (HFMA2.MMA), which is how FP16x2 reaches twice the FP32 rate; the loop is nothing else
    but 3 loop-control instructions per FMA_UNROLL x FMA_CHAINS."""
    body, _ = _hot_loop(built[("fma.cu", (9, 0))]["sass"][kernel], "HFMA2")
    mma = sum(1 for o in body if o.startswith("HFMA2.MMA"))
    fma = sum(1 for o in body if o.startswith("HFMA2") and not o.startswith("HFMA2.MMA"))
    assert mma == fma == gm.FMA_UNROLL * gm.FMA_CHAINS // 2, Counter(body)
    assert len(body) - mma - fma <= 4, Counter(body)


def test_memory_probe_arrays_are_at_least_1gib_or_16x_l2():
    gpu = FakeGpu()
    for quick in (True, False):
        assert gmem.array_bytes(gpu, quick, 3) == 1 * gd.GiB  # 16 x 50 MiB < 1 GiB
    gpu.l2_bytes = 96 * gd.MiB
    assert gmem.array_bytes(gpu, True, 3) == 16 * 96 * gd.MiB
    gpu.free_bytes = 6 * gd.GiB  # capped: 3 arrays in a quarter of the free memory
    assert gmem.array_bytes(gpu, True, 3) == 6 * gd.GiB // 12 // 64 * 64
    gpu.free_bytes = 1 * gd.GiB
    with pytest.raises(gd.ProbeUnavailable, match="not enough free memory"):
        gmem.array_bytes(gpu, True, 3)


def test_wgmma_probes_without_cuda_python_fail_with_a_reason():
    gpu = FakeGpu()

    def no_driver(source, name, arch):
        raise gd.ProbeUnavailable("cuda-python is not importable (ModuleNotFoundError)")
    gpu.compile_native = no_driver  # type: ignore[method-assign]
    rs = gp.measure_gpu_roofs(_fake_time_fn(gpu), quick=True, gpu=gpu)
    failed = {f.probe: f.reason for f in rs.failed_probes}
    for prec in gm.WGMMA_KERNELS:
        assert "wgmma" in failed[f"wgmma_{prec}"] and "cuda-python" in failed[f"wgmma_{prec}"]
    assert rs.compute("fp16_tc", "measured").evidence["ceiling"] == "library"


# ---- the L2 roof: searched launch, working-set sweep, the best sustained figure ---------------

def test_l2_roof_is_the_searched_best_inside_l2_with_the_sweep_as_evidence(fake_run):
    rs, gpu = fake_run
    l2 = rs.memory("l2", "measured")
    assert l2.value == pytest.approx(PLANT["l2"])  # inside one partition, the planted best
    ev = l2.evidence
    assert (ev["config"]["loads"], ev["config"]["ilp"], ev["config"]["block"]) == ("na", 8, 512)
    assert ev["form"] == "read" and ev["probe"] == "l2_read_na_ilp8"
    assert ev["working_set_bytes"] <= gpu.l2_bytes // 2
    by = ev["best_by_working_set"]
    assert by["inside one partition"] == pytest.approx(PLANT["l2"])
    assert by["across both partitions"] == pytest.approx(PLANT["l2_far"])
    assert by["beyond L2"] == pytest.approx(PLANT["hbm"] * 1.0, rel=0.01)
    sweep = rs.info["l2_sweep"]
    assert {p["form"] for p in sweep} == {"read", "copy"}
    assert {p["where"] for p in sweep} == set(by)
    sizes = [p["working_set_bytes"] for p in sweep if p["form"] == "read"]
    assert sizes == sorted(sizes) and sizes[-1] >= 2 * gpu.l2_bytes * 0.99
    searched = rs.info["l2_search"]
    assert len(searched["read"]) == len(searched["copy"]) == (
        len(gmem.L2_LOADS) * len(gmem.L2_ILPS) * len(gmem.L2_BLOCKS))
    # every launch moved what its rate counts: whole passes over whole chunks
    for name, grid, block, args in gpu.launches:
        if name.startswith("l2_read"):
            assert grid % int(args[2]) == 0 and int(args[1]) % block == 0


@pytest.mark.parametrize("l2_kib", [256, 512, 50 * 1024])
def test_every_l2_launch_stays_inside_its_buffers(l2_kib):
    """Every L2 launch, the timed ones and ``_check_l2``'s readback included, reads and
    writes within the buffers it is given, on a device with a small L2 too (a GT 1030's
    512 KiB, a Jetson Nano's 256 KiB): the check's 1 MiB read and 2 MiB copy once ran past
    buffers sized from the L2 alone."""
    gpu = FakeGpu()
    gpu.l2_bytes = l2_kib * 1024
    gp.measure_gpu_roofs(_fake_time_fn(gpu), quick=True, gpu=gpu)
    seen = 0
    for name, _grid, _block, args in gpu.launches:
        if not name.startswith("l2_"):
            continue
        seen += 1
        copy = name.startswith("l2_copy")
        chunk, nchunks = (int(args[2]), int(args[3])) if copy else (int(args[1]), int(args[2]))
        extent = chunk * nchunks * 16  # bytes of each buffer the launch touches
        for buf in (args[0], args[1]) if copy else (args[0],):
            assert extent <= buf.n * 4, (name, extent, buf.n * 4)
    assert seen > 0


def test_l2_launch_geometry():
    la = gmem.l2_launch("read", 15 * gd.MiB, 512, 2 * gd.GiB)
    assert la.chunk_vecs * 16 == gmem.L2_CHUNK_BYTES and la.nchunks == 30
    assert la.working_set_bytes == 15 * gd.MiB and la.grid % la.nchunks == 0
    assert 2 * gd.GiB <= la.bytes_per_launch < 2 * gd.GiB + 15 * gd.MiB
    cp = gmem.l2_launch("copy", 15 * gd.MiB, 512, 2 * gd.GiB)
    assert cp.working_set_bytes == 15 * gd.MiB  # source and destination together
    assert cp.bytes_per_launch == cp.grid * cp.chunk_vecs * 32
    small = gmem.l2_launch("read", 100_000, 1024, 1 << 20)  # smaller than two chunks
    assert small.chunk_vecs % 1024 == 0 and small.chunk_vecs >= 1024 and small.nchunks >= 1


@pytest.fixture(scope="module")
def emulated_cache():
    if ct.emulation_missing():
        pytest.skip(ct.emulation_missing())
    lib = ctypes.CDLL(str(ct.build_emulation() / "cache.so"))
    lib.rb_launch.restype = ctypes.c_int
    return lib


def _emu_launch(lib, name, grid, block, ints):
    from emu_run import sysv_launch

    sysv_launch(lib, name, (grid,), (block,), ints)


@pytest.mark.parametrize("loads", gmem.L2_LOADS)
@pytest.mark.parametrize("ilp", gmem.L2_ILPS)
def test_l2_kernels_validate_under_emulation(emulated_cache, loads, ilp):
    """The L2 kernels on the CPU emulation: every thread's XOR equals the oracle's
    (l2_read_xor: chunk b % nchunks, rows of blockDim vectors), the tail rows included (11 rows
    are not a multiple of the loads in flight); the copy writes exactly its chunks."""
    rng = np.random.default_rng(ilp)
    block, rows, nchunks, grid = 64, 11, 3, 7
    la = gmem.L2Launch("read", block, rows * block, nchunks, grid)
    words = rng.integers(0, 2**32, la.chunk_vecs * nchunks * 4 + 64, dtype=np.uint64).astype(
        np.uint32)
    out = np.zeros(grid * block, np.uint32)
    _emu_launch(emulated_cache, gmem.l2_kernel("read", loads, ilp), grid, block,
                [words.ctypes.data, la.chunk_vecs, nchunks, out.ctypes.data, 1])
    want = gmem.l2_read_xor(words[:la.chunk_vecs * nchunks * 4], la)
    assert np.array_equal(out, want)
    sink = np.zeros(1, np.uint32)
    _emu_launch(emulated_cache, gmem.l2_kernel("read", loads, ilp), grid, block,
                [words.ctypes.data, la.chunk_vecs, nchunks, sink.ctypes.data, 0])
    assert sink[0] == 0  # timing mode writes nothing (no XOR hit the impossible value)
    dst = np.full_like(words, 0xDEADBEEF)
    _emu_launch(emulated_cache, gmem.l2_kernel("copy", loads, ilp), grid, block,
                [words.ctypes.data, dst.ctypes.data, la.chunk_vecs, nchunks])
    n = la.chunk_vecs * nchunks * 4
    assert np.array_equal(dst[:n], words[:n]) and (dst[n:] == 0xDEADBEEF).all()


def test_l2_oracle_catches_a_wrong_chunk_mapping():
    la = gmem.L2Launch("read", 32, 32 * 5, 3, 6)
    words = np.arange(la.chunk_vecs * 3 * 4, dtype=np.uint32) * np.uint32(2654435761)
    good = gmem.l2_read_xor(words, la)
    rolled = gmem.l2_read_xor(np.roll(words, 4 * 32), la)  # rows shifted by one
    other = gmem.l2_read_xor(words, gmem.L2Launch("read", 32, 32 * 5, 2, 6))  # wrong modulus
    assert not np.array_equal(good, rolled) and not np.array_equal(good, other[:good.size])


def test_smem_kernel_validates_under_emulation(emulated_cache):
    block, grid, reps, seed = 64, 2, 3, 0x1234567
    out = np.zeros(grid * block, np.uint32)
    _emu_launch(emulated_cache, "smem_read", grid, block, [reps, seed, out.ctypes.data])
    i = np.arange(2048, dtype=np.uint64)
    s = np.stack([(seed ^ i), (seed + i), (seed * i), (~np.uint64(seed) ^ i)], axis=1)
    s = (s & 0xFFFFFFFF).astype(np.uint32)
    mask = 2048 * 16 - 1
    want = np.zeros(block, np.uint32)
    for t in range(block):
        acc = np.uint32(0)
        off0 = (t * 16) & mask
        for r in range(reps):
            off = (off0 + r * 512) & mask
            for k in range(gmem.SMEM_UNROLL):
                acc ^= np.bitwise_xor.reduce(s[((off + k * 1024) & mask) // 16])
        want[t] = acc
    assert np.array_equal(out, np.tile(want, grid))


# ---- the calibration time model ----------------------------------------------------------------
# The real probes and the real sampling loop (timer.sample_loop) run on the fake GPU against a
# model clock: every launch costs its planted H200 time, every sample and loop the host's
# overhead, every compile and the imports what the first contact suggests. Memory-bound samples
# alternate between two modes 9% apart (275 / 300 us in results-rownorm-default.json), so their
# loops never converge and run to their budget: the worst case. Figures in docs/gpu-check.md.

MODEL = {
    "per_sample_s": 40e-6,  # record, launch, record, wait (CuPy launch + sync 11.3 us) + NVML
    "per_loop_s": 2e-3,  # events, NVML before and after, the statistics
    "startup_s": 4.0,  # interpreter, numpy, CuPy and the device, NVML, device facts
    "torch_s": 5.0,  # import torch and its CUDA context, at its first use
    "compile_s": {"stream.cu": 0.8, "cache.cu": 0.8, "fma.cu": 0.6, "mma.cu": 0.8,
                  "ert.cu": 3.0, "wgmma.cu": 2.5},  # NVRTC; wgmma.cu for sm_90a
    "bimodal": 0.043,  # half the gap between the two modes of a memory-bound kernel
    "compute_jitter": 0.003,
}
MEMORY_BOUND = ("stream_", "l2_", "lib_", "memcpy", "ert_")


class ModelGpu(FakeGpu):
    """The fake GPU whose every action advances a model clock."""

    def __init__(self, clock: list[float]) -> None:
        super().__init__(no_torch=False, torch_fp8=True)
        self.clock = clock
        self.torch_started = False

    def _spend(self, s: float) -> None:
        self.clock[0] += s

    def compile(self, source, name):
        self._spend(MODEL["compile_s"][name])
        return super().compile(source, name)

    def compile_native(self, source, name, arch):
        self._spend(MODEL["compile_s"][name])
        return super().compile_native(source, name, arch)

    def _torch(self, lib):
        if lib == "torch" and not self.torch_started:
            self.torch_started = True
            self._spend(MODEL["torch_s"])

    def trial_seconds(self, fn):
        t = super().trial_seconds(fn)
        self._spend(2 * t + 2 * MODEL["per_sample_s"])
        return t

    def busy_snapshot(self, fn, repeats):
        fn()
        self._spend(repeats * self.seconds(self.launches[-1]) + 0.02)
        return {"sm_clock_mhz": 1980, "throttled": False}

    def library_gemm(self, precision, n, lib):
        self._torch(lib)
        return super().library_gemm(precision, n, lib)

    def library_stream(self, lib, op, nbytes):
        self._torch(lib)
        return super().library_stream(lib, op, nbytes)


def _model_time_fn(gpu: ModelGpu, quick: bool):
    from roofbench.timing import probe_timers, sample_loop

    full, search_cfg = probe_timers(quick)

    def time_fn(fn, search=False):
        fn()
        launch = gpu.launches[-1]
        t = gpu.seconds(launch)
        bimodal = launch[0].startswith(MEMORY_BOUND)
        i = [0]

        def one() -> float:
            i[0] += 1
            x = t * (1 + (MODEL["bimodal"] * (-1) ** i[0] if bimodal
                          else MODEL["compute_jitter"] * np.sin(i[0])))
            gpu.clock[0] += x + MODEL["per_sample_s"]
            return x
        gpu.clock[0] += MODEL["per_loop_s"]
        return sample_loop(one, search_cfg if search else full, clock=lambda: gpu.clock[0])
    return time_fn


def _modelled_calibration(monkeypatch, quick: bool) -> tuple[RoofSet, float]:
    clock = [MODEL["startup_s"]]
    monkeypatch.setattr(gp.time, "perf_counter", lambda: clock[0])  # the budget's clock too
    gpu = ModelGpu(clock)
    rs = gp.measure_gpu_roofs(_model_time_fn(gpu, quick), quick=quick, gpu=gpu)
    return rs, clock[0]


def test_full_calibration_fits_its_step_and_reaches_the_wgmma_probes(monkeypatch):
    rs, total = _modelled_calibration(monkeypatch, quick=False)
    seconds = rs.info["probe_seconds"]
    print(f"modelled full calibration on an H200: {total:.1f} s; by probe: "
          + ", ".join(f"{p} {s:.1f}" for p, s in seconds.items()))
    assert total < 45.0
    assert not [f for f in rs.failed_probes if "calibration budget" in f.reason]
    for prec in gm.WGMMA_KERNELS:
        assert rs.compute(prec, "measured").evidence["ceiling"] in ("wgmma", "library")
        assert any(r.evidence.get("ceiling") == "wgmma" and r.precision == prec
                   for r in rs.roofs), prec
    assert rs.memory("l2", "measured") is not None and set(rs.info["ert_curves"]) == {
        "fp64", "fp32", "fp16", "bf16"}
    # the budget is no longer what ends it: it would stop at 55 s, after every probe
    assert total < gp.CALIBRATION_BUDGET_S[False]


def test_quick_calibration_model(monkeypatch):
    rs, total = _modelled_calibration(monkeypatch, quick=True)
    print(f"modelled quick calibration on an H200: {total:.1f} s")
    assert total < gp.CALIBRATION_BUDGET_S[True]
    assert not [f for f in rs.failed_probes if "calibration budget" in f.reason]


# ---- the roofs file after every probe ------------------------------------------------------------

def test_checkpoint_after_every_probe_holds_what_was_measured():
    gpu = FakeGpu()
    parts: list[RoofSet] = []
    rs = gp.measure_gpu_roofs(_fake_time_fn(gpu), quick=True, gpu=gpu, checkpoint=parts.append)
    attempted = list(rs.info["probe_seconds"])
    assert len(parts) == len(attempted)
    assert [p.info["partial"].rsplit(" ", 1)[1] for p in parts] == attempted
    measured = [len([r for r in p.roofs if r.source == "measured"]) for p in parts]
    assert measured == sorted(measured) and measured[0] >= 1  # HBM first, never fewer
    assert parts[0].memory("dram", "measured") is not None
    assert parts[0].memory("dram", "datasheet") is not None  # a complete file, partial or not
    assert "partial" not in rs.info
    assert len([r for r in rs.roofs if r.source != "measured"]) == len(
        [r for r in parts[-1].roofs if r.source != "measured"])  # references added once


KILLED_CALIBRATION = r"""
import sys, time
sys.path[:0] = [{tests!r}, {standins!r}]
import test_gpu_probes_nogpu as t
from roofbench.bench.measure import roof_source
from roofbench.roofs.probes import gpu as gp

class Backend:
    kind = "gpu"
    def device_name(self):
        return "NVIDIA H200"
    def measure_roofs(self, quick=False, progress=None, checkpoint=None):
        gpu = t.FakeGpu()
        def hang(module, name, _orig=t.FakeGpu.kernel):
            if name.startswith("l2_"):
                print("HUNG", flush=True)
                time.sleep(600)  # a probe that never returns: the step's timeout kills us
            return _orig(gpu, module, name)
        gpu.kernel = hang
        return gp.measure_gpu_roofs(t._fake_time_fn(gpu), quick=True, gpu=gpu,
                                    checkpoint=checkpoint)

roof_source.obtain_roofs(Backend(), cache={path!r}, recalibrate=True, quick=True)
"""


def test_a_killed_calibration_keeps_its_probes(tmp_path):
    path = tmp_path / "nvidia-h200.json"
    code = KILLED_CALIBRATION.format(tests=str(Path(__file__).resolve().parent),
                                     standins=str(STANDINS), path=str(path))
    p = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True,
                         cwd=REPO)
    try:
        assert p.stdout.readline().strip() == "HUNG"
    finally:
        p.kill()  # SIGKILL: nothing runs after this, the file is what the checkpoints left
        p.wait(timeout=patience(30))
    rs = load_roofs(path, require_schema=True)
    assert rs.info["partial"].endswith("wgmma_fp8_tc")  # the last probe before L2
    assert rs.memory("dram", "measured").value == pytest.approx(PLANT["hbm"])
    assert rs.compute("fp32", "measured") is not None
    assert rs.compute("fp8_tc", "measured").evidence["ceiling"] == "wgmma"
    assert rs.memory("l2", "measured") is None
    assert not list(tmp_path.glob(".*.tmp"))
