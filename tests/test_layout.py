"""The architecture's promises: one import name, dependencies pointing one way."""

from __future__ import annotations

import ast
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def imports_of(path: Path) -> set[str]:
    tree = ast.parse(path.read_text())
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom):
            mod = node.module or ""
            if node.level:  # relative: resolve against the module's package
                rel = path.parent.relative_to(ROOT).parts
                pkg = ["roofbench", *rel]
                base = pkg[: len(pkg) - (node.level - 1)]
                mod = ".".join(base + ([mod] if mod else []))
            names.add(mod)
    return names


@pytest.mark.parametrize("folder", ["kernels", "roofs"])
def test_kernels_and_roofs_never_import_bench(folder):
    offenders = {str(p.relative_to(ROOT)): sorted(i for i in imports_of(p)
                                                   if i.startswith("roofbench.bench"))
                 for p in (ROOT / folder).rglob("*.py")}
    assert {k: v for k, v in offenders.items() if v} == {}


def test_every_code_folder_is_a_listed_package():
    """A sub-package missing from pyproject's list would vanish from an installed copy."""
    import tomllib

    listed = set(tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
                 ["packages"])
    found = {"roofbench"} | {
        ".".join(["roofbench", *p.parent.relative_to(ROOT).parts])
        for folder in ("kernels", "bench", "roofs") for p in (ROOT / folder).rglob("__init__.py")}
    assert found == listed


def test_code_folders_install_under_one_name():
    import roofbench.bench
    import roofbench.kernels
    import roofbench.roofs

    assert Path(roofbench.kernels.__file__).parent == ROOT / "kernels"
    assert Path(roofbench.bench.__file__).parent == ROOT / "bench"
    assert Path(roofbench.roofs.__file__).parent == ROOT / "roofs"
    # The install adds no generic top-level `bench`/`kernels`/`roofs` (checked from another
    # folder: the working directory itself is on sys.path under `python -m pytest`).
    code = ("import importlib.util as u, sys; "
            "print([n for n in ('bench', 'kernels', 'roofs') "
            f"if (s := u.find_spec(n)) and s.origin and s.origin.startswith({str(ROOT)!r})])")
    out = subprocess.run([sys.executable, "-c", code], cwd="/", capture_output=True,
                         text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[]"


def test_offline_setup_installs_nothing_and_names_the_interpreter():
    """ROOFBENCH_NO_INSTALL=1: make bench on an offline GPU box uses the interpreter as is."""
    env = {**os.environ, "ROOFBENCH_NO_INSTALL": "1", "PYTHON": sys.executable,
           "VENV": "/nonexistent-venv"}
    out = subprocess.run(["bash", str(ROOT / "scripts" / "setup_env.sh")], env=env,
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == shutil.which(sys.executable) or \
        Path(out.stdout.strip()).resolve() == Path(sys.executable).resolve()
    assert "no install" in out.stderr
    assert not Path("/nonexistent-venv").exists()
