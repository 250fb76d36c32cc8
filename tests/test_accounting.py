"""The exact accounting the issue and the book fix: FLOPs, bytes and intensity per variant."""

from __future__ import annotations

import pytest
from roofbench.kernels.registry import workloads
from roofbench.kernels.spec import Case


def case(w: str, v: str, dtype: str, size: tuple[int, ...]) -> Case:
    wl = workloads()[w]
    return Case(wl, wl.variants[v], dtype, size)


def test_vector_add_is_one_flop_per_twelve_bytes():
    c = case("vector_add", "scalar", "fp32", (1000,))
    assert c.flops == 1000
    assert c.bytes() == {"dram": 12_000}
    assert c.intensity()["dram"] == pytest.approx(1 / 12)
    assert len(c.launches()) == 1


def test_l2norm_naive_is_four_launches_three_flops_36_bytes():
    c = case("l2norm", "naive", "fp32", (1 << 20,))
    n = 1 << 20
    launches = c.launches()
    assert [la.kernel for la in launches] == ["square", "square", "add", "sqrt"]
    assert [c.launch_bytes(la)["dram"] for la in launches] == [8 * n, 8 * n, 12 * n, 8 * n]
    assert c.flops == 3 * n  # sqrt is not counted
    assert c.bytes()["dram"] == 36 * n
    assert c.intensity()["dram"] == pytest.approx(3 / 36)
    assert round(c.intensity()["dram"], 3) == 0.083


def test_l2norm_fused_is_025_and_moves_three_times_fewer_bytes():
    n = 1 << 20
    fused = case("l2norm", "fused", "fp32", (n,))
    naive = case("l2norm", "naive", "fp32", (n,))
    assert fused.flops == 3 * n
    assert fused.bytes()["dram"] == 12 * n
    assert fused.intensity()["dram"] == pytest.approx(0.25)
    assert naive.bytes()["dram"] / fused.bytes()["dram"] == pytest.approx(3.0)
    assert naive.flops == fused.flops


@pytest.mark.parametrize("variant,per_elt,per_row_bytes,ai", [
    ("naive", 20, 16, 0.15), ("fused", 12, 0, 0.25), ("onepass", 8, 0, 0.375)])
def test_rownorm_bytes_per_element_and_per_row(variant, per_elt, per_row_bytes, ai):
    b, h = 64, 4096
    c = case("rownorm", variant, "fp32", (b, h))
    assert c.flops == 3 * b * h + b  # + one FLOP per row (the eps add), stated
    assert c.bytes()["dram"] == per_elt * b * h + per_row_bytes * b
    # The per-element intensity the book quotes, with the per-row terms set apart.
    assert 3 / per_elt == pytest.approx(ai)
    assert c.intensity()["dram"] == pytest.approx(ai, rel=2e-3)


def test_rownorm_naive_is_four_launches():
    c = case("rownorm", "naive", "fp32", (8, 16))
    assert [la.kernel for la in c.launches()] == ["square", "rowsum", "rsqrt", "scale"]


@pytest.mark.parametrize("dtype,size", [("fp32", 4), ("fp64", 8)])
def test_gemm_flops_and_minimum_bytes(dtype, size):
    m, n, k = 300, 200, 100
    c = case("gemm", "tiled", dtype, (m, n, k))
    assert c.flops == 2 * m * n * k
    assert c.bytes()["dram"] == (m * k + k * n + m * n) * size


def test_gemm_square_intensity_is_2n_over_3_itemsize():
    n = 4096
    c = case("gemm", "library", "fp32", (n, n, n))
    assert c.intensity()["dram"] == pytest.approx(2 * n / (3 * 4))
    assert round(c.intensity()["dram"]) == 683


def test_precision_and_unit_of_cases():
    assert case("vector_add", "scalar", "fp32", (4,)).precision == "fp32"
    assert case("gemm", "naive", "fp64", (4, 4, 4)).precision == "fp64"
    # Storage dtypes computed in fp32 meet the fp32 roof; packed half2 math meets fp16's.
    assert case("l2norm", "fused", "fp16", (4,)).precision == "fp32"
    assert case("vector_add", "scalar", "fp8", (4,)).precision == "fp32"
    assert case("vector_add", "vec4", "fp16", (4,)).precision == "fp16"
    assert case("gemm", "tensor", "bf16", (4, 4, 4)).precision == "bf16_tc"


def test_every_variant_declares_flops_and_bytes_for_every_dtype():
    for w in workloads().values():
        for v in w.variants.values():
            for d in v.dtypes:
                c = Case(w, v, d, w.quick_size)
                assert c.flops > 0, c.key
                assert c.bytes()["dram"] > 0, c.key
                assert w.tolerance[d] > 0, c.key


def test_inputs_are_random_nonzero_and_fresh():
    import numpy as np

    w = workloads()["vector_add"]
    rng = np.random.default_rng(0)
    x1 = w.make_inputs((1000,), "fp32", rng)
    x2 = w.make_inputs((1000,), "fp32", rng)
    assert (x1["a"] != 0).all() and (x1["b"] != 0).all()
    assert not np.array_equal(x1["a"], x2["a"])
    assert x1["a"].dtype == np.float32
