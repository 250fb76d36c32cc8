"""Atomic writes (roofbench/fileio.py): a whole file or none, with the umask's mode."""

from __future__ import annotations

from pathlib import Path


def test_atomic_writes_honour_the_umask(tmp_path: Path):
    import os

    from roofbench.fileio import atomic_write_text

    old = os.umask(0o022)
    try:
        atomic_write_text(tmp_path / "r.json", "{}")
    finally:
        os.umask(old)
    assert (tmp_path / "r.json").stat().st_mode & 0o777 == 0o644
    assert [p.name for p in tmp_path.iterdir()] == ["r.json"]
