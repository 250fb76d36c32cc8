"""Frozen declarations that the readers fill older files from (never today's workloads).

A file is read as it was written: what it lacks is filled from the declarations of the time it
was written, copied here once, so that editing a workload today never changes how an old file
reads or draws.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class UnitRule:
    """A variant whose unit depends on where it runs (``Variant.unit_on`` of its time)."""

    dtypes: tuple[str, ...]
    tensor_on_gpu: tuple[str, ...]  # dtypes it ran on tensor cores on a GPU

    def unit(self, kind: str, dtype: str) -> str:
        return "tensor" if kind == "gpu" and dtype in self.tensor_on_gpu else "simt"


# Results version 1 (roofbench up to ea800a6): the one variant whose unit depended on the
# backend. cuBLAS runs HGEMM/BF16 and DGEMM on tensor cores, SGEMM on CUDA cores; a CPU BLAS
# on the SIMD lanes.
V1_UNIT_ON: dict[tuple[str, str], UnitRule] = {
    ("gemm", "library"): UnitRule(dtypes=("fp32", "fp64", "fp16"),
                                  tensor_on_gpu=("fp16", "bf16", "fp64")),
}
