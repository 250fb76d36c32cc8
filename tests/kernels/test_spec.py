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
