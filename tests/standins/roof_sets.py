"""Small hand-written roof sets (the roofs JSON a run reads with --roofs), so the tests that
run a case need not spend time measuring roofs."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any


def _roof(name: str, value: float, level: str | None = None,
          precision: str | None = None) -> dict[str, Any]:
    """A measured memory roof (``level``) or compute roof (``precision``)."""
    kind = {"kind": "memory", "level": level} if level else {"kind": "compute",
                                                             "precision": precision}
    return {"name": name, **kind, "value": value, "source": "measured"}


TEST_CPU: dict[str, Any] = {"device": "test cpu", "roofs": [
    _roof("dram", 2e10, level="dram"), _roof("fp32", 2e11, precision="fp32"),
    _roof("fp64", 1e11, precision="fp64")]}

# An H200-like device for the emulated CUDA backends.
FAKE_GPU: dict[str, Any] = {"device": "Fake Emulated GPU", "roofs": [
    _roof("hbm", 4e12, level="dram"), _roof("fp32", 6e13, precision="fp32"),
    _roof("fp16 tc", 9e14, precision="fp16_tc")]}


def write_roofs(path: Path, roofs: dict[str, Any] = TEST_CPU) -> Path:
    """``roofs`` as JSON at ``path``; returns ``path``."""
    path.write_text(json.dumps(roofs))
    return path


def model_files(folder: Path, program: str, roofs: dict[str, Any] = TEST_CPU,
                name: str = "prog.py") -> tuple[Path, Path]:
    """What `roofbench model` reads: a script ``name`` whose ``program()`` returns the
    expression ``program`` (a ``(fn, args)`` pair, torch imported), and a roofs file beside
    it; returns (script, roofs)."""
    script = folder / name
    script.write_text(f"import torch\ndef program():\n    return {program}\n")
    return script, write_roofs(folder / "roofs.json", roofs)
