"""Implementation families beyond the built-in ones: one registry line each.

The built-in families ("cpu", "cuda", "numba_cuda") live in each workload module's ``impls``.
A further family (Triton) is one module that attaches its implementations to existing
workloads by name, so that no workload module changes: ``FAMILIES`` below maps the family to
that module, whose ``attach(workloads)`` calls :func:`attach` for each variant it implements.
The workload registry (registry.py) calls :func:`attach_all` once, after it has found the
workloads, and never imports a family's kernel modules (they import their compiler, e.g.
triton, only when a backend or a test asks for a kernel).

A family's implementation of a launch is an object of the :class:`Impl` protocol: it prepares
itself for a case's arrays and hands back the call that launches it. A backend of the family
asks the object, never its internals (bench/backends/triton.py).
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from typing import Any, Protocol

from .spec import Case, Launch, Workload

# family -> the module that attaches its implementations (one line a family)
FAMILIES: dict[str, str] = {
    "triton": "roofbench.kernels.triton_impls",
}
# Module-name prefixes of families' kernel modules: the workload registry skips them (they
# import their compiler at import time).
KERNEL_MODULE_PREFIXES = ("triton_",)


class Impl(Protocol):
    """One launch's implementation in a family: the storage dtypes it has a kernel for, how
    it prepares itself, what it is."""

    @property
    def dtypes(self) -> tuple[str, ...]: ...

    def prepare(self, case: Case, launch: Launch, arrays: Mapping[str, Any]) -> Callable[[], None]:
        """The call that runs ``launch`` of ``case`` on ``arrays`` (the case's buffers, by
        name, as the family's backend holds them): each call launches once."""
        ...

    def describe(self) -> str:
        """What runs (the kernel's name and its compile-time parameters), one line."""
        ...


def attach(workloads: Mapping[str, Workload], family: str, workload: str, variant: str,
           table: dict[str, Impl]) -> None:
    """Give ``workloads[workload].variants[variant]`` the family's implementations (launch
    kernel name -> Impl). Every launch of the variant's plan must be in ``table``."""
    w = workloads.get(workload)
    if w is None or variant not in w.variants:
        raise KeyError(f"family {family!r}: no workload variant {workload}/{variant}")
    w.variants[variant].impls[family] = table


def attach_all(workloads: Mapping[str, Workload]) -> None:
    """Every family attaches its implementations (idempotent: a table is replaced)."""
    for module in FAMILIES.values():
        importlib.import_module(module).attach(workloads)
