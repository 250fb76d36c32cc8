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
    # fused's second read of a row is served by cache: counted once (the book: 12, 0.25)
    ("naive", 20, 16, 0.15), ("fused", 8, 0, 0.375), ("onepass", 8, 0, 0.375)])
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


# ------------------------------------------------------------------ attention and gemv
ATT = (2, 3, 100, 64)  # batch, heads, N, d


@pytest.mark.parametrize("dtype,item", [("fp32", 4), ("fp16", 2)])
def test_attention_naive_is_three_launches_moving_s_and_p(dtype, item):
    b, h, n, d = ATT
    c = case("attention", "naive", dtype, ATT)
    la = c.launches()
    assert [x.kernel for x in la] == ["scores", "softmax", "pv"]
    qkv, s = b * h * n * d * item, b * h * n * n * item
    assert [c.launch_bytes(x)["dram"] for x in la] == [2 * qkv + s, 2 * s, s + 2 * qkv]
    assert [x.flops for x in la] == [2 * d * b * h * n * n, 4 * b * h * n * n,
                                     2 * d * b * h * n * n]
    assert c.flops == (4 * d + 4) * b * h * n * n
    assert c.buffers()["S"].shape == c.buffers()["P"].shape == (b, h, n, n)


@pytest.mark.parametrize("variant", ["flash", "library"])
def test_attention_flash_and_library_move_q_k_v_o_once(variant):
    b, h, n, d = ATT
    c = case("attention", variant, "fp16", ATT)
    (la,) = c.launches()
    assert la.reads == ("Q", "K", "V") and la.writes == ("O",)
    assert c.bytes()["dram"] == 4 * b * h * n * d * 2
    assert c.flops == case("attention", "naive", "fp16", ATT).flops
    # intensity grows as N: (4d + 4) N^2 / (4 N d x item)
    assert c.intensity()["dram"] == pytest.approx((4 * d + 4) * n / (4 * d * 2))


def test_attention_naive_intensity_saturates_while_flash_grows_with_n():
    d = 128
    naive = [case("attention", "naive", "fp16", (1, 16, n, d)).intensity()["dram"]
             for n in (512, 4096, 16384)]
    flash = [case("attention", "flash", "fp16", (1, 16, n, d)).intensity()["dram"]
             for n in (512, 4096, 16384)]
    # naive: (4d + 4) N^2 / (item (4 N^2 + 4 N d)) -> (4d + 4) / (4 item) = 64.5 in fp16
    assert naive == pytest.approx([64.5 * n / (n + d) for n in (512, 4096, 16384)])
    assert flash == pytest.approx([n * (4 * d + 4) / (8 * d) for n in (512, 4096, 16384)])


def test_attention_causal_counts_the_lower_triangle_and_moves_the_same_bytes():
    b, h, n, d = ATT
    for v in ("naive", "flash", "library"):
        full, causal = case("attention", v, "fp32", ATT), case("attention_causal", v, "fp32",
                                                                ATT)
        assert causal.flops == (4 * d + 4) * b * h * n * (n + 1) // 2
        assert causal.bytes() == full.bytes()  # naive materialises the whole S and P


@pytest.mark.parametrize("dtype,w_item,act_item", [("fp32", 4, 4), ("fp64", 8, 8),
                                                   ("fp16", 2, 2), ("bf16", 2, 2),
                                                   ("fp8", 1, 2)])
def test_gemv_is_2mk_flops_over_the_weights_once(dtype, w_item, act_item):
    m, k = 300, 200
    c = case("gemv", "rows", dtype, (m, k))
    assert c.flops == 2 * m * k
    assert c.bytes()["dram"] == m * k * w_item + (k + m) * act_item
    assert c.buffers()["x"].dtype == c.buffers()["y"].dtype == ("fp16" if dtype == "fp8"
                                                                else dtype)


def test_gemv_intensity_is_about_two_over_bytes_per_weight():
    for dtype, item in (("fp32", 4), ("fp16", 2), ("fp8", 1)):
        ai = case("gemv", "rows", dtype, (16384, 4096)).intensity()["dram"]
        assert ai == pytest.approx(2 / item, rel=0.01)
