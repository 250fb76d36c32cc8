"""Inline asm checked by type in the emitted PTX: every tensor-core (mma.sync, wgmma.mma_async)
and packed-FMA (fma.rn.f16x2 / bf16x2) instruction of a kernel named <kernel>_<dtype> takes
operands of that dtype, with FP32 accumulators in f32 registers. The emulation replaces these
asm strings by C++ (it checks mma.cuh's strings itself, tests/standins/cuda_emu/emu.h
rb_emu_mma_ptx, but not those of hopper_ops.cuh or the probes): a bf16 kernel whose string
says .f16 passes every value test and returns garbage on a GPU. nvcc -ptx only (no ptxas):
the asm text lands in the PTX as written."""

from __future__ import annotations

import re
from functools import cache

import cuda_tools as ct
import pytest
from roofbench.kernels.cuda_impl import CUDA_DIR

pytestmark = pytest.mark.skipif(ct.missing_tools("nvcc") is not None,
                                reason=ct.missing_tools("nvcc") or "")

# (source, arch, kernels that must hold at least one checked instruction): the arch where each
# source's asm is compiled in (fp8 mma.sync needs sm_89+, wgmma sm_90a).
SOURCES = (
    ("gemm.cu", "sm_90", r"gemm_tensor_(fp16|bf16|fp8)"),
    ("attention.cu", "sm_90", r"attn_(flash|flash_causal|scores|pv)_(fp16|bf16)"),
    ("gemm_wgmma.cu", "sm_90a", r"gemm_wgmma_(fp16|bf16|fp8)"),
    ("mma.cu", "sm_89", r"mma_(fp16|bf16|tf32|fp8e4m3)"),
    ("wgmma.cu", "sm_90a", r"wgmma_\w+"),
    ("fma.cu", "sm_90", r"fma_(fp16x2|bf16x2)"),
    ("ert.cu", "sm_90", r"ert_(fp16x2|bf16x2)_k[1-9]\d*"),  # k0: no FMA
)
# A kernel name's dtype token -> the PTX operand type its instructions must name.
DTYPE_PTX = (("bf16", "bf16"), ("fp16", "f16"), ("fp8", "e4m3"), ("e4m3", "e4m3"),
             ("tf32", "tf32"))
_TYPES = {"f16", "bf16", "e4m3", "e5m2", "tf32", "s8", "u8", "f16x2", "bf16x2"}
_INSTR = re.compile(r"^\s*((?:mma\.sync|wgmma\.mma_async)\.\S+|fma\.rn\.(?:f16x2|bf16x2))\s+"
                    r"(.*?);", re.M | re.S)


@cache
def ptx(source: str, arch: str) -> dict[str, str]:
    """PTX body per .entry of a source compiled by the pip nvcc (kept in the test store by
    its inputs, as the cubins are: cuda_tools.nvcc_kept)."""
    src = ct._source_path(source)
    out = ct._TMP / f"{src.stem}.{arch}.ptx"
    ct.nvcc_kept(src, ("-ptx", f"-arch={arch}", "-std=c++17"), out, (CUDA_DIR,), ".ptx")
    text = out.read_text()
    parts = re.split(r"^\.(?:visible\s+)?\.entry\s+(\w+)", text, flags=re.M)
    return dict(zip(parts[1::2], parts[2::2], strict=True))


def expected_type(kernel: str) -> str | None:
    for token, ty in DTYPE_PTX:
        if token in kernel:
            return ty
    return None


def type_errors(kernel: str, body: str) -> tuple[int, list[str]]:
    """(checked instructions, what is wrong with them) in one kernel's PTX."""
    want = expected_type(kernel)
    errors, n = [], 0
    for m in _INSTR.finditer(body):
        instr, operands = m.group(1), m.group(2)
        n += 1
        mods = instr.split(".")
        types = [t.removesuffix("x2") for t in mods if t in _TYPES]
        if want is None:
            errors.append(f"{kernel}: {instr} in a kernel whose name names no dtype")
        elif not types or any(t != want for t in types):
            errors.append(f"{kernel}: {instr} takes .{'/.'.join(types)} operands, the kernel "
                          f"is {want}")
        if not instr.startswith("fma"):
            accum = re.match(r"\{([^}]*)\}", operands.strip())
            regs = accum.group(1).replace(" ", "").split(",") if accum else []
            if ".f32." not in instr or not regs or any(not r.startswith("%f") for r in regs):
                errors.append(f"{kernel}: {instr}: accumulators {regs[:4]} are not f32 "
                              "registers")
    return n, errors


@pytest.mark.parametrize("source,arch,pattern", SOURCES, ids=[s for s, _, _ in SOURCES])
def test_inline_asm_types_match_the_kernel_dtype(source, arch, pattern):
    bodies = ptx(source, arch)
    errors = []
    must = [k for k in bodies if re.fullmatch(pattern, k)]
    assert must, f"{source}: no kernel matches {pattern}: {sorted(bodies)}"
    for k, body in bodies.items():
        n, errs = type_errors(k, body)
        errors += errs
        if k in must and n == 0:
            errors.append(f"{k}: no tensor or packed-FMA instruction in its PTX")
    assert not errors, "\n".join(errors)


def test_checker_catches_a_bf16_kernel_saying_f16():
    """The check itself, on the planted instruction of issue 40 (kept beside the real PTX so a
    checker that accepts everything fails here)."""
    body = ("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%f1, %f2, %f3, %f4}, "
            "{%r1, %r2, %r3, %r4}, {%r5, %r6}, {%f1, %f2, %f3, %f4};\n")
    assert type_errors("gemm_tensor_bf16", body)[1]
    assert not type_errors("gemm_tensor_fp16", body)[1]
    assert type_errors("gemm_tensor_fp16", body.replace("{%f1", "{%r9"))[1]


def test_ptx_is_kept_by_its_inputs(monkeypatch, tmp_path):
    """nvcc -ptx once: a later session (the same source, flags and tools) reads the kept PTX
    without running nvcc."""
    import subprocess

    monkeypatch.setenv("RB_TEST_STORE", str(tmp_path / "store"))
    src = tmp_path / "src" / "k.cu"  # its folder is keyed: the outputs go elsewhere
    src.parent.mkdir()
    src.write_text('extern "C" __global__ void k(float* x) { x[0] = 1.0f; }\n')
    flags = ("-ptx", "-arch=sm_90", "-std=c++17")
    ct.nvcc_kept(src, flags, tmp_path / "a.ptx", suffix=".ptx")

    def no_nvcc(*args, **kwargs):
        raise AssertionError(f"nvcc ran again: {args}")

    monkeypatch.setattr(subprocess, "run", no_nvcc)
    ct.nvcc_kept(src, flags, tmp_path / "b.ptx", suffix=".ptx")
    assert (tmp_path / "b.ptx").read_text() == (tmp_path / "a.ptx").read_text()
    assert ".entry k" in (tmp_path / "b.ptx").read_text()
