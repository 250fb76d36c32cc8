"""Every aten op a PyTorch program runs, recorded under a ``TorchDispatchMode``.

Below autograd, after the composite ops have decomposed: what the kernels are called with.
Each call keeps its inputs' and outputs' shape, dtype, strides, device and storage (an id
per storage, held alive while recording so that an address is never reused), which inputs
it writes (in place, ``out=``), and the ops whose results it reads (the data flow). Calls
with one signature (op, shapes, dtypes, strides, the non-tensor arguments and which
arguments share a storage) are one *distinct* op: its arguments are cloned once, at its
first call, so that it can be replayed alone and timed (``profile_time``).
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass, field
from typing import Any

from roofbench.bench.profile.caller_state import Backups
from roofbench.bench.profile.indexed_bytes import indexed_bytes
from roofbench.bench.profile.op_counts import (
    TensorMeta,
    convention_flops,
    family,
    storage_bytes,
    union_bytes,
)


@dataclass
class Distinct:
    """One distinct op: counted once, replayed on its first call's cloned arguments."""

    index: int
    name: str  # "aten.mul.Tensor"
    packet: str  # "mul"
    family: str
    flops: int
    flops_by: str  # "torch flop registry" or the convention used
    reads: int  # bytes
    writes: int
    signature: str  # shown: the inputs' shapes, dtypes and strides
    calls: int = 0
    func: Any = None  # the OpOverload (not stored)
    replay: tuple[tuple[Any, ...], dict[str, Any]] | None = None  # cloned (args, kwargs)
    dtype: str = ""  # the first output's (else input's) dtype
    device: str = "cpu"
    outputs: str = ""  # shown: the results' shapes, dtypes and strides
    # Bytes of each storage read, then of each written (a storage both read and written
    # twice, as ``Counts.arrays``); empty where an indexed op's rule counts what it touches:
    # how many streams it moves, the DRAM probe its samples pair with.
    arrays: tuple[int, ...] = ()

    @property
    def bytes(self) -> int:
        return self.reads + self.writes


@dataclass
class OpCall:
    """One call of an op in program order."""

    index: int
    distinct: int
    inputs: list[TensorMeta]
    outputs: list[TensorMeta]
    written: list[int]  # storages this call writes (outputs and inputs written in place)
    read: list[int]  # storages it reads
    producers: list[int] = field(default_factory=list)  # calls whose results it reads


@dataclass
class Recording:
    calls: list[OpCall]
    distinct: list[Distinct]
    inputs: set[int]  # storages that existed before the program ran (arguments, weights)
    outputs: set[int]  # storages of what the program returned


def _dtype_name(dt: Any) -> str:
    return str(dt).removeprefix("torch.")


class Recorder:
    """The dispatch mode and what it saw (``recording()`` when the program has run)."""

    def __init__(self, clone: bool = True, backups: Backups | None = None) -> None:
        import torch
        from torch.utils._python_dispatch import TorchDispatchMode

        self.torch = torch
        self.clone = clone
        self._storages: dict[int, tuple[int, Any]] = {}  # storage cdata -> (id, storage)
        self._written_by: dict[int, int] = {}  # storage id -> last call that wrote it
        self._created: set[int] = set()  # storages first seen as an op's result
        self.calls: list[OpCall] = []
        self.distinct: list[Distinct] = []
        self._by_sig: dict[tuple[Any, ...], int] = {}
        self._preexisting: set[int] = set()
        rec = self

        class _Mode(TorchDispatchMode):
            def __torch_dispatch__(self, func, types, args=(), kwargs=None):
                kwargs = kwargs or {}
                if backups is not None:  # the caller's storages copied before a write
                    backups.before(func, args, kwargs)
                out = func(*args, **kwargs)
                if backups is not None:
                    backups.made(out, args, kwargs)
                rec.record(func, args, kwargs, out)
                return out

        self.mode = _Mode()

    # -- tensors --------------------------------------------------------------------------
    def _storage_id(self, t: Any) -> int:
        st = t.untyped_storage()
        key = st._cdata
        if key not in self._storages:
            self._storages[key] = (len(self._storages), st)  # held: no address reuse
        return self._storages[key][0]

    def meta(self, t: Any) -> TensorMeta:
        return TensorMeta(tuple(int(s) for s in t.shape), _dtype_name(t.dtype),
                          tuple(int(s) for s in t.stride()), str(t.device),
                          self._storage_id(t), int(t.storage_offset()),
                          int(t.element_size()))

    def _is_tensor(self, x: Any) -> bool:
        return isinstance(x, self.torch.Tensor)

    # -- one call ---------------------------------------------------------------------------
    def record(self, func: Any, args: tuple[Any, ...], kwargs: dict[str, Any],
               out: Any) -> None:
        from torch.utils._pytree import tree_flatten, tree_map

        flat_in, _ = tree_flatten((args, kwargs))
        in_tensors = [x for x in flat_in if self._is_tensor(x)]
        new_before = {self._storage_id(t) for t in in_tensors} - set(self._written_by) \
            - self._created
        ins = [self.meta(t) for t in in_tensors]
        outs_t = [x for x in tree_flatten(out)[0] if self._is_tensor(x)]
        in_storages = {m.storage for m in ins}
        outs = []
        for t in outs_t:
            m = self.meta(t)
            outs.append(m)
            if m.storage not in in_storages:
                self._created.add(m.storage)
        self._preexisting |= new_before
        mutated_names = {a.name for a in func._schema.arguments
                         if a.alias_info is not None and a.alias_info.is_write}
        written_in: list[TensorMeta] = []
        write_only: set[int] = set()
        for a in func._schema.arguments:
            if a.name not in mutated_names:
                continue
            v = kwargs.get(a.name) if a.kwarg_only or a.name in kwargs else None
            if v is None:
                pos = [x.name for x in func._schema.arguments if not x.kwarg_only]
                if a.name in pos and pos.index(a.name) < len(args):
                    v = args[pos.index(a.name)]
            for t in tree_flatten(v)[0]:
                if self._is_tensor(t):
                    m = self.meta(t)
                    written_in.append(m)
                    if a.kwarg_only:  # out=: written, never read
                        write_only.add(m.storage)
        # A view: every result shares an input's storage and nothing is written.
        is_view = bool(outs) and not written_in and all(m.storage in in_storages
                                                         for m in outs)
        read_metas = [m for m in ins if m.storage not in write_only]
        written = [m for m in outs if m.storage not in in_storages or written_in] + written_in
        packet = func._overloadpacket.__name__
        name = str(func)
        alloc = packet in ("empty", "empty_like", "empty_strided", "new_empty")
        reads = 0 if is_view else union_bytes(read_metas)
        writes = 0 if (is_view or alloc) else union_bytes(written)
        meta_of = {id(t): m for t, m in zip(in_tensors, ins, strict=True)}
        rule = None if is_view else indexed_bytes(packet, args, kwargs, meta_of, outs)
        arrays = (() if is_view else
                  (*storage_bytes(read_metas), *storage_bytes([] if alloc else written)))
        if rule is not None:  # an indexed op: what it touches, not every span
            reads, writes = rule
            arrays = ()
        margs, mkwargs = tree_map(lambda x: meta_of.get(id(x), x) if self._is_tensor(x)
                                  else x, (args, kwargs))
        alias = tuple(m.storage for m in ins)
        alias_pat = tuple(alias.index(s) for s in alias)
        sig = (name, tuple((m.shape, m.dtype, m.stride, m.device, m.offset) for m in ins),
               alias_pat, repr(tree_map(lambda x: "T" if isinstance(x, TensorMeta) else x,
                                        (margs, mkwargs))))
        d_index = self._by_sig.get(sig)
        if d_index is None:
            d_index = len(self.distinct)
            self._by_sig[sig] = d_index
            pointwise = self.torch.Tag.pointwise in getattr(func, "tags", ())
            fam = family(packet, is_view, pointwise)
            flops, how = self._flops(func, packet, fam, args, kwargs, out, ins, outs,
                                     margs, mkwargs)
            first = (outs or ins)
            d = Distinct(d_index, name, packet, fam, flops, how, reads, writes,
                         ", ".join(m.describe() for m in ins) or "-", func=func,
                         dtype=first[0].dtype if first else "", device=first[0].device
                         if first else "cpu", outputs=", ".join(m.describe() for m in outs),
                         arrays=tuple(b for b in arrays if b > 0))
            if self.clone:
                d.replay = self._clone_args(args, kwargs)
            self.distinct.append(d)
        self.distinct[d_index].calls += 1
        read_ids = sorted({m.storage for m in read_metas}) if not is_view else []
        producers = sorted({self._written_by[s] for s in read_ids if s in self._written_by})
        call = OpCall(len(self.calls), d_index, ins, outs,
                      sorted({m.storage for m in written}) if not is_view else [],
                      read_ids, producers)
        for s in call.written:
            self._written_by[s] = call.index
        self.calls.append(call)

    def _flops(self, func: Any, packet: str, fam: str, args: Any, kwargs: Any, out: Any,
               ins: list[TensorMeta], outs: list[TensorMeta], margs: Any,
               mkwargs: Any) -> tuple[int, str]:
        from torch.utils import flop_counter

        reg = flop_counter.flop_registry.get(func._overloadpacket)
        if reg is not None:
            with contextlib.suppress(Exception):
                return int(reg(*args, **kwargs, out_val=out)), "torch flop registry"
        if packet in ("_scaled_dot_product_flash_attention_for_cpu",
                      "scaled_dot_product_attention") and len(ins) >= 3:
            q, k, v = ins[0].shape, ins[1].shape, ins[2].shape
            return int(flop_counter.sdpa_flop_count(q, k, v)), "torch sdpa_flop_count"
        return convention_flops(packet, fam, ins, outs, tuple(margs), dict(mkwargs))

    def _clone_args(self, args: Any, kwargs: Any) -> tuple[Any, dict[str, Any]]:
        """The arguments with every tensor copied, strides, offsets and shared storages
        kept (``a * a`` replays on one tensor, as recorded)."""
        from torch.utils._pytree import tree_map

        copies: dict[int, Any] = {}
        torch = self.torch

        def one(x: Any) -> Any:
            if not self._is_tensor(x):
                return x
            st = x.untyped_storage()
            if st._cdata not in copies:
                copies[st._cdata] = st.clone()
            t = torch.empty(0, dtype=x.dtype, device=x.device)
            t.set_(copies[st._cdata], x.storage_offset(), x.size(), x.stride())
            return t

        cargs, ckwargs = tree_map(one, (tuple(args), dict(kwargs)))
        return tuple(cargs), dict(ckwargs)

    # -- the whole program ------------------------------------------------------------------
    def recording(self, result: Any) -> Recording:
        from torch.utils._pytree import tree_flatten

        outs = {self._storage_id(t) for t in tree_flatten(result)[0] if self._is_tensor(t)}
        rec = Recording(self.calls, self.distinct, set(self._preexisting), outs)
        self._storages.clear()  # the storages held while recording are released
        return rec


def record_program(fn: Any, args: tuple[Any, ...], kwargs: dict[str, Any],
                   clone: bool = True, backups: Backups | None = None
                   ) -> tuple[Recording, Any]:
    """Run ``fn(*args, **kwargs)`` once under the recorder: (what it did, its result);
    ``backups`` copies each pre-existing storage before the program first writes it."""
    r = Recorder(clone=clone, backups=backups)
    with r.mode:
        result = fn(*args, **kwargs)
    return r.recording(result), result
