"""The caller's state left as it was by a profile, which runs the program hundreds of times.

- The arguments: the program runs on a working copy (``working_copy``: a deep copy, views of
  one storage kept as views, a cache object copied with its tensors), never on the caller's.
- Everything else the program writes that existed before it ran (a module's parameters and
  buffers, BatchNorm's running statistics, a tensor a closure holds): each storage is copied
  before its first write (``Backups.before``, called by the recorder's dispatch mode) and
  written back when the profile ends (``Backups.restore``).
- A transformers cache passed in (``DynamicCache``, ``StaticCache``: ``Caches``): decode as
  users write it. Its object graph (the cache, its layers, their lists and tensors, by
  reference) is noted before the program first runs and put back before every later run,
  so each run is the same decode step over the same cache: a ``DynamicCache`` grows by a
  ``torch.cat`` into new tensors and never writes the old ones, so rewinding costs no copy
  and the bytes counted are decode's own; a ``StaticCache`` writes one slot in place, the
  same slot each run (its storages are put back by ``Backups`` at the end). Any other state
  that grows between calls is still refused (inprogram.ProgramChanged).
- Gradients: each parameter's ``.grad`` (the tensor object, or None) is put back as it was
  (``Grads``), so that a program that calls ``backward()`` leaves no accumulated gradient.
- The process's settings (threads, dtype, grad mode, RNG, flags, environment):
  ``bench/measure/caller_settings.py``, shared with ``measure`` and the pytest fixture.
"""

from __future__ import annotations

import copy
import sys
from dataclasses import dataclass, field
from typing import Any


def working_copy(args: tuple[Any, ...], kwargs: dict[str, Any]
                 ) -> tuple[tuple[Any, ...], dict[str, Any]]:
    """A deep copy of the arguments (tensors cloned, views of one storage still sharing it);
    a tensor torch will not deep-copy (a non-leaf that requires grad) is cloned detached."""
    import torch
    from torch.utils._pytree import tree_flatten

    memo: dict[int, Any] = {}
    for t in tree_flatten((args, kwargs))[0]:
        if isinstance(t, torch.Tensor) and not t.is_leaf:
            memo[id(t)] = t.detach().clone().requires_grad_(t.requires_grad)
    a, k = copy.deepcopy((tuple(args), dict(kwargs)), memo)
    return a, k


# Ops that write arguments their schema does not mark written: batch norm's running
# statistics (arguments 3 and 4) in training.
UNMARKED_WRITES = {"native_batch_norm": (3, 4), "cudnn_batch_norm": (3, 4),
                   "miopen_batch_norm": (3, 4)}


def written_tensors(func: Any, args: tuple[Any, ...], kwargs: dict[str, Any]
                    ) -> list[tuple[Any, bool]]:
    """The tensors an aten call writes (in place or ``out=``), each with whether it is an
    ``out=`` argument (written, never read), from the op's schema."""
    import torch
    from torch.utils._pytree import tree_flatten

    out: list[tuple[Any, bool]] = []
    pos = [x.name for x in func._schema.arguments if not x.kwarg_only]
    for a in func._schema.arguments:
        if a.alias_info is None or not a.alias_info.is_write:
            continue
        v = kwargs.get(a.name) if a.kwarg_only or a.name in kwargs else None
        if v is None and a.name in pos and pos.index(a.name) < len(args):
            v = args[pos.index(a.name)]
        out += [(t, a.kwarg_only) for t in tree_flatten(v)[0] if isinstance(t, torch.Tensor)]
    for i in UNMARKED_WRITES.get(func._overloadpacket.__name__, ()):
        if i < len(args) and isinstance(args[i], torch.Tensor):
            out.append((args[i], False))
    return out


@dataclass
class Backups:
    """Copies of the pre-existing storages the program writes, taken before the first write."""

    saved: dict[int, tuple[Any, Any]] = field(default_factory=dict)  # cdata -> (storage, copy)
    created: set[int] = field(default_factory=set)  # storages the program itself made

    def made(self, result: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
        """Storages of an op's results that no backup is needed for: new ones, the program
        made them (a view of an input is not new)."""
        import torch
        from torch.utils._pytree import tree_flatten

        seen = {t.untyped_storage()._cdata for t in tree_flatten((args, kwargs))[0]
                if isinstance(t, torch.Tensor)}
        for t in tree_flatten(result)[0]:
            if isinstance(t, torch.Tensor):
                key = t.untyped_storage()._cdata
                if key not in self.saved and key not in seen:
                    self.created.add(key)

    def before(self, func: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
        for t, _ in written_tensors(func, args, kwargs):
            st = t.untyped_storage()
            if st._cdata not in self.saved and st._cdata not in self.created:
                self.saved[st._cdata] = (st, st.clone())

    def restore(self) -> None:
        for st, backup in self.saved.values():
            st.copy_(backup)
        self.saved.clear()


def transformers_caches(args: tuple[Any, ...], kwargs: dict[str, Any]) -> list[Any]:
    """The transformers ``Cache`` objects among the arguments (in lists, tuples and dicts
    too); none when transformers was never imported."""
    cu = sys.modules.get("transformers.cache_utils")
    cls = getattr(cu, "Cache", None)
    if cls is None:
        return []
    found: list[Any] = []

    def walk(x: Any, depth: int) -> None:
        if isinstance(x, cls):
            found.append(x)
        elif depth < 4 and isinstance(x, (list, tuple)):
            for y in x:
                walk(y, depth + 1)
        elif depth < 4 and isinstance(x, dict):
            for y in x.values():
                walk(y, depth + 1)
    walk((args, kwargs), 0)
    return found


@dataclass
class Caches:
    """The caches' object graphs as they were: each object's attributes, each list's and
    dict's items (tensors held by reference: nothing copied)."""

    objects: list[tuple[Any, dict[str, Any]]] = field(default_factory=list)
    lists: list[tuple[list[Any], list[Any]]] = field(default_factory=list)
    dicts: list[tuple[dict[Any, Any], dict[Any, Any]]] = field(default_factory=list)

    @classmethod
    def of(cls, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Caches:
        import torch

        out, seen = cls(), set()

        def note(x: Any, depth: int) -> None:
            if id(x) in seen or depth > 4 or isinstance(x, (torch.Tensor, torch.nn.Module)):
                return
            seen.add(id(x))
            if isinstance(x, list):
                out.lists.append((x, list(x)))
                items: Any = x
            elif isinstance(x, dict):
                out.dicts.append((x, dict(x)))
                items = x.values()
            elif hasattr(x, "__dict__") and not isinstance(x, type):
                out.objects.append((x, dict(vars(x))))
                items = vars(x).values()
            else:
                return
            for y in items:
                note(y, depth + 1)
        for c in transformers_caches(args, kwargs):
            note(c, 0)
        return out

    def __bool__(self) -> bool:
        return bool(self.objects)

    def rewind(self) -> None:
        for lst, items in self.lists:
            lst[:] = items
        for d, kv in self.dicts:
            d.clear()
            d.update(kv)
        for obj, attrs in self.objects:
            for k in [k for k in vars(obj) if k not in attrs]:
                delattr(obj, k)
            for k, v in attrs.items():
                if vars(obj).get(k, attrs) is not v:
                    setattr(obj, k, v)


@dataclass
class Grads:
    """Each parameter of the program's module and its ``.grad`` before the profile."""

    held: list[tuple[Any, Any]] = field(default_factory=list)

    @classmethod
    def of(cls, fn: Any) -> Grads:
        import torch

        mod = fn if isinstance(fn, torch.nn.Module) else getattr(fn, "__self__", None)
        if not isinstance(mod, torch.nn.Module):
            return cls()
        return cls([(p, p.grad) for p in mod.parameters()])

    def restore(self) -> None:
        for p, g in self.held:
            p.grad = g
