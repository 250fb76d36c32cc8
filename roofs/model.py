"""The Roofline model's vocabulary: memory levels, precisions, device keys.

A roof is either a bandwidth ceiling of one memory level (bytes/s) or a compute ceiling of one
precision on one unit (FLOP/s). Attainable performance of a kernel with arithmetic intensity
``ai`` (FLOP per byte of one level) is ``min(compute, bandwidth * ai)``. The records themselves
(Roof, RoofSet and where a point sits under them) are in roofbench/schema.py with every other
record written to disk.
"""

from __future__ import annotations

import re

# Memory levels, outermost first. "dram" is the off-chip memory (HBM on a GPU, DDR on a CPU):
# the same key everywhere so that kernel accounting does not depend on the device.
LEVELS = ("dram", "l2", "l1", "smem")
LEVEL_LABELS = {"dram": "DRAM/HBM", "l2": "L2", "l1": "L1", "smem": "shared mem"}

# Compute precisions. A "_tc" suffix is the tensor-core (matrix unit) roof of that precision.
PRECISIONS = (
    "fp64", "fp32", "fp16", "bf16", "fp8",
    "fp64_tc", "tf32_tc", "fp16_tc", "bf16_tc", "fp8_tc",
)


def device_slug(name: str) -> str:
    """A file-name-safe key for a device: 'NVIDIA H200' -> 'nvidia-h200'."""
    s = re.sub(r"[^a-z0-9]+", "-", name.lower()).strip("-")
    return s or "unknown-device"
