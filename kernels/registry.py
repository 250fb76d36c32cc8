"""Every workload: the modules of this folder, then the plug-ins, each by its ``WORKLOAD``.

A new workload is one new module defining WORKLOAD (plus its kernel sources); nothing else
needs editing. Its ``order`` and ``marker`` fields place it in listings and on the plot. A
module outside the tree joins through ``$ROOFBENCH_PLUGINS`` (see roofbench/plugins.py).
"""

from __future__ import annotations

import importlib
import pkgutil
from functools import cache

from ..plugins import PluginError, plugin_attr, plugin_names
from . import families
from .spec import Workload

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
