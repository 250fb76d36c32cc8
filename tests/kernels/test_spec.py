"""Workload.expected: a row-separable reference computed in blocks of rows equals the whole
one, and never makes a float64 copy of a whole row input."""

from __future__ import annotations

import numpy as np
import pytest
from roofbench.kernels import spec
from roofbench.kernels.arrays import DTYPES, HOST
from roofbench.kernels.registry import workloads

SIZES = {"vector_add": (1001,), "gemv": (37, 301), "rownorm": (29, 130)}


@pytest.mark.parametrize("dtype", ["fp32", "fp64"])
@pytest.mark.parametrize("name", sorted(SIZES))
def test_blocks_of_rows_give_the_whole_reference(monkeypatch, name, dtype):
    w = workloads()[name]
    assert w.row_inputs, name
    size = SIZES[name]
    inputs = w.make_inputs(size, dtype, np.random.default_rng(11))
    whole = w.expected(inputs, size, dtype)
    assert w.reference_block_rows(size, dtype) >= size[0]  # small: one block, as before
    made: list[int] = []  # rows of every float64 copy of a row input
    real = HOST.values

    class Recording:
        xp = HOST.xp

        def values(self, stored, dt):
            if any(np.shares_memory(stored, inputs[n]) for n in w.row_inputs):
                made.append(stored.shape[0])
            return real(stored, dt)

    per_row = sum(8 * int(np.prod(w.inputs(size, dtype)[n].shape[1:])) for n in w.row_inputs)
    monkeypatch.setattr(spec, "REFERENCE_BLOCK_BYTES", 7 * per_row)  # 7 rows a block
    assert w.reference_block_rows(size, dtype) == 7
    blocks = w.expected(inputs, size, dtype, arrays=Recording())
    assert blocks.keys() == whole.keys()
    for k in whole:
        assert blocks[k].dtype == np.float64 and blocks[k].shape == whole[k].shape
        np.testing.assert_allclose(blocks[k], whole[k], rtol=1e-14, atol=0)
    # every row input converted 7 rows at a time (the last block: what is left)
    blocks_of = [7] * (size[0] // 7) + ([size[0] % 7] if size[0] % 7 else [])
    assert sorted(made) == sorted(blocks_of * len(w.row_inputs))


def test_a_workload_without_row_inputs_is_computed_whole():
    w = workloads()["l2norm"]
    assert not w.row_inputs and w.reference_block_rows((1001,), "fp32") == 1001


def test_every_dtype_is_the_storage_table():
    # A variant that names no dtypes runs every storage type: the default must be the table's.
    assert sorted(spec.EVERY_DTYPE) == sorted(DTYPES) and spec.Variant(
        name="v", description="", plan=lambda size, dtype: []).dtypes == spec.EVERY_DTYPE


def test_covers_rule_says_and_keeps_what_covers_once_keeps():
    # The block rules of gemm's, attention's and rownorm's spaces: the text is what a tune
    # records for what it excluded; the test is covers_once over the size's named axis.
    r = spec.covers_rule("BN", (16, 32, 64), 1, "N", "larger tiles run as that one")
    assert r.text == "BN < N, or the least that covers it (larger tiles run as that one)"
    assert spec.covers_rule("BK", (16,), 2, "K").text == "BK < K, or the least that covers it"
    assert [v for v in (16, 32, 64) if r.ok({"BN": v}, (1000, 40, 1), "fp32")] == [16, 32, 64]
    assert [v for v in (16, 32, 64) if r.ok({"BN": v}, (1000, 20, 1), "fp32")] == [16, 32]


def test_the_triton_rules_gemm_and_flash_share():
    from roofbench.kernels.triton_impls import MMA_TILE_RULE, SMEM_LIMIT, smem_rule

    assert MMA_TILE_RULE.ok({"BM": 16, "BN": 32, "num_warps": 4}, (1,), "fp16")  # 512 = 4 x 128
    assert not MMA_TILE_RULE.ok({"BM": 16, "BN": 16, "num_warps": 4}, (1,), "fp16")
    r = smem_rule("2 * BM * BK", lambda c, size, dtype: 2 * c["BM"] * c["BK"] * size[0])
    assert r.text == f"2 * BM * BK <= {SMEM_LIMIT} (sm_90's shared memory per block)"
    assert r.ok({"BM": 64, "BK": 32}, (SMEM_LIMIT // 4096,), "fp16")
    assert not r.ok({"BM": 64, "BK": 32}, (SMEM_LIMIT // 4096 + 1,), "fp16")
