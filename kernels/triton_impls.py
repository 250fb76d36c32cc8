"""The Triton family's implementation of a launch: which Triton launcher runs it.

A workload module lists them in its variants' ``impls["triton"]``, built by :func:`triton`
(kernels/families.py says what a family provides). Each is a :class:`TritonImpl`: the kernel
module and launcher function that runs the launch. The kernels themselves
(kernels/triton_stream.py, triton_gemm.py, triton_attention.py) import triton, so they are
imported only when a kernel is prepared.
A launcher is ``launcher(dtype, *args) -> call``: ``args`` are the launch's own ``args``
(buffer names replaced by the family's arrays: torch tensors), ``call()`` launches once.
Under ``TRITON_INTERPRET=1`` the same launchers run on the CPU (tests/kernels/test_triton.py).
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from . import families
from .spec import EVERY_DTYPE, Case, Launch

_PKG = __name__.rsplit(".", 1)[0]


@dataclass(frozen=True)
class TritonImpl:
    """A launch run by ``<module>.<launcher>`` (see the module docstring)."""

    module: str  # e.g. "triton_stream" (in this folder)
    launcher: str
    dtypes: tuple[str, ...] = EVERY_DTYPE

    def function(self) -> Callable[..., Callable[[], None]]:
        return getattr(importlib.import_module(f"{_PKG}.{self.module}"), self.launcher)

    def prepare(self, case: Case, launch: Launch, arrays: Mapping[str, Any]) -> Callable[[], None]:
        if case.dtype not in self.dtypes:
            raise ValueError(f"no Triton kernel {self.launcher} for {case.dtype}")
        args = [arrays[a] if isinstance(a, str) else a for a in launch.args]
        return self.function()(case.dtype, *args)

    def describe(self) -> str:
        return f"triton {self.module}.{self.launcher}"


def triton(module: str, dtypes: tuple[str, ...] | None = None,
           **launchers: str) -> dict[str, families.Impl]:
    """A variant's Triton implementations: launch kernel name -> the launcher of ``module``
    (in this folder) that runs it, e.g. ``triton("triton_stream", rows="gemv")``."""
    kw = {"dtypes": dtypes} if dtypes else {}
    return {launch: TritonImpl(module, fn, **kw) for launch, fn in launchers.items()}
