"""The suite's case lists, derived from the registry and each workload's own declaration
(kernels/spec.py: ``Workload.test_sizes``), so that a new workload module is checked without a
line here: the CPU kernels against the float64 reference (tests/kernels/test_cpu_kernels.py)
and every GPU family on a device (tests/bench/backends/test_gpu.py)."""

from __future__ import annotations

from roofbench.kernels.registry import workloads
from roofbench.kernels.spec import Size

CPU_DTYPES = ("fp32", "fp64")
Row = tuple[str, str, str, Size]  # workload, variant, dtype, size


def case_id(c: Row) -> str:
    return f"{c[0]}-{c[1]}-{c[2]}-{'x'.join(map(str, c[3]))}"


def cpu_cases() -> list[Row]:
    """Every CPU variant in fp32 and fp64 (those it runs) at its workload's CPU sizes."""
    return [(w.name, v.name, d, s) for w in workloads().values() for v in w.variants.values()
            if "cpu" in v.impls for d in CPU_DTYPES if d in v.dtypes
            for s in w.suite_sizes().cpu]


def gpu_cases(family: str) -> list[Row]:
    """Every variant of a GPU family (an impls key: "cuda", "numba_cuda", ...) in each dtype
    it declares, at its workload's GPU sizes."""
    return [(w.name, v.name, d, s) for w in workloads().values() for v in w.variants.values()
            if family in v.impls for d in v.dtypes for s in w.suite_sizes().gpu]
