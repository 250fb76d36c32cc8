"""Where roofbench writes, and how a child process finds roofbench.

Results (``results/``) go under ``$ROOFBENCH_HOME``, else the working directory: never into
the installed package (a non-editable install would otherwise write into site-packages). A
checkout run from its root (``make bench``) therefore writes where it always did.

The calibration cache (``roofs/<device>.json``, one per user and device) goes under
``$ROOFBENCH_HOME`` when it is set (it wins, as documented), else the per-user cache
directory (platformdirs' ``user_cache_dir``: ``~/.cache/roofbench`` on Linux): never the
working folder, so every folder a user works in sees the same roofs.
"""

from __future__ import annotations

import os
from pathlib import Path

HOME_ENV = "ROOFBENCH_HOME"


def home() -> Path:
    """The folder results and the calibration cache go under: $ROOFBENCH_HOME, else the
    working directory."""
    return Path(os.environ.get(HOME_ENV) or Path.cwd())


def cache_home() -> Path:
    """The folder the calibration cache goes under (``roofs/`` inside it): $ROOFBENCH_HOME
    when set, else the per-user cache directory."""
    if os.environ.get(HOME_ENV):
        return Path(os.environ[HOME_ENV])
    try:
        from platformdirs import user_cache_dir
    except ImportError:  # a dependency; a bare checkout without it uses the XDG default
        base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
        return Path(base) / "roofbench"
    return Path(user_cache_dir("roofbench", appauthor=False))


def package_parent() -> Path:
    """The folder from which ``python -m roofbench...`` finds this package (a checkout root or
    site-packages): read only, to start children."""
    import roofbench

    return Path(roofbench.__file__).resolve().parent.parent


def child_env(**extra: str) -> dict[str, str]:
    """The environment of a ``python -m roofbench...`` child: this one, with the package's
    folder first on PYTHONPATH (a checkout that is not installed is found from any working
    directory), plus ``extra``."""
    path = [str(package_parent()), *filter(None, os.environ.get("PYTHONPATH", "").split(
        os.pathsep))]
    return {**os.environ, "PYTHONPATH": os.pathsep.join(dict.fromkeys(path)), **extra}
