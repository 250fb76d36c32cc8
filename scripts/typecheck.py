"""Type-check roofbench with mypy (``make test`` runs it; config in pyproject.toml).

The code folders install under one import name (``kernels/`` is ``roofbench.kernels``), a
mapping mypy cannot follow from the source tree. So the package is laid out as installed, in
build/typecheck/roofbench/ (links to the real files), and mypy checks ``-p roofbench`` there;
its messages name the real files. Exit status: mypy's.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
FOLDERS = ("kernels", "roofs", "bench")


def shadow_tree() -> Path:
    base = ROOT / "build" / "typecheck"
    pkg = base / "roofbench"
    if pkg.exists():
        shutil.rmtree(pkg)
    pkg.mkdir(parents=True)
    for f in (ROOT / "roofbench").glob("*.py"):
        (pkg / f.name).symlink_to(f)
    for d in FOLDERS:
        (pkg / d).symlink_to(ROOT / d, target_is_directory=True)
    return base


def cache_dir() -> str:
    """mypy's cache: $MYPY_CACHE_DIR, else one per user (platformdirs), shared by every
    checkout. mypy names the modules by their path relative to the shadow tree and takes an
    entry whose file's bytes are unchanged (its hash) whatever the file's time: a fresh clone
    (CI) checks in a second or two instead of about half a minute."""
    import os

    given = os.environ.get("MYPY_CACHE_DIR")
    if given:
        return given
    from platformdirs import user_cache_dir

    return str(Path(user_cache_dir("roofbench", appauthor=False)) / "mypy")


def main() -> int:
    base = shadow_tree()
    p = subprocess.run([sys.executable, "-m", "mypy", "--config-file",
                        str(ROOT / "pyproject.toml"), "--cache-dir", cache_dir(),
                        "-p", "roofbench"], cwd=base, capture_output=True, text=True)
    out = p.stdout + p.stderr
    for d in FOLDERS:  # name the real files
        out = out.replace(f"roofbench/{d}/", f"{d}/")
    print(out, end="")
    return p.returncode


if __name__ == "__main__":
    sys.exit(main())
