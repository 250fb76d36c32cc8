"""The Triton family: which Triton kernel runs each launch of which workload variant.

Attached to the existing workloads by name (kernels/families.py), so no workload module
changes. Each entry is a :class:`TritonImpl`: the kernel module and launcher function that
runs the launch. The kernels themselves (kernels/triton_stream.py, triton_gemm.py,
triton_attention.py) import triton, so they are imported only when a kernel is prepared.
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
from .spec import Case, Launch, Workload

FAMILY = "triton"
_PKG = __name__.rsplit(".", 1)[0]


@dataclass(frozen=True)
class TritonImpl:
    """A launch run by ``<module>.<launcher>`` (see the module docstring)."""

    module: str  # e.g. "triton_stream" (in this folder)
    launcher: str
    dtypes: tuple[str, ...] = ("fp32", "fp64", "fp16", "bf16", "fp8")

    def function(self) -> Callable[..., Callable[[], None]]:
        return getattr(importlib.import_module(f"{_PKG}.{self.module}"), self.launcher)

    def prepare(self, case: Case, launch: Launch, arrays: Mapping[str, Any]) -> Callable[[], None]:
        if case.dtype not in self.dtypes:
            raise ValueError(f"no Triton kernel {self.launcher} for {case.dtype}")
        args = [arrays[a] if isinstance(a, str) else a for a in launch.args]
        return self.function()(case.dtype, *args)

    def describe(self) -> str:
        return f"triton {self.module}.{self.launcher}"


def _impl(module: str, *names: str, dtypes: tuple[str, ...] | None = None
          ) -> dict[str, families.Impl]:
    """Launch kernel name -> the launcher of the same name in ``module``."""
    kw = {"dtypes": dtypes} if dtypes else {}
    return {n: TritonImpl(module, n, **kw) for n in names}


_LOW = ("fp16", "bf16")
# (workload, variant) -> its launches' implementations
TABLE: dict[tuple[str, str], dict[str, families.Impl]] = {
    ("vector_add", "scalar"): _impl("triton_stream", "add"),
    ("l2norm", "naive"): _impl("triton_stream", "square", "add", "sqrt"),
    ("l2norm", "fused"): _impl("triton_stream", "fused"),
    ("rownorm", "fused"): {"fused": TritonImpl("triton_stream", "rownorm_fused")},
    ("gemv", "rows"): {"rows": TritonImpl("triton_stream", "gemv")},
    # tl.dot on tensor cores; fp8 e4m3 needs sm_89+ (the backend refuses it below).
    ("gemm", "tensor"): {"tensor": TritonImpl("triton_gemm", "gemm",
                                              dtypes=(*_LOW, "fp8"))},
    ("attention", "flash"): {"flash": TritonImpl("triton_attention", "flash",
                                                 dtypes=("fp32", *_LOW))},
    ("attention_causal", "flash"): {"flash": TritonImpl("triton_attention", "flash_causal",
                                                        dtypes=("fp32", *_LOW))},
}


def attach(workloads: Mapping[str, Workload]) -> None:
    for (workload, variant), table in TABLE.items():
        if workload in workloads:
            families.attach(workloads, FAMILY, workload, variant, table)
