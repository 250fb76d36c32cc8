"""The CUDA FMA probe executed under the host emulation (tests/standins/cuda_emu) and its work
counted: every fmaf / fma of the kernel code and every packed fma.rn.{f16,bf16}x2 its asm
names (emu.h rb_emu_fma_counts). The FLOPs the emulated launch executed must equal what the
roof divides by (roofs/probes/gpu_math.fma_flops): a probe that runs half the iterations it
counts would report a roof twice too high, which the SASS tests, reading only the loop body,
cannot see. The results are checked too: each thread's chains against a float64 model."""

from __future__ import annotations

import ctypes

import cuda_tools as ct
import numpy as np
import pytest
from emu_run import register, sysv_launch
from roofbench.roofs.probes import gpu_math as gm

pytestmark = pytest.mark.skipif(ct.emulation_missing() is not None,
                                reason=ct.emulation_missing() or "")

SLOT = {"fp32": 0, "fp64": 1, "fp16": 2, "bf16": 3}
GRID, BLOCK, ITERS = 2, 64, 3


@pytest.fixture(scope="module")
def fma_lib() -> ctypes.CDLL:
    out = ct._TMP / "emu_probes"
    out.mkdir(parents=True, exist_ok=True)
    so = out / "fma.so"
    ct._emu_compile(ct.PROBE_DIR / "fma.cu", so, "-O1")
    lib = ctypes.CDLL(str(so))
    lib.rb_launch.restype = ctypes.c_int
    return lib


def _bits(x: float, prec: str) -> int:
    return int(gm.pack2(x, prec))


def _run(lib: ctypes.CDLL, prec: str, iters: int) -> tuple[np.ndarray, list[int]]:
    threads = GRID * BLOCK
    if prec in ("fp16", "bf16"):
        out = np.zeros(threads, np.uint32)
        args: list = [_bits(0.999, prec), _bits(0.001, prec), iters, out]
    elif prec == "fp32":
        out = np.zeros(threads, np.float32)
        args = [np.float32(0.999), np.float32(0.001), iters, out]
    else:
        out = np.zeros(threads, np.float64)
        args = [np.float64(0.999), np.float64(0.001), iters, out]
    register(lib, {"out": out})
    sysv_launch(lib, gm.FMA_KERNELS[prec], (GRID,), (BLOCK,), args)
    counts = (ctypes.c_longlong * 4)()
    lib.rb_emu_fma_counts(counts, 4)
    return out, list(counts)


@pytest.mark.parametrize("prec", list(gm.FMA_KERNELS))
def test_fma_probe_executes_the_flops_its_roof_divides_by(fma_lib, prec):
    out, counts = _run(fma_lib, prec, ITERS)
    packed = prec in ("fp16", "bf16")
    flops_per_op = 4 if packed else 2  # an FMA; the packed forms do two
    counted = counts[SLOT[prec]] * flops_per_op
    assert counted == gm.fma_flops(GRID * BLOCK, ITERS, packed), (prec, counts)
    assert sum(counts) == counts[SLOT[prec]], f"other FMA forms executed: {counts}"
    if not packed:  # y = y a + b, FMA_UNROLL x iters times per chain, summed over the chains
        a, b = 0.999, 0.001
        t = np.arange(GRID * BLOCK)[:, None] + np.arange(gm.FMA_CHAINS)[None, :]
        y = t * 1e-7
        for _ in range(ITERS * gm.FMA_UNROLL):
            y = y * a + b
        tol = 1e-5 if prec == "fp32" else 1e-12
        np.testing.assert_allclose(out, y.sum(axis=1), rtol=tol)
    else:
        assert len(set(out.tolist())) > 1 and not (out == 0).all()


def test_fma_probe_work_scales_with_its_iterations(fma_lib):
    """Twice the iterations, twice the FMAs (the count is the loop's, not a constant)."""
    one = _run(fma_lib, "fp32", 1)[1][0]
    assert _run(fma_lib, "fp32", 2)[1][0] == 2 * one > 0
