"""Every workload: the modules of this folder, then the plug-ins, each by its ``WORKLOAD``.

A new workload is one new module defining WORKLOAD (plus its kernel sources); nothing else
needs editing: the suite's tables (test sizes, codegen rows, sanitizer cases, emulated sources)
are derived from the registry and the workload's own declarations (the helpers below). Its
``order`` and ``marker`` fields place it in listings and on the plot. A module outside the
tree joins through ``$ROOFBENCH_PLUGINS`` (see roofbench/plugins.py).
"""

from __future__ import annotations

import dataclasses
import importlib
import pkgutil
from functools import cache
from typing import Any

from ..plugins import PluginError, plugin_attr, plugin_names
from . import families
from .spec import Variant, Workload

_SKIP = {"spec", "registry", "families"}


def workloads() -> dict[str, Workload]:
    """Name -> workload, in the workloads' own order (memory-bound first, GEMM last), ties by
    name. Raises PluginError for a bad plug-in."""
    return _workloads(plugin_names())


@cache
def _builtin() -> dict[str, Workload]:
    pkg = importlib.import_module(__package__)
    found: dict[str, Workload] = {}
    for info in sorted(pkgutil.iter_modules(pkg.__path__), key=lambda m: m.name):
        if info.name in _SKIP or info.name.startswith(("_", *families.KERNEL_MODULE_PREFIXES)):
            continue
        mod = importlib.import_module(f"{__package__}.{info.name}")
        w = getattr(mod, "WORKLOAD", None)
        if isinstance(w, Workload):
            found[w.name] = w
    return found


@cache
def _workloads(plugins: tuple[str, ...]) -> dict[str, Workload]:
    found = dict(_builtin())
    for mod, w in plugin_attr("WORKLOAD"):
        if not isinstance(w, Workload):
            raise PluginError(f"plug-in {mod!r}: WORKLOAD is a {type(w).__name__}, not a "
                              "roofbench.kernels.spec.Workload")
        if w.name in found:
            raise PluginError(f"plug-in {mod!r}: workload {w.name!r} already exists")
        found[w.name] = w
    return dict(sorted(found.items(), key=lambda kv: (kv[1].order, kv[0])))


# ---- what the tables of the suite and the scripts derive from the workloads -----------------


def cuda_impls(variant: Variant) -> list[Any]:
    """Every implementation the variant's CUDA table may launch (a ByArch's choices, not the
    reasons it gives elsewhere)."""
    out: list[Any] = []
    for impl in (variant.impls.get("cuda") or {}).values():
        choices = getattr(impl, "choices", None)
        out += choices() if callable(choices) else [impl]
    return out


def hand_written(variant: Variant) -> bool:
    """Whether the variant launches a kernel of ours on CUDA (not only a vendor library)."""
    return any(getattr(i, "launcher", "") in ("runtime", "driver") for i in cuda_impls(variant))


def cuda_sources(launcher: str = "runtime") -> list[str]:
    """The kernels/cuda sources the workloads' CUDA tables launch through ``launcher``
    ("runtime": compiled by CuPy/PyCUDA; "driver": the sm_90a cubins), sorted."""
    return sorted({i.source for w in workloads().values() for v in w.variants.values()
                   for i in cuda_impls(v) if getattr(i, "launcher", "") == launcher})


def code_modules() -> list[str]:
    """The modules of the workloads' CPU implementations (where their ``CPU_CODE`` lists the
    parallel kernels to compile), in registry order."""
    seen: list[str] = []
    for w in workloads().values():
        for v in w.variants.values():
            for impl in (v.impls.get("cpu") or {}).values():
                # a record of kernels (nt_stores.NtStoreKernel: its two paths) counts for the
                # modules of the kernels it holds
                parts = [impl]
                if dataclasses.is_dataclass(impl) and not isinstance(impl, type):
                    parts += [getattr(impl, f.name) for f in dataclasses.fields(impl)]
                for part in parts:
                    mod = getattr(part, "__module__", None) if callable(part) else None
                    if isinstance(mod, str) and mod not in seen:
                        seen.append(mod)
    return seen
