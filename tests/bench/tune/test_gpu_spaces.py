"""The GPU forms' spaces (Variant.tune["triton"] / ["cuda"]: gemm tensor's Triton GEMM, attention
flash's Triton kernel, rownorm fused in CUDA C and Triton): their rules at a size, counts the
same as the variant's for every configuration, the default configuration the variant's own
table, and the search driven over a GPU space on the simulated clock (tune_simulated.py). Each
configuration run and validated: test_gpu_spaces_run.py (interpreter, emulation)."""

from __future__ import annotations

from typing import Any

import pytest
from roofbench.bench.tune.search import tune
from roofbench.bench.tune.suite import space_of
from roofbench.kernels.registry import workloads
from roofbench.kernels.spec import Case

# (workload, variant, family, dtype, size): a size of each where every rule can bite.
SPACES = [("gemm", "tensor", "triton", "fp16", (4096, 4096, 4096)),
          ("attention", "flash", "triton", "fp32", (1, 8, 4096, 128)),
          ("attention_causal", "flash", "triton", "fp16", (1, 8, 4096, 128)),
          ("rownorm", "fused", "triton", "fp32", (64, 8192)),
          ("rownorm", "fused", "cuda", "fp16", (64, 8192))]


def _space(w: str, v: str, fam: str):
    return workloads()[w].variants[v].tune[fam]


@pytest.mark.parametrize("w,v,fam,dtype,size", SPACES)
def test_counts_are_the_variant_s_for_every_configuration(w, v, fam, dtype, size):
    wl = workloads()[w]
    base = Case(wl, wl.variants[v], dtype, size)
    sp = _space(w, v, fam)
    configs = sp.configs(size, dtype)
    assert sp.default() in configs
    for c in configs:
        got = Case(wl, wl.variants[v].configured(fam, c), dtype, size)
        assert (got.flops, got.bytes()) == (base.flops, base.bytes()), c


@pytest.mark.parametrize("w,v,fam,dtype,size", SPACES)
def test_the_default_configuration_builds_the_variant_s_own_table(w, v, fam, dtype, size):
    var = workloads()[w].variants[v]
    sp = var.tune[fam]
    assert sp.build(sp.default()) == var.impls[fam]
    other = next(c for c in sp.configs(size, dtype) if c != sp.default())
    assert sp.build(other) != var.impls[fam]


def _why(w: str, v: str, fam: str, size: Any, dtype: str, **c: Any) -> str | None:
    sp = _space(w, v, fam)
    return sp.why_excluded({**sp.default(), **c}, size, dtype)


def test_the_gemm_rules():
    big = (4096, 4096, 4096)
    # 4 stages of 128 x 128 A and B tiles, BK = 128, fp16: 256 KiB of shared memory
    assert "shared memory" in _why("gemm", "tensor", "triton", big, "fp16", BM=128, BN=128,
                                   BK=128, num_stages=4)
    assert _why("gemm", "tensor", "triton", big, "fp16", BM=128, BN=128, BK=128,
                num_stages=3) is None  # 192 KiB fits
    assert "mma tile per warp" in _why("gemm", "tensor", "triton", big, "fp16", BM=32, BN=32,
                                       num_warps=16)
    # a tile larger than the matrix runs as the least that covers it: only that one is kept
    assert "BM < M" in _why("gemm", "tensor", "triton", (40, 48, 36), "fp16", BM=128)
    assert _why("gemm", "tensor", "triton", (40, 48, 36), "fp16", BM=64) is None
    sp = _space("gemm", "tensor", "triton")
    assert len(sp.all_configs()) == 3 * 3 * 3 * 2 * 3
    assert len(sp.configs(big, "fp16")) == 160 and len(sp.configs(big, "fp32")) == 136


def test_the_flash_rules():
    big = (1, 8, 4096, 128)
    assert "mma tile per warp" in _why("attention", "flash", "triton", big, "fp16", BM=16,
                                       BN=16, num_warps=4)
    # fp32, d = 128: (3 * 2 * 128 + 128) * 128 * 4 = 448 KiB
    assert "shared memory" in _why("attention", "flash", "triton", big, "fp32", BM=128, BN=128)
    assert _why("attention", "flash", "triton", big, "fp16", BM=128, BN=64) is None
    assert "BN < N" in _why("attention", "flash", "triton", (1, 2, 37, 24), "fp32", BN=128)


def test_the_rownorm_rules():
    for fam, dtype in (("cuda", "fp16"), ("cuda", "fp32")):
        assert "multiple of 32" in _why("rownorm", "fused", fam, (8, 8192), dtype, THREADS=48)
        assert "<= 1024" in _why("rownorm", "fused", fam, (8, 8192), dtype, THREADS=2048)
    # a 300-wide fp32 row is 75 packs: 128 threads cover it, 256 would idle
    assert "packs" in _why("rownorm", "fused", "cuda", (3, 300), "fp32", THREADS=256)
    assert _why("rownorm", "fused", "cuda", (3, 300), "fp32", THREADS=128) is None
    assert "an element per lane" in _why("rownorm", "fused", "triton", (8, 8192), "fp32",
                                         BLOCK=256, num_warps=16)
    assert "BLOCK < hidden" in _why("rownorm", "fused", "triton", (3, 300), "fp32", BLOCK=1024)


def test_the_search_runs_over_a_gpu_space_on_the_simulated_clock(sim):
    """gemm's Triton space at 4096^3 fp16 as the search's Space; a simulated kernel whose
    efficiency grows with the C tile and is best at 64 x 128 x 64 with 8 warps: the
    variant's default starts, the 32-wide tiles far behind it are dropped early, the target
    stops the search, and no configuration a rule excludes is ever built."""
    wl = workloads()["gemm"]
    case = Case(wl, wl.variants["tensor"], "fp16", (4096, 4096, 4096))
    tspace = wl.variants["tensor"].tune["triton"]
    sp = space_of(tspace, case)
    assert len(sp.configs()) == 160 and len(sp.excluded()) == 2

    def eff(c: dict[str, Any]) -> float:
        if (c["BM"], c["BN"], c["BK"], c["num_warps"]) == (64, 128, 64, 8):
            return 0.93
        return 0.5 * (c["BM"] * c["BN"]) / (64 * 64) if c["BM"] * c["BN"] <= 64 * 64 else 0.6

    s = sim()
    rec = tune(s.builder(eff), sp, s.a, s.out, **s.kw(first=tspace.default()))
    tried = [t.config for t in rec.trials]
    assert tried[0] == tspace.default()
    assert rec.stop == "target" and rec.config is not None
    assert (rec.config["BM"], rec.config["BN"], rec.config["BK"]) == (64, 128, 64)
    untried = [t for t in rec.trials if t.status == "untried"]
    assert len(untried) > 50  # stopped well before trying all
    dropped = [t.config for t in rec.trials if t.status == "dropped"]
    assert dropped and all(c["BM"] * c["BN"] <= 32 * 64 for c in dropped)
    assert all(sp.why_excluded(c) is None for c in s.machine.built)
