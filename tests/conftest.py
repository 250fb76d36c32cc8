"""Shared fixtures. GPU tests carry the `gpu` marker and skip with a reason without a device."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import roofbench.kernels.numba_compat  # noqa: F401  (numpy 2.5 vs numba-cuda 0.30)


def _gpu_reason() -> str | None:
    try:
        import cupy  # noqa: F401
    except Exception as e:  # ImportError, or a CUDA library error at import
        return f"no GPU: CuPy is not importable ({type(e).__name__})"
    try:
        import cupy

        if cupy.cuda.runtime.getDeviceCount() < 1:
            return "no GPU: CUDA reports no device"
    except Exception as e:
        return f"no GPU: {type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}"
    return None


def pytest_collection_modifyitems(config, items):
    reason = None
    checked = False
    for item in items:
        if "gpu" in item.keywords:
            if not checked:
                reason, checked = _gpu_reason(), True
            if reason:
                item.add_marker(pytest.mark.skip(reason=reason))


@pytest.fixture
def roofs_file(tmp_path: Path) -> Path:
    """A small hand-written roof set, so CLI tests need not spend time measuring roofs."""
    p = tmp_path / "roofs.json"
    p.write_text(json.dumps({"device": "test cpu", "roofs": [
        {"name": "dram triad", "kind": "memory", "level": "dram", "value": 2e10,
         "source": "measured"},
        {"name": "fp32 fma", "kind": "compute", "precision": "fp32", "value": 2e11,
         "source": "measured"},
        {"name": "fp64 fma", "kind": "compute", "precision": "fp64", "value": 1e11,
         "source": "measured"}]}))
    return p
