"""Can this interpreter run roofbench from the source tree (no install)? One line when it cannot.

Used by scripts/setup_env.sh's offline path. Checks pyproject's dependencies by import name (the
same as the project names here) without importing them, then builds the command line from this
checkout (first on the path, as under ``python -m`` from its root), which imports every command
module. Exit 1 with the reason.
"""

from __future__ import annotations

import importlib.util
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def dependencies() -> list[str]:
    try:
        import tomllib
    except ImportError:  # Python 3.10: only the command modules are checked
        return []
    with open(ROOT / "pyproject.toml", "rb") as f:
        deps = tomllib.load(f)["project"]["dependencies"]
    return [re.split(r"[<>=!~\[; ]", d)[0].replace("-", "_") for d in deps]


def main() -> int:
    missing = [n for n in dependencies() if importlib.util.find_spec(n) is None]
    if missing:
        print(f"missing packages: {', '.join(missing)}", file=sys.stderr)
        return 1
    sys.path.insert(0, str(ROOT))
    try:
        from roofbench.bench.cli import build_parser

        build_parser()
    except ImportError as e:
        print(f"roofbench does not import: {type(e).__name__}: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
