"""The real run every hostile CLI test starts from."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from testpaths import REAL_CPU_RUN


@pytest.fixture
def run_dir(tmp_path: Path) -> Path:
    """A real run's results.json cut to four cases (reports and plots take a second)."""
    d = json.loads(REAL_CPU_RUN.read_text())
    d["cases"] = d["cases"][:4]
    folder = tmp_path / "run"
    folder.mkdir()
    (folder / "results.json").write_text(json.dumps(d, indent=1))
    (folder / "results.csv").write_text("workload\n")
    return folder
