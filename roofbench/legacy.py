"""Frozen declarations that the readers fill older files from (never today's workloads).

A file is read as it was written: what it lacks is filled from the declarations of the time it
was written, copied here once, so that editing a workload today never changes how an old file
reads or draws.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class CoresRule:
    """A variant whose cores depend on where it runs (``Variant.cores_on`` of its time)."""

    dtypes: tuple[str, ...]
    tensor_on_gpu: tuple[str, ...]  # dtypes it ran on tensor cores on a GPU

    def cores(self, kind: str, dtype: str) -> str:
        return "tensor" if kind == "gpu" and dtype in self.tensor_on_gpu else "simt"


# Results version 1 (roofbench up to ea800a6): the one variant whose cores depended on the
# backend. cuBLAS runs HGEMM/BF16 and DGEMM on tensor cores, SGEMM on CUDA cores; a CPU BLAS
# on the SIMD lanes.
V1_CORES_ON: dict[tuple[str, str], CoresRule] = {
    ("gemm", "library"): CoresRule(dtypes=("fp32", "fp64", "fp16"),
                                  tensor_on_gpu=("fp16", "bf16", "fp64")),
}


@dataclass(frozen=True)
class WorkloadFacts:
    """What a report shows of a workload: its plot marker and FLOP convention."""

    marker: str
    flop_convention: str


# Results before version 3 stored no report facts; these are the declarations of every
# workload that existed then (roofbench up to fb21157).
WORKLOADS: dict[str, WorkloadFacts] = {
    "vector_add": WorkloadFacts("o", "vector_add: 1 FLOP (the add) per element"),
    "l2norm": WorkloadFacts(
        "s", "l2norm: mul and add = 1 FLOP each; sqrt not counted (special-function op)"),
    "rownorm": WorkloadFacts(
        "D", "rownorm: 3 FLOPs per element (square, accumulate, scale) + 1 per row (+eps); "
             "rsqrt/sqrt not counted; per-row bytes (row sums, scales) counted; fused's second "
             "read of x counted as DRAM traffic though it may hit cache"),
    "gemm": WorkloadFacts(
        "^", "gemm: 2 FLOPs per multiply-add (2MNK); bytes = every matrix moved once"),
    "gemv": WorkloadFacts(
        "v", "gemv: 2 FLOPs per multiply-add (2MK); bytes = W, x and y moved once"),
    "attention": WorkloadFacts(
        "*", "attention: 4d + 4 FLOPs per score (2d QK^T, 2d PV, 4 softmax: scale, max, "
             "subtract, sum); exp and the normalisation not counted"),
    "attention_causal": WorkloadFacts(
        "P", "attention_causal: 4d + 4 FLOPs per score (2d QK^T, 2d PV, 4 softmax: scale, "
             "max, subtract, sum); exp and the normalisation not counted; only the N(N+1)/2 "
             "scores on or below the diagonal counted"),
}
# (workload, variant) -> the variant it is fused from (Variant.arrow_from)
ARROW_FROM: dict[tuple[str, str], str] = {
    ("vector_add", "vec4"): "scalar",
    ("l2norm", "fused"): "naive",
    ("rownorm", "fused"): "naive",
    ("rownorm", "onepass"): "fused",
    ("gemm", "tensor"): "regblock",
    ("attention", "flash"): "naive",
    ("attention_causal", "flash"): "naive",
}
# Kernel function prefixes that had not run on hardware when the file was written.
NOT_VALIDATED_ON_HARDWARE: frozenset[str] = frozenset({
    "gemm_wgmma", "attn_scores", "attn_softmax", "attn_pv", "attn_flash", "gemv_warp",
})


# Where each field of a flat case (results.json versions 1 to 3) lives in the nested record
# (version 4: roofbench/records.py CaseResult), by group.
FLAT_CASE_GROUPS: dict[str, tuple[str, ...]] = {
    "identity": ("workload", "variant", "backend", "dtype", "size", "precision", "cores",
                 "occupancy_level"),
    "declaration": ("flops", "bytes", "ai", "tolerance", "marker", "flop_convention",
                    "arrow_from", "limit_note", "buffers"),
    "outcome": ("status", "checked", "error", "rel_error"),
    "measurement": ("timing", "median_s", "launches", "phases", "device_phases"),
    "roofline": ("flop_per_s", "bytes_per_s", "attainable", "efficiency", "bound",
                 "limiting_roof", "placement", "roof_states"),
    "evidence": ("extra", "ncu"),
}


def nest_flat_case(d: dict[str, Any]) -> dict[str, Any]:
    """A flat case (versions 1 to 3) as the nested record stores it: each field in its group
    (``unit``, the name of ``cores`` before version 3, renamed); ``valid`` folded into the
    status (a case stored "ok" but not valid reads "invalid")."""
    d = dict(d)
    if "cores" not in d and "unit" in d:
        d["cores"] = d.pop("unit")
    valid = d.pop("valid", True)
    if not isinstance(valid, bool):
        raise ValueError(f"valid is {valid!r}, not true or false")
    if d.get("status") == "ok" and not valid:
        d["status"] = "invalid"
    return {g: {k: d[k] for k in names if k in d} for g, names in FLAT_CASE_GROUPS.items()}
