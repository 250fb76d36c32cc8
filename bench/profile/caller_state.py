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
- The process's settings (``Settings``, ``kept``): torch's intra-op and inter-op threads
  (a Numba probe sampled beside a sample sets OpenMP's count, which is torch's), Numba's
  threads, the default dtype, grad mode, the RNG states (torch, CUDA, numpy, Python),
  cuDNN / TF32 / matmul-precision / deterministic flags and the environment variables:
  read when ``profile``, ``model``, ``measure`` or the pytest fixture starts and put back
  when it ends, returns, raises or is interrupted (KeyboardInterrupt).
"""

from __future__ import annotations

import contextlib
import copy
import os
import random
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any, TypeVar

F = TypeVar("F", bound=Callable[..., Any])


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


def _torch_flags(torch: Any) -> list[tuple[Any, str]]:
    """The (object, attribute) pairs of torch's global math flags."""
    be = torch.backends
    return [(be.cudnn, "enabled"), (be.cudnn, "benchmark"), (be.cudnn, "deterministic"),
            (be.cudnn, "allow_tf32"), (be.cuda.matmul, "allow_tf32"),
            (be.cuda.matmul, "allow_fp16_reduced_precision_reduction"),
            (be.cuda.matmul, "allow_bf16_reduced_precision_reduction"),
            (be.mkldnn, "enabled")]


@dataclass(frozen=True)
class Settings:
    """The process-wide settings a profile or a measurement could change, as read at its
    start (torch's, numpy's and Numba's only where the caller had imported them: nothing is
    imported to read them)."""

    environ: dict[str, str]
    python_rng: Any
    numpy_rng: Any = None
    numba_threads: int | None = None
    torch: dict[str, Any] | None = None

    @classmethod
    def read(cls) -> Settings:
        np = sys.modules.get("numpy")
        torch = _torch_settings()  # before Numba's: its first thread launch moves OpenMP's
        return cls(dict(os.environ), random.getstate(),
                   np.random.get_state() if np is not None and hasattr(np, "random") else None,
                   _numba_threads(), torch)

    def restore(self) -> None:
        """Put every setting back (each one that differs; one that cannot be set again is
        skipped: torch's inter-op threads are fixed once parallel work started)."""
        for k in [k for k in os.environ if k not in self.environ]:
            del os.environ[k]
        for k, v in self.environ.items():
            if os.environ.get(k) != v:
                os.environ[k] = v
        random.setstate(self.python_rng)
        np = sys.modules.get("numpy")
        if self.numpy_rng is not None and np is not None:
            np.random.set_state(self.numpy_rng)
        numba = sys.modules.get("numba")
        if self.numba_threads is not None and numba is not None:
            with contextlib.suppress(Exception):
                if numba.get_num_threads() != self.numba_threads:
                    numba.set_num_threads(self.numba_threads)
        if self.torch is not None:
            _restore_torch(self.torch)


def _numba_threads() -> int | None:
    """Numba's thread count, where its threads are running: asking earlier would launch
    them (and its OpenMP layer then sets OpenMP's count, torch's, to its own)."""
    par = sys.modules.get("numba.np.ufunc.parallel")
    if par is None or not getattr(par, "_is_initialized", False):
        return None
    with contextlib.suppress(Exception):  # a stubbed or half-imported Numba
        return int(sys.modules["numba"].get_num_threads())
    return None


def _torch_settings() -> dict[str, Any] | None:
    torch = sys.modules.get("torch")
    if torch is None or not hasattr(torch, "get_num_threads"):
        return None
    s: dict[str, Any] = {
        "threads": torch.get_num_threads(), "interop": torch.get_num_interop_threads(),
        "dtype": torch.get_default_dtype(), "grad": torch.is_grad_enabled(),
        "rng": torch.get_rng_state(), "matmul_precision": torch.get_float32_matmul_precision(),
        "deterministic": torch.are_deterministic_algorithms_enabled(),
        "deterministic_warn": torch.is_deterministic_algorithms_warn_only_enabled(),
        "flags": [(o, a, getattr(o, a)) for o, a in _torch_flags(torch) if hasattr(o, a)],
        "cuda_rng": None}
    if torch.cuda.is_initialized():  # never initialises CUDA to read it
        s["cuda_rng"] = torch.cuda.get_rng_state_all()
    return s


def _restore_torch(s: dict[str, Any]) -> None:
    import torch

    if torch.get_num_threads() != s["threads"]:
        torch.set_num_threads(s["threads"])
    if torch.get_num_interop_threads() != s["interop"]:
        with contextlib.suppress(RuntimeError):  # settable only before parallel work
            torch.set_num_interop_threads(s["interop"])
    torch.set_default_dtype(s["dtype"])
    torch.set_grad_enabled(s["grad"])
    torch.set_rng_state(s["rng"])
    if s["cuda_rng"] is not None:
        torch.cuda.set_rng_state_all(s["cuda_rng"])
    torch.set_float32_matmul_precision(s["matmul_precision"])
    if (torch.are_deterministic_algorithms_enabled() != s["deterministic"]
            or torch.is_deterministic_algorithms_warn_only_enabled()
            != s["deterministic_warn"]):
        torch.use_deterministic_algorithms(s["deterministic"],
                                           warn_only=s["deterministic_warn"])
    for o, a, v in s["flags"]:
        if getattr(o, a) != v:
            setattr(o, a, v)


@contextlib.contextmanager
def kept() -> Iterator[Settings]:
    """The caller's settings read now and put back when the block ends, however it ends
    (an error, a KeyboardInterrupt)."""
    before = Settings.read()
    try:
        yield before
    finally:
        before.restore()


def keeping(fn: F) -> F:
    """``fn`` run under ``kept()`` (an entry point: `roofbench model`'s command)."""
    import functools

    @functools.wraps(fn)
    def run(*a: Any, **k: Any) -> Any:
        with kept():
            return fn(*a, **k)

    return run  # type: ignore[return-value]
