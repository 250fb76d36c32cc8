"""Per-op counts against hand counts, family by family, and the byte rules (views of one
storage once, in place read and written, out= written only), on recordings of real aten
calls (bench/profile/recording.py, profile/op_counts.py)."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")
F = torch.nn.functional

from roofbench.bench.profile.op_counts import TensorMeta, union_bytes  # noqa: E402
from roofbench.bench.profile.recording import record_program  # noqa: E402


def ops(fn, *args, **kwargs):
    """The distinct ops of fn(*args) that move data: (packet, family, FLOPs, bytes, calls)."""
    with torch.no_grad():
        rec, _ = record_program(fn, args, kwargs, clone=False)
    return [(d.packet, d.family, d.flops, d.bytes, d.calls) for d in rec.distinct
            if d.family != "views"]


def test_matmul_conv_attention_come_from_torch_registry():
    a, b = torch.randn(4, 8), torch.randn(8, 16)
    assert ops(torch.mm, a, b) == [("mm", "matmul/conv/attention", 2 * 4 * 8 * 16,
                                     (4 * 8 + 8 * 16 + 4 * 16) * 4, 1)]
    x, w = torch.randn(1, 3, 8, 8), torch.randn(4, 3, 3, 3)
    (conv,) = ops(F.conv2d, x, w)
    assert conv[:3] == ("convolution", "matmul/conv/attention", 2 * (4 * 6 * 6) * 3 * 9)
    q = torch.randn(1, 2, 4, 8)
    (sdpa,) = ops(F.scaled_dot_product_attention, q, q, q)
    assert sdpa[1:3] == ("matmul/conv/attention", 4 * 2 * 4 * 4 * 8)  # QK^T and PV


def test_element_wise_convention_and_the_book_counts():
    a, b = torch.randn(1000), torch.randn(1000)
    assert ops(torch.add, a, b) == [("add", "element-wise", 1000, 12_000, 1)]
    assert ops(torch.sqrt, a) == [("sqrt", "element-wise", 0, 8000, 1)]  # special: 0 FLOPs
    assert ops(lambda x: x * x, a) == [("mul", "element-wise", 1000, 8000, 1)]  # a read once
    got = ops(lambda x, y: torch.sqrt(x * x + y * y), a, b)
    flops = sum(f * n for _, _, f, _, n in got)
    nbytes = sum(by * n for _, _, _, by, n in got)
    assert (flops, nbytes) == (3000, 36_000)  # 3 FLOPs / 36 B per element: 0.083


def test_reduction_normalisation_softmax_copies_and_views():
    x = torch.randn(16, 64)
    assert ops(lambda t: t.sum(-1, keepdim=True), x) == [
        ("sum", "reductions", 16 * 64, (16 * 64 + 16) * 4, 1)]
    y = torch.randn(4, 8)
    w, bias = torch.ones(8), torch.zeros(8)
    (ln,) = ops(F.layer_norm, y, (8,), w, bias)
    assert ln[:3] == ("native_layer_norm", "normalisation", 7 * 32)  # 5 + weight + bias
    (ln0,) = ops(F.layer_norm, y, (8,))
    assert ln0[2] == 5 * 32
    assert ops(torch.softmax, y, -1) == [("_softmax", "normalisation", 4 * 32, 2 * 128, 1)]
    bn = torch.nn.BatchNorm2d(3).eval()
    (b,) = [o for o in ops(bn, torch.randn(2, 3, 4, 4)) if o[1] == "normalisation"]
    assert b[2] == 4 * 96  # inference: 2 + weight + bias
    assert ops(lambda t: t.t().contiguous(), y) == [("clone", "copies/layout", 0, 256, 1)]
    with torch.no_grad():
        rec, _ = record_program(lambda t: t.view(32), (y,), {}, clone=False)
    assert [(d.family, d.flops, d.bytes) for d in rec.distinct] == [("views", 0, 0)]


def test_views_of_one_storage_are_counted_once():
    x = torch.randn(4, 8)
    # Two halves of one storage: their spans' union is the whole tensor, 128 B read.
    assert ops(lambda t: t[:, :4] + t[:, 4:], x) == [("add", "element-wise", 16, 128 + 64, 1)]
    m = TensorMeta((4,), "float32", (1,), "cpu", storage=0, offset=0, itemsize=4)
    shifted = TensorMeta((4,), "float32", (1,), "cpu", storage=0, offset=2, itemsize=4)
    other = TensorMeta((4,), "float32", (1,), "cpu", storage=1, offset=0, itemsize=4)
    assert union_bytes([m, m]) == 16
    assert union_bytes([m, shifted]) == 24  # elements 0..5
    assert union_bytes([m, other]) == 32
    bcast = TensorMeta((4, 8), "float32", (0, 1), "cpu", storage=2, offset=0, itemsize=4)
    assert union_bytes([bcast]) == 32  # an expanded row is read once


def test_in_place_is_read_and_written_out_is_written_only():
    x = torch.randn(100)
    assert ops(lambda t: t.add_(1), x) == [("add_", "element-wise", 100, 800, 1)]
    a, b, o = torch.randn(100), torch.randn(100), torch.empty(100)
    assert ops(lambda: torch.add(a, b, out=o)) == [("add", "element-wise", 100, 1200, 1)]


def test_identical_ops_are_one_distinct_op_counted():
    a, b, c = torch.randn(64), torch.randn(64), torch.randn(128)

    def prog():
        return (a * b) * b * b, c * c

    with torch.no_grad():
        rec, _ = record_program(prog, (), {})
    muls = [(d.signature, d.calls) for d in rec.distinct]
    assert muls == [("float32[64], float32[64]", 3), ("float32[128], float32[128]", 1)]
    assert len(rec.calls) == 4
    d = rec.distinct[0]
    assert (d.outputs, d.device, d.dtype) == ("float32[64]", "cpu", "float32")
    assert d.replay is not None  # cloned once, at the first call
    ra, rb = d.replay[0]
    assert ra.data_ptr() != a.data_ptr() and torch.equal(ra, a) and torch.equal(rb, b)


def test_a_shared_storage_is_part_of_the_signature_and_the_replay():
    a, b = torch.randn(64), torch.randn(64)
    with torch.no_grad():
        rec, _ = record_program(lambda: (a * a, a * b), (), {})
    assert [(d.bytes, d.calls) for d in rec.distinct] == [(512, 1), (768, 1)]
    ra, rb = rec.distinct[0].replay[0]
    assert ra.untyped_storage().data_ptr() == rb.untyped_storage().data_ptr()
