"""Every workload in this folder, found by its module-level ``WORKLOAD``.

A new workload is one new module defining WORKLOAD; nothing else needs editing.
"""

from __future__ import annotations

import importlib
import pkgutil
from functools import cache

from .spec import Workload

_SKIP = {"spec", "registry"}


@cache
def workloads() -> dict[str, Workload]:
    pkg = importlib.import_module(__package__)
    found: dict[str, Workload] = {}
    for info in sorted(pkgutil.iter_modules(pkg.__path__), key=lambda m: m.name):
        if info.name in _SKIP or info.name.startswith("_"):
            continue
        mod = importlib.import_module(f"{__package__}.{info.name}")
        w = getattr(mod, "WORKLOAD", None)
        if isinstance(w, Workload):
            found[w.name] = w
    # A stable, sensible order: memory-bound first, GEMM last.
    order = ["vector_add", "l2norm", "rownorm", "gemm"]
    return dict(sorted(found.items(), key=lambda kv: (order.index(kv[0])
                                                      if kv[0] in order else 99, kv[0])))
