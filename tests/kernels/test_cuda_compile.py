"""Every CUDA source compiles with the pip toolchain for sm_80, sm_89 and sm_90, without spills,
and through NVRTC (the compiler CuPy's RawModule uses), so the GPU path is proven to build on a
machine without a GPU. The kernel tables of the workloads name functions that exist."""

from __future__ import annotations

import cuda_tools as ct
import pytest
from roofbench.kernels.cuda_impl import ByArch, CudaKernel, sources  # noqa: E402
from roofbench.kernels.registry import workloads  # noqa: E402
from roofbench.kernels.wgmma_gemm import TmaKernel

pytestmark = pytest.mark.skipif(ct.missing_tools("nvcc", "ptxas") is not None,
                                reason=ct.missing_tools("nvcc", "ptxas") or "")

SOURCES = sources()


@pytest.fixture(scope="module")
def compiled() -> dict[tuple[str, str], ct.Compiled]:
    return {(c.source, c.arch): c for c in ct.compile_all(SOURCES)}


def test_sources_found():
    assert {"vector_add.cu", "l2norm.cu", "rownorm.cu", "gemm.cu", "attention.cu",
            "gemv.cu"} <= set(SOURCES)


@pytest.mark.parametrize("arch", ct.ARCHS)
@pytest.mark.parametrize("source", SOURCES)
def test_compiles_without_spills(compiled, source, arch):
    c = compiled[(source, arch)]
    assert c.resources, f"no kernels reported for {source} {arch}:\n{c.log}"
    bad = {k: r for k, r in c.resources.items()
           if r.spill_stores or r.spill_loads or r.stack}
    assert not bad, f"spills / stack frames in {source} {arch}: {bad}"
    assert "warning" not in c.log.lower(), c.log


def test_register_budgets(compiled):
    """Launch bounds hold: onepass runs 1024-thread blocks (<= 64 registers), the GEMMs 256
    (<= 255); the register-blocked GEMM really keeps its 8x8 tile in registers (>= 64)."""
    for arch in ct.ARCHS:
        rn = compiled[("rownorm.cu", arch)].resources
        for dt in ("fp64", "fp32", "fp16", "bf16", "fp8"):
            assert rn[f"rn_onepass_{dt}"].registers <= 64
        g = compiled[("gemm.cu", arch)].resources
        assert 64 <= g["gemm_regblock_fp32"].registers <= 255
        for dt in ("fp16", "bf16"):
            assert g[f"gemm_tensor_{dt}"].registers <= 255
        # attention: the softmax holds a row in 512-thread blocks (<= 128 registers); the
        # flash kernel keeps Q fragments, S and O (64 + 32 + 32 values at d = 128) in registers
        a = compiled[("attention.cu", arch)].resources
        for dt in ("fp16", "bf16"):
            assert a[f"attn_softmax_{dt}"].registers <= 128
            assert 128 <= a[f"attn_flash_{dt}"].registers <= 255


def test_tables_name_existing_kernels(compiled):
    """Every CUDA launch of every workload variant resolves to a compiled function for every
    dtype the variant declares (and the kernel supports)."""
    checked = 0
    for w in workloads().values():
        for v in w.variants.values():
            for launch_name, entry in (v.impls.get("cuda") or {}).items():
                # a per-arch choice: every kernel it may pick (the sm_90a one has stubs for
                # the plain archs, so its names exist there too)
                impls = entry.choices() if isinstance(entry, ByArch) else [entry]
                for impl in impls:
                    if not isinstance(impl, (CudaKernel, TmaKernel)):
                        continue
                    for dt in v.dtypes:
                        if dt not in impl.dtypes:
                            continue
                        for arch in ct.ARCHS:
                            res = compiled[(impl.source, arch)].resources
                            assert impl.name(dt) in res, (w.name, v.name, launch_name, dt, arch)
                            checked += 1
    if checked == 0:
        pytest.skip("no workload declares CUDA implementations yet")


@pytest.mark.parametrize("source", SOURCES)
def test_nvrtc_compiles(source):
    pytest.importorskip("cuda.bindings.nvrtc", reason="cuda-bindings not installed")
    if not ct.cuda_include_dirs():
        pytest.skip("no CUDA headers (cuda_fp16.h) found for NVRTC")
    for arch in ("sm_89", "sm_90"):
        ok, log, size = ct.nvrtc_compile(source, arch)
        assert ok, f"NVRTC failed for {source} {arch}:\n{log}"
        assert size > 0


def test_an_nvrtc_success_is_kept_by_what_it_compiled(monkeypatch, tmp_path):
    """A success is read back from the test store (no compile) while the expanded text and
    the options are the same; another arch compiles; a failure or a hand-edited entry is
    never taken."""
    pytest.importorskip("cuda.bindings.nvrtc", reason="cuda-bindings not installed")
    monkeypatch.setenv("RB_TEST_STORE", str(tmp_path))
    calls: list[bytes] = []
    verdict = [(True, "", 123)]

    def fake(source: str, text: bytes, opts: list[bytes]) -> tuple[bool, str, int]:
        calls.append(opts[0])
        return verdict[0]

    monkeypatch.setattr(ct, "_nvrtc_compile", fake)
    assert ct.nvrtc_compile("vector_add.cu", "sm_90") == (True, "", 123)
    assert ct.nvrtc_compile("vector_add.cu", "sm_90") == (True, "", 123)
    assert calls == [b"--gpu-architecture=sm_90"]
    verdict[0] = (False, "error: no", 0)
    assert ct.nvrtc_compile("vector_add.cu", "sm_89") == (False, "error: no", 0)
    assert ct.nvrtc_compile("vector_add.cu", "sm_89") == (False, "error: no", 0)
    assert len(calls) == 3  # the failure compiled twice
    (entry,) = (tmp_path / "nvcc").glob("*.nvrtc.json")
    entry.write_text(entry.read_text().replace("123", "124"))
    verdict[0] = (True, "", 123)
    assert ct.nvrtc_compile("vector_add.cu", "sm_90") == (True, "", 123)
    assert len(calls) == 4
