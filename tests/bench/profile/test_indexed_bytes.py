"""Bytes of indexed and strided ops by what they touch (bench/profile/indexed_bytes.py), each
family's rule against a hand count of the bytes the op reads and writes."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

from roofbench.bench.profile.recording import record_program  # noqa: E402


def counted(fn, *args):
    """(packet, read bytes, written bytes) of every non-view op fn runs."""
    with torch.no_grad():
        rec, _ = record_program(fn, args, {}, clone=False)
    return [(d.packet, d.reads, d.writes) for d in rec.distinct if d.family != "views"]


def test_embedding_of_one_token_reads_one_row_not_the_table():
    table, ids = torch.randn(50257, 768), torch.tensor([[7]])
    # one row (768 x 4 B) + the int64 id (8 B) read; one row written: the 6,152 B
    assert counted(torch.nn.functional.embedding, ids, table) == [
        ("embedding", 768 * 4 + 8, 768 * 4)]


def test_embedding_reads_each_distinct_row_once():
    table, ids = torch.randn(100, 16), torch.tensor([3, 3, 9, 3])
    assert counted(torch.nn.functional.embedding, ids, table) == [
        ("embedding", 2 * 16 * 4 + 4 * 8, 4 * 16 * 4)]


def test_index_select_reads_the_named_slices():
    x, idx = torch.randn(10, 32, 4), torch.tensor([1, 5, 5])
    # dim 1: a slice is 10 x 4 elements; 2 distinct slices read, 3 written
    assert counted(lambda a, i: a.index_select(1, i), x, idx) == [
        ("index_select", 2 * 40 * 4 + 3 * 8, 3 * 40 * 4)]


def test_gather_and_take_read_one_source_element_per_output():
    x, idx = torch.randn(1000, 64), torch.randint(0, 64, (1000, 2))
    assert counted(lambda a, i: a.gather(1, i), x, idx) == [
        ("gather", 2000 * 4 + 2000 * 8, 2000 * 4)]
    flat = torch.tensor([0, 10, 99])
    assert counted(torch.take, x, flat) == [("take", 3 * 4 + 3 * 8, 3 * 4)]


def test_advanced_indexing_reads_the_rows_it_returns():
    x, rows = torch.randn(4096, 8), torch.tensor([0, 17])
    assert counted(lambda a, i: a[i], x, rows) == [("index", 2 * 8 * 4 + 2 * 8, 2 * 8 * 4)]


def test_scatter_in_place_writes_only_what_it_addresses():
    x = torch.zeros(100, 100)
    idx, src = torch.tensor([[0, 1, 2]]), torch.ones(1, 3)
    # index (3 x 8) + 3 values (3 x 4) read; 3 elements of x written
    assert counted(lambda a, i, s: a.scatter_(1, i, s), x, idx, src) == [
        ("scatter_", 3 * 8 + 3 * 4, 3 * 4)]


def test_scatter_add_out_of_place_copies_the_source_first():
    x = torch.zeros(100, 100)
    idx, src = torch.tensor([[0, 1, 2]]), torch.ones(1, 3)
    # all of x + index + 3 values read (the 3 accumulated elements are part of x); all
    # of the result written
    assert counted(lambda a, i, s: a.scatter_add(1, i, s), x, idx, src) == [
        ("scatter_add", 40000 + 24 + 12, 40000)]


def test_index_put_accumulate_reads_and_writes_the_addressed_rows():
    x, rows, vals = torch.zeros(1000, 16), torch.tensor([4, 8]), torch.ones(2, 16)
    # 2 rows of 16: read (accumulated into) and written; the 2 values rows and the index read
    assert counted(lambda a, i, v: a.index_put_((i,), v, accumulate=True), x, rows, vals) == [
        ("index_put_", 2 * 8 + 2 * 64 + 2 * 64, 2 * 64)]


def test_a_static_cache_index_copy_writes_the_new_token_not_the_cache():
    # StaticCache.update: cache (1, heads 4, 256 slots, 16) <- one token at its position
    cache, pos, new = torch.zeros(1, 4, 256, 16), torch.tensor([9]), torch.ones(1, 4, 1, 16)
    row = 4 * 16 * 4  # one slot along dim 2: 4 heads x 16 floats
    # the index (8 B) + the new token's row read; that one slot written, not 64 kB
    assert counted(lambda c, i, v: c.index_copy_(2, i, v), cache, pos, new) == [
        ("index_copy_", 8 + row, row)]


def test_index_fill_in_place_writes_the_named_slices():
    x, idx = torch.zeros(50, 32), torch.tensor([3, 7])
    assert counted(lambda a, i: a.index_fill_(0, i, 1.0), x, idx) == [
        ("index_fill_", 2 * 8, 2 * 32 * 4)]


def test_masked_scatter_in_place_writes_the_true_elements():
    x = torch.zeros(64, 64)
    mask = torch.zeros(64, 64, dtype=torch.bool)
    mask[0, :5] = True
    src = torch.ones(64, 64)
    # the mask (4096 B) + 5 source elements read; 5 elements written
    assert counted(lambda a, m, s: a.masked_scatter_(m, s), x, mask, src) == [
        ("masked_scatter_", 4096 + 5 * 4, 5 * 4)]


def test_a_broadcast_operand_is_read_once_and_masked_fill_reads_its_mask():
    x, b = torch.randn(256, 64), torch.randn(64)
    assert counted(lambda a, c: a + c.expand(256, 64), x, b) == [
        ("add", 256 * 64 * 4 + 64 * 4, 256 * 64 * 4)]
    mask = torch.zeros(256, 1, dtype=torch.bool)
    assert counted(lambda a, m: a.masked_fill(m, 0.0), x, mask) == [
        ("masked_fill", 256 * 64 * 4 + 256, 256 * 64 * 4)]
