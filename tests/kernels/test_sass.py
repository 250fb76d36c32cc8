"""The SASS proves what the sources intend (cuobjdump from the pip toolchain):
16-byte kernels move data with 128-bit loads/stores, tensor GEMMs run on tensor cores, FP8
kernels use the hardware FP8 conversions / MMA on sm_89+, and nothing touches local memory."""

from __future__ import annotations

from collections import Counter

import cuda_tools as ct
import pytest

pytestmark = pytest.mark.skipif(ct.missing_tools("nvcc", "cuobjdump") is not None,
                                reason=ct.missing_tools("nvcc", "cuobjdump") or "")

SRC = ("vector_add.cu", "l2norm.cu", "rownorm.cu", "gemm.cu", "attention.cu")
# The tensor instruction of each 16-bit storage type, modifiers and all: bf16 operands are
# HMMA.16816.F32.BF16, fp16 ones HMMA.16816.F32 (no type suffix). A bf16 kernel whose mma.sync
# says .f16 compiles to the fp16 form; an epilogue's F2FP.BF16 conversion must not count.
TENSOR = {"fp16": "HMMA.16816.F32", "bf16": "HMMA.16816.F32.BF16"}
ATTENTION_MMA = ("attn_flash", "attn_flash_causal", "attn_scores", "attn_pv")
LOW = ("fp16", "bf16", "fp8")


@pytest.fixture(scope="module")
def sass() -> dict[tuple[str, str], dict[str, Counter]]:
    ct.compile_all(list(SRC))
    return {(s, a): {k: Counter(ct.opcodes(txt)) for k, txt in ct.sass(s, a).items()}
            for s in SRC for a in ct.ARCHS}


def has(ops: Counter, prefix: str) -> int:
    return sum(n for op, n in ops.items() if op.startswith(prefix))


@pytest.mark.parametrize("arch", ct.ARCHS)
def test_no_local_memory(sass, arch):
    for s in SRC:
        for k, ops in sass[(s, arch)].items():
            assert not has(ops, "LDL") and not has(ops, "STL"), f"local memory in {k} ({arch})"


@pytest.mark.parametrize("arch", ct.ARCHS)
def test_vectorized_kernels_use_128bit_accesses(sass, arch):
    kernels = [("vector_add.cu", f"vadd_vec4_{d}") for d in ("fp32", *LOW)]
    kernels += [("l2norm.cu", f"l2_{k}_{d}") for k in ("square", "add", "sqrt", "fused")
                for d in ("fp32", *LOW)]
    kernels += [("rownorm.cu", f"rn_{k}_{d}") for k in ("fused", "onepass", "scale")
                for d in ("fp32", *LOW)]
    for s, k in kernels:
        ops = sass[(s, arch)][k]
        assert has(ops, "LDG.E.128"), f"{k} ({arch}) has no 128-bit global load"
        assert has(ops, "STG.E.128"), f"{k} ({arch}) has no 128-bit global store"
    # The scalar variant is the contrast: no vector loads.
    assert not has(sass[("vector_add.cu", arch)]["vadd_scalar_fp32"], "LDG.E.128")


@pytest.mark.parametrize("arch", ct.ARCHS)
def test_half2_math_in_fp16_vector_add(sass, arch):
    ops = sass[("vector_add.cu", arch)]["vadd_vec4_fp16"]
    assert has(ops, "HADD2") + has(ops, "HFMA2"), ops


@pytest.mark.parametrize("arch", ct.ARCHS)
def test_regblock_gemm(sass, arch):
    ops = sass[("gemm.cu", arch)]["gemm_regblock_fp32"]
    assert has(ops, "LDG.E.128"), "regblock fp32 has no float4 global loads"
    assert has(ops, "LDS.128"), "regblock fp32 reads shared memory 32 bits at a time"
    # 8 k-steps x 8 x 8 outputs, fully unrolled: the inner loop is FFMA.
    assert has(ops, "FFMA") >= 512


@pytest.mark.parametrize("arch", ct.ARCHS)
def test_tensor_gemm_uses_tensor_cores(sass, arch):
    g = sass[("gemm.cu", arch)]
    for d in ("fp16", "bf16"):
        # 2 k-steps x 4 x 4 mma per tile, every one the instruction of the dtype.
        assert tensor_ops(g[f"gemm_tensor_{d}"]) == {TENSOR[d]: 32}, g[f"gemm_tensor_{d}"]


def tensor_ops(ops: Counter) -> dict[str, int]:
    """The tensor-core instructions of a kernel (HMMA/QMMA/IMMA; HFMA2.MMA is a CUDA-core FMA
    on the MMA pipe, not one) with their counts."""
    return {op: n for op, n in ops.items() if op.startswith(("HMMA.", "QMMA.", "IMMA."))}


@pytest.mark.parametrize("arch", ct.ARCHS)
def test_attention_mma_is_the_dtypes_tensor_instruction(sass, arch):
    """Every mma.sync kernel of attention.cu runs the tensor instruction of its dtype and no
    other: the bf16 ones HMMA.16816.F32.BF16 only."""
    a = sass[("attention.cu", arch)]
    for k in ATTENTION_MMA:
        for d in ("fp16", "bf16"):
            ops = tensor_ops(a[f"{k}_{d}"])
            assert set(ops) == {TENSOR[d]}, f"{k}_{d} ({arch}): {ops}"


def test_fp8_tensor_gemm(sass):
    """sm_89 has a native FP8 mma.sync (QMMA); sm_90 runs the same PTX as FP8->FP16 conversions
    plus two HMMA per mma (Hopper's native FP8 path is wgmma, which this kernel does not use);
    sm_80 has no FP8 MMA at all (the host never launches it there: min_cc 8.9)."""
    ada = sass[("gemm.cu", "sm_89")]["gemm_tensor_fp8"]
    assert has(ada, "QMMA.16832.F32.E4M3.E4M3") == 32, ada
    hopper = sass[("gemm.cu", "sm_90")]["gemm_tensor_fp8"]
    assert has(hopper, "HMMA.16816.F32") == 64 and has(hopper, "F2FP.F16.E4M3.UNPACK_B")
    ampere = sass[("gemm.cu", "sm_80")]["gemm_tensor_fp8"]
    assert not has(ampere, "HMMA") and not has(ampere, "QMMA")


@pytest.mark.parametrize("arch", ("sm_89", "sm_90"))
def test_fp8_elementwise_uses_hardware_conversions(sass, arch):
    for s, k in (("vector_add.cu", "vadd_vec4_fp8"), ("l2norm.cu", "l2_fused_fp8"),
                 ("rownorm.cu", "rn_onepass_fp8")):
        ops = sass[(s, arch)][k]
        assert has(ops, "F2FP.F16.E4M3.UNPACK_B"), f"{k} ({arch}): no FP8 -> FP16 unpack"
        assert has(ops, "F2FP.SATFINITE.E4M3.F32.PACK_AB"), f"{k} ({arch}): no FP32 -> FP8 pack"


def test_fp8_elementwise_on_sm80_is_software(sass):
    ops = sass[("vector_add.cu", "sm_80")]["vadd_vec4_fp8"]
    assert not has(ops, "F2FP.F16.E4M3"), "sm_80 has no FP8 conversion instruction"
