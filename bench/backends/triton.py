"""The Triton backend (``--backend triton``): runs the "triton" family's kernels
(each variant's ``impls["triton"]``, kernels/triton_impls.py) on a GPU through torch tensors,
timed with CUDA events on torch's current stream like every GPU case.

It asks each launch's implementation object to prepare itself (``Impl.prepare``) and never
names a kernel. Under ``TRITON_INTERPRET=1`` Triton runs kernels in numpy on the CPU: the
backend refuses to time there (an interpreter's time is Python's), while
:class:`TritonPrepared` itself runs on CPU tensors, which is how the tests validate every
kernel (tests/kernels/test_triton.py). fp8 e4m3 needs sm_89+ (tl.dot has no fp8 form below).
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

import numpy as np
from roofbench.kernels.arrays import np_dtype
from roofbench.kernels.spec import Case

from roofbench.errors_text import first_line
from roofbench.records import LaunchFacts
from roofbench.roof_records import RoofSet
from roofbench.timing import RoofPair, TimerConfig, Timing

from .base import Backend, CaseUnsupported, LaunchListPrepared
from .cuda_timer import EventOps, cuda_time
from .gpu_roofs import CupyRoofPairs

FAMILY = "triton"
# storage dtype -> (torch dtype, the same-width dtype numpy and torch both hold its bits in)
_TORCH = {"fp64": ("float64", "float64"), "fp32": ("float32", "float32"),
          "fp16": ("float16", "float16"), "bf16": ("bfloat16", "int16"),
          "fp8": ("float8_e4m3fn", "uint8")}


def interpreting() -> bool:
    return os.environ.get("TRITON_INTERPRET", "0") not in ("", "0")


def torch_dtype(dtype: str) -> Any:
    import torch

    return getattr(torch, _TORCH[dtype][0])


def to_torch(a: np.ndarray, dtype: str, device: str) -> Any:
    """A host array of storage ``dtype`` as a torch tensor on ``device`` (bits unchanged)."""
    import torch

    bits = np.ascontiguousarray(a).view(np.dtype(_TORCH[dtype][1]))
    return torch.from_numpy(bits).view(torch_dtype(dtype)).to(device)


def to_numpy(t: Any, dtype: str) -> np.ndarray:
    """A torch tensor of storage ``dtype`` as a host array of the suite's numpy dtype."""
    import torch

    bits = t.detach().cpu().contiguous().view(getattr(torch, _TORCH[dtype][1]))
    return bits.numpy().view(np_dtype(dtype))


def refuse_dtype(case: Case) -> str | None:
    """Why the family has no kernel for a launch of ``case`` in its dtype, or None."""
    table = case.variant.impls.get(FAMILY) or {}
    for la in case.launches():
        impl = table.get(la.kernel)
        if impl is not None and case.dtype not in impl.dtypes:
            return f"no Triton kernel for {la.kernel} in {case.dtype} ({impl.describe()})"
    return None


class TritonPrepared(LaunchListPrepared):
    """A case's buffers as torch tensors on ``device`` and one call per launch, each from its
    implementation object."""

    def __init__(self, case: Case, inputs: dict[str, np.ndarray], device: str) -> None:
        import torch

        table = case.variant.impls.get(FAMILY) or {}
        self.case, self.bufs = case, case.buffers()
        self.arrays: dict[str, Any] = {}
        for name, buf in self.bufs.items():
            if buf.role == "input":
                self.arrays[name] = to_torch(inputs[name], buf.dtype, device)
            else:
                self.arrays[name] = torch.empty(buf.shape, device=device,
                                                dtype=torch_dtype(buf.dtype))
        self._calls: list[Callable[[], None]] = []
        self.facts: list[LaunchFacts] = []
        for la in case.launches():
            impl = table.get(la.kernel)
            if impl is None:
                raise CaseUnsupported(f"no Triton kernel for launch {la.kernel}")
            try:
                self._calls.append(impl.prepare(case, la, self.arrays))
            except ValueError as e:
                raise CaseUnsupported(first_line(e, typed=False)) from None
            self.facts.append(LaunchFacts(function=impl.describe()))

    def poison(self) -> None:
        import torch

        for name, buf in self.bufs.items():
            if buf.role != "input" and buf.dtype == "fp8":
                self.arrays[name].view(torch.uint8).fill_(0x7F)  # e4m3fn NaN, by its bits
            elif buf.role != "input":
                self.arrays[name].fill_(float("nan"))

    def outputs(self) -> dict[str, np.ndarray]:
        return {n: to_numpy(self.arrays[n], b.dtype) for n, b in self.bufs.items()
                if b.role == "output"}

    def launch_facts(self) -> list[LaunchFacts]:
        return list(self.facts)

    def close(self) -> None:
        self.arrays.clear()


class TritonBackend(CupyRoofPairs, Backend):
    name = "triton"
    family = FAMILY
    kind = "gpu"

    @classmethod
    def unavailable_reason(cls) -> str | None:
        if interpreting():
            return ("TRITON_INTERPRET=1 runs kernels in numpy on the CPU: an interpreter "
                    "run is never timed (unset it to time on a GPU)")
        try:
            import torch
            import triton  # noqa: F401
        except Exception as e:
            return f"triton and torch are needed ({first_line(e)})"
        if not torch.cuda.is_available():
            return "no CUDA device (torch.cuda.is_available() is False)"
        return None

    def __init__(self) -> None:
        import torch

        self.torch = torch
        self.props = torch.cuda.get_device_properties(0)
        self.cc = torch.cuda.get_device_capability(0)
        self._flush: Any = None

    def device_name(self) -> str:
        return str(self.props.name)

    def info(self) -> dict[str, Any]:
        import triton

        free, total = self.torch.cuda.mem_get_info()
        return {"kind": "gpu", "name": self.device_name(),
                "compute_capability": f"{self.cc[0]}.{self.cc[1]}",
                "sm_count": int(self.props.multi_processor_count),
                "l2_bytes": self.last_level_cache(), "mem_total": total, "mem_free": free,
                "triton_version": triton.__version__, "torch_version": self.torch.__version__}

    def memory_budget(self) -> int:
        free, _ = self.torch.cuda.mem_get_info()
        return int(free // 2)

    def last_level_cache(self) -> int:
        return int(getattr(self.props, "L2_cache_size", 0) or 40 << 20)

    def supports(self, case: Case) -> str | None:
        why = super().supports(case) or refuse_dtype(case)
        if why is None and case.dtype == "fp8" and self.cc < (8, 9):
            return "fp8 e4m3 tl.dot needs sm_89 or newer"
        return why

    def prepare(self, case: Case, inputs: dict[str, np.ndarray]) -> TritonPrepared:
        return TritonPrepared(case, inputs, "cuda")

    def _flush_l2(self) -> None:
        if self._flush is None:
            self._flush = self.torch.empty(2 * self.last_level_cache(), dtype=self.torch.uint8,
                                           device="cuda")
        self._flush.zero_()

    def time(self, fn: Callable[[], None], cfg: TimerConfig,
             pair: RoofPair | None = None) -> Timing:
        torch = self.torch
        ops = EventOps(new_event=lambda: torch.cuda.Event(enable_timing=True),
                       record=lambda ev: ev.record(), wait=lambda ev: ev.synchronize(),
                       elapsed_s=lambda a, b: a.elapsed_time(b) / 1e3, flush_l2=self._flush_l2)
        return cuda_time(fn, cfg, ops, pair=pair)

    def measure_roofs(self, quick: bool = False,
                      progress: Callable[[str], None] | None = None,
                      checkpoint: Callable[[RoofSet], None] | None = None) -> RoofSet:
        from .gpu_roofs import roofs_through_cupy

        return roofs_through_cupy(quick, progress, checkpoint)
