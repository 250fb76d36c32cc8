"""What an implementation family beyond the built-in ones provides.

Every implementation of a workload's launch is listed in the workload module's variant, under
``impls[family]`` (kernels/spec.py): the built-in families (``cpu``, ``cuda``, ``numba_cuda``)
as functions and kernel tables, a further family (Triton) as objects of the :class:`Impl`
protocol, which prepare themselves for a case's arrays and hand back the call that launches
it. A backend of such a family asks the object, never its internals (bench/backends/triton.py).
A family's kernel modules import their compiler (e.g. triton) at import time, so the workload
registry skips the modules named with a prefix in ``KERNEL_MODULE_PREFIXES``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, Protocol

from .spec import Case, Launch

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
