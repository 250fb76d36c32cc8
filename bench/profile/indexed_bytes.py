"""Bytes of the indexed ops by what they touch, one rule per family (the unique-span rule of
``op_counts`` would charge an embedding of one token the whole table).

- lookup (embedding, index_select): the distinct rows/slices the index names (their count
  read from the index itself), plus the index; the output written.
- gather (gather, take, index.Tensor, _unsafe_index): one element of the source per output
  element (never more than the source's span), plus the indices; the output written.
- scatter (scatter, scatter_add, scatter_reduce, index_put, index_add, index_copy,
  index_fill, masked_scatter): the addressed elements written, read as well when they are
  accumulated into, the values read (as many as are written), plus the indices or mask; out
  of place the source is copied first (read whole, the whole output written). A
  StaticCache's ``index_copy_`` of one token writes that token's rows, not the cache.
- masked element-wise ops (masked_fill, where, masked_select) and expand/broadcast views need
  no rule: a broadcast operand's stride 0 spans its own elements once (``TensorMeta.span``).

Two front doors, one rule set: the tensors are a live call's (``profile``), or meta tensors
rebuilt from what a profiler trace recorded (``roofbench trace``: shapes, dtypes, strides,
no values). Where a rule needs the index's values (distinct rows, a mask's true elements)
and they were not recorded, it counts the index's size: an upper bound, never above the
table's span.

``indexed_bytes`` returns (read, written) bytes, or None for an op no rule covers.
"""

from __future__ import annotations

from typing import Any

from roofbench.bench.profile.op_counts import TensorMeta, union_bytes

LOOKUP = {"embedding", "index_select"}
GATHER = {"gather", "take", "index", "_unsafe_index"}
SCATTER = {"scatter", "scatter_add", "scatter_reduce", "index_put", "_index_put_impl",
           "index_add", "index_copy", "index_fill", "masked_scatter"}
ACCUMULATE = {"scatter_add", "scatter_reduce", "index_add"}
RULES = {"lookup": LOOKUP, "gather": GATHER, "scatter": SCATTER}


def _span(m: TensorMeta) -> int:
    lo, hi = m.span()
    return hi - lo


def _distinct(index: Any) -> int:
    """Distinct values of an index; its size where its values were not recorded (meta)."""
    import torch

    if index.is_meta:
        return int(index.numel())
    return int(torch.unique(index.detach()).numel()) if index.numel() else 0


def _true(mask: Any) -> int:
    """True elements of a mask; its size where its values were not recorded (meta)."""
    return int(mask.numel()) if mask.is_meta else int(mask.sum())


def _addressed(self_t: Any, indices: list[Any]) -> int:
    """Elements of ``self_t`` that ``self_t[indices]`` addresses (advanced indexing: int
    indices broadcast together, a bool mask counts its true elements, None a whole dim)."""
    import torch

    n_idx, shapes, consumed = 1, [], 0
    for i in indices:
        if i is None:
            consumed += 1
            continue
        if i.dtype == torch.bool:
            n_idx *= _true(i)
            consumed += i.dim()
        else:
            shapes.append(tuple(i.shape))
            consumed += 1
    if shapes:
        for s in torch.broadcast_shapes(*shapes):
            n_idx *= int(s)
    rest = 1
    for k, s in enumerate(self_t.shape):
        if k >= consumed or (k < len(indices) and indices[k] is None):
            rest *= int(s)
    return n_idx * rest


def indexed_bytes(packet: str, args: tuple[Any, ...], kwargs: dict[str, Any],
                  meta: dict[int, TensorMeta], outs: list[TensorMeta]) -> tuple[int, int] | None:
    """(read, written) bytes of one indexed call by its family's rule (module doc); ``args``
    the call's tensors, ``meta`` their records by ``id``, ``outs`` its results'."""
    import torch
    from torch.utils._pytree import tree_flatten

    base = packet.rstrip("_")
    inplace = packet.endswith("_")
    tensors = [x for x in tree_flatten((args, kwargs))[0] if isinstance(x, torch.Tensor)]
    if not tensors or base not in LOOKUP | GATHER | SCATTER:
        return None
    m = meta.get(id(tensors[0]))
    if m is None:
        return None
    written_out = union_bytes(outs)
    if base in LOOKUP:
        if base == "embedding":
            table, index = args[0], args[1]
            rows, row = _distinct(index), m.numel // max(table.shape[0], 1)
        else:
            table, dim, index = args[0], int(args[1]), args[2]
            rows, row = _distinct(index), m.numel // max(table.shape[dim], 1)
        read = min(rows * row * m.itemsize, _span(m)) + _span(meta[id(index)])
        return read, written_out
    if base in GATHER:
        idx = tensors[1:]
        n_out = sum(o.numel for o in outs[:1])
        read = min(n_out * m.itemsize, _span(m)) + union_bytes(meta[id(t)] for t in idx)
        return read, written_out
    # scatter family: self first; what is addressed and the values written there
    self_t = tensors[0]
    if base in ("index_put", "_index_put_impl"):
        indices = list(args[1]) if len(args) > 1 else list(kwargs.get("indices", []))
        n = _addressed(self_t, indices)
        aux = [meta[id(t)] for t in indices if t is not None]
        values = args[2] if len(args) > 2 else kwargs.get("values")
        acc = bool(args[3]) if len(args) > 3 else bool(kwargs.get("accumulate", False))
    elif base == "masked_scatter":
        mask, values = args[1], args[2]
        n = _true(mask.expand_as(self_t))
        aux, acc = [meta[id(mask)]], False
    else:  # scatter*(self, dim, index, src|value) / index_add|copy|fill(self, dim, index, v)
        index = args[2]
        values = args[3] if len(args) > 3 and isinstance(args[3], torch.Tensor) else None
        if base in ("index_add", "index_copy", "index_fill"):  # whole slices along dim
            n = (m.numel // max(self_t.shape[int(args[1])], 1)) * int(index.numel())
        else:
            n = int(index.numel())
        aux, acc = [meta[id(index)]], base in ACCUMULATE or "reduce" in kwargs
    vmeta = meta.get(id(values)) if isinstance(values, torch.Tensor) else None
    v_read = min(n * vmeta.itemsize, _span(vmeta)) if vmeta is not None else 0
    touched = min(n * m.itemsize, _span(m))
    read = union_bytes(aux) + v_read + (touched if acc else 0)
    if inplace:
        return read, touched
    return read + _span(m) - (touched if acc else 0), written_out
