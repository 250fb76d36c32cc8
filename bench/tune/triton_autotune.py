"""A drop-in for ``triton.autotune``: the same configs and key, each configuration validated,
timed with paired roof samples and placed by ``roofbench.tune``, the search stopped at the
target fraction of the roof; each key's ``TuneRecord`` kept (``.records``).

    @roofbench_autotune(configs=[triton.Config({"BLOCK": 256}, num_warps=4), ...],
                        key=["n"], flops=lambda meta: meta["n"],
                        reads=lambda meta: 8 * meta["n"], writes=lambda meta: 4 * meta["n"],
                        output="out", reference=lambda x, y, out, n: x + y)
    @triton.jit
    def add(x, y, out, n, BLOCK: tl.constexpr): ...

    add[grid](x, y, out, n)  # the first call of a key tunes; later ones launch the best

A count is a value or a callable of ``meta``: the call's named arguments with the
configuration's keywords (``num_warps``, ``num_stages`` included), the dict Triton hands a grid
function. ``output`` names the arguments the kernel writes (poisoned with NaN before the check);
``reference`` is called with the call's arguments. A configuration's ``pre_hook`` runs before
each of its launches, as in Triton. The key is Triton's: the values of the ``key`` arguments and
the dtype of every argument that has one. Under Triton's interpreter (``TRITON_INTERPRET=1``)
nothing can be timed: the first configuration is launched untuned and a line says so, unless a
``clock`` is given (a test's fake)."""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from triton.runtime.jit import KernelInterface

from .record import TuneRecord
from .search import TuneError, tune
from .space import Space

COUNTS = ("flops", "reads", "writes", "bytes")


def _config_dict(c: Any) -> dict[str, Any]:
    """A Triton config as the space's configuration: its keywords, warps and stages."""
    return {**dict(c.kwargs), "num_warps": c.num_warps, "num_stages": c.num_stages}


def _interpreted() -> bool:
    return os.environ.get("TRITON_INTERPRET", "").strip() not in ("", "0")


class RoofAutotuner(KernelInterface):
    """``kernel[grid](*args, **kwargs)`` tunes on a key's first call (``roofbench.tune``) and
    launches the chosen configuration; ``cache`` maps each key to its Triton config,
    ``records`` to its ``TuneRecord``, ``best_config`` is the last launched (as Triton's)."""

    def __init__(self, fn: Any, configs: Sequence[Any], key: Sequence[str],
                 counts: Mapping[str, Any], output: str | Sequence[str] | None,
                 tune_kw: Mapping[str, Any]) -> None:
        self.fn = fn
        self.arg_names: list[str] = list(fn.arg_names)
        if not configs:
            raise TuneError("autotune needs at least one triton.Config")
        missing = [k for k in key if k not in self.arg_names]
        if missing:
            raise TuneError(f"key names {missing} are not arguments of {fn.__name__} "
                            f"({', '.join(self.arg_names)})")
        outs = [output] if isinstance(output, str) else list(output or [])
        bad = [o for o in outs if o not in self.arg_names]
        if bad:
            raise TuneError(f"output= names {bad}, not arguments of {fn.__name__}")
        self.configs, self.key, self.outputs = list(configs), list(key), outs
        self.counts, self.tune_kw = dict(counts), dict(tune_kw)
        self.cache: dict[tuple[Any, ...], Any] = {}
        self.records: dict[tuple[Any, ...], TuneRecord] = {}
        self.best_config: Any = None
        self.__name__ = getattr(fn, "__name__", "kernel")

    def key_of(self, named: Mapping[str, Any]) -> tuple[Any, ...]:
        """Triton's key: the key arguments' values, then every argument's dtype."""
        k: list[Any] = [named[n] for n in self.key if n in named]
        k += [str(v.dtype) for v in named.values() if hasattr(v, "dtype")]
        return tuple(k)

    def launch(self, config: Any, grid: Any, args: tuple[Any, ...],
               kwargs: Mapping[str, Any]) -> Any:
        """One launch of ``config`` (its pre_hook first, with the full named arguments)."""
        if config.pre_hook is not None:
            config.pre_hook({**dict(zip(self.arg_names, args, strict=False)), **kwargs,
                             **config.all_kwargs()})
        return self.fn.run(*args, grid=grid, warmup=False, **kwargs, **config.all_kwargs())

    def run(self, *args: Any, grid: Any, warmup: bool = False, **kwargs: Any) -> Any:
        named = {**dict(zip(self.arg_names, args, strict=False)), **kwargs}
        key = self.key_of(named)
        if key not in self.cache:
            self.cache[key] = self._tune(key, named, grid, args, kwargs)
        self.best_config = self.cache[key]
        return self.launch(self.best_config, grid, args, kwargs)

    def _tune(self, key: tuple[Any, ...], named: Mapping[str, Any], grid: Any,
              args: tuple[Any, ...], kwargs: Mapping[str, Any]) -> Any:
        if len(self.configs) == 1:
            return self.configs[0]
        if _interpreted() and self.tune_kw.get("clock") is None:
            print(f"roofbench: {self.__name__}: Triton's interpreter runs it (TRITON_INTERPRET): "
                  "nothing to time, the first configuration is launched untuned",
                  file=sys.stderr, flush=True)
            return self.configs[0]
        dicts = [_config_dict(c) for c in self.configs]

        def config_of(cfg: Mapping[str, Any]) -> Any:
            return self.configs[dicts.index(dict(cfg))]

        def meta(cfg: Mapping[str, Any]) -> dict[str, Any]:
            return {**named, **config_of(cfg).all_kwargs()}

        def build(**cfg: Any) -> Callable[..., Any]:
            config = config_of(cfg)
            return lambda *a, **kw: self.launch(config, grid, a, kw)

        counts: dict[str, Any] = {}
        for name, v in self.counts.items():
            counts[name] = (lambda cfg, f=v: f(meta(cfg))) if callable(v) else v
        output = tuple(named[o] for o in self.outputs) if self.outputs else None
        if output is not None and len(output) == 1:
            output = output[0]
        kw = {"name": self.__name__, **self.tune_kw}
        rec = tune(build, Space.of(dicts), *args, output=output, **counts, **kw, **kwargs)
        self.records[key] = rec
        best = rec.best
        if best is None:
            raise TuneError(f"{self.__name__}: no configuration of {len(dicts)} was valid "
                            f"({rec.stop_detail}); the record: .records[{key!r}]")
        return config_of(best.config)


def autotune(configs: Sequence[Any], key: Sequence[str], *, flops: Any = None,
             reads: Any = 0, writes: Any = 0, bytes: Any = None,
             output: str | Sequence[str] | None = None, **tune_kw: Any
             ) -> Callable[[Any], RoofAutotuner]:
    """``triton.autotune(configs, key)`` with counts: see the module doc. ``tune_kw``:
    ``roofbench.tune``'s keywords (``target``, ``budget_s``, ``reference``, ``tolerance``,
    ``exhaustive``, ``out``, ``roofs``, ...)."""
    if isinstance(key, str) or not all(isinstance(k, str) for k in key):
        raise TuneError(f"key= must be a list of argument names, got {key!r}")
    counts = {"flops": flops, "reads": reads, "writes": writes, "bytes": bytes}

    def decorate(fn: Any) -> RoofAutotuner:
        return RoofAutotuner(fn, configs, key, counts, output, tune_kw)

    return decorate
