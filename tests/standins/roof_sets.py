"""Small hand-written roof sets (the roofs JSON a run reads with --roofs), so the tests that
run a case need not spend time measuring roofs."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

TEST_CPU: dict[str, Any] = {"device": "test cpu", "roofs": [
    {"name": "dram", "kind": "memory", "level": "dram", "value": 2e10, "source": "measured"},
    {"name": "fp32", "kind": "compute", "precision": "fp32", "value": 2e11,
     "source": "measured"},
    {"name": "fp64", "kind": "compute", "precision": "fp64", "value": 1e11,
     "source": "measured"}]}

# An H200-like device for the emulated CUDA backends.
FAKE_GPU: dict[str, Any] = {"device": "Fake Emulated GPU", "roofs": [
    {"name": "hbm", "kind": "memory", "level": "dram", "value": 4e12, "source": "measured"},
    {"name": "fp32", "kind": "compute", "precision": "fp32", "value": 6e13,
     "source": "measured"},
    {"name": "fp16 tc", "kind": "compute", "precision": "fp16_tc", "value": 9e14,
     "source": "measured"}]}


def write_roofs(path: Path, roofs: dict[str, Any] = TEST_CPU) -> Path:
    """``roofs`` as JSON at ``path``; returns ``path``."""
    path.write_text(json.dumps(roofs))
    return path
