"""The user's own code failed: said as the user's, never as "a bug in roofbench".

A program given to ``roofbench model`` / ``profile()``, a side of ``roofbench ab``, a cases
factory: when it raises (or calls ``sys.exit``), the command ends with one line that names
the user's error and where it was raised, exit 1 (a case that raised; README "Exit codes"),
or 4 when what failed was an allocation (``MemoryError``, torch's and XLA's out-of-memory
errors). An exception whose innermost frame is roofbench's own code stays roofbench's: a
bug, exit 70.
"""

from __future__ import annotations

import importlib.util
import sys
import traceback
from importlib.abc import Loader
from pathlib import Path
from types import ModuleType

import roofbench
from roofbench.boundary import EXIT_FAILED, EXIT_MEMORY, Refusal
from roofbench.errors_text import first_line

from ..errors import UserError

_PKG = Path(roofbench.__file__).resolve().parent
# roofbench's own code: the package, and in a checkout the folders beside it (bench, kernels,
# roofs), which install inside it
OWN = (_PKG, *(_PKG.parent / d for d in ("bench", "kernels", "roofs")))
LIBRARIES = ("site-packages", "dist-packages", f"python{sys.version_info[0]}.")

# What torch, XLA and the allocators say when memory cannot be had.
OOM_WORDS = ("out of memory", "can't allocate memory", "resource_exhausted",
             "failed to allocate", "cannot allocate memory")


class UserCodeError(Refusal):
    """The user's code raised: one line naming its error, exit 1 (4 for memory)."""

    code = EXIT_FAILED


def _own(filename: str) -> bool:
    try:
        p = Path(filename).resolve()
    except (OSError, ValueError):
        return False
    return any(p.is_relative_to(d) for d in OWN)


def raised_by_user(e: BaseException) -> bool:
    """Whether ``e`` was raised outside roofbench's own code (its innermost frame)."""
    if isinstance(e, (SystemExit, MemoryError)):
        return True
    frames = traceback.extract_tb(e.__traceback__)
    return bool(frames) and not _own(frames[-1].filename)


def _where(e: BaseException) -> str:
    """' (at prog.py:12)': the innermost frame of the user's own files, if any."""
    for f in reversed(traceback.extract_tb(e.__traceback__)):
        if not _own(f.filename) and not any(w in f.filename for w in LIBRARIES) \
                and not f.filename.startswith("<"):
            return f" (at {Path(f.filename).name}:{f.lineno})"
    return ""


def is_oom(e: BaseException) -> bool:
    return isinstance(e, MemoryError) or any(w in str(e).lower() for w in OOM_WORDS)


def users_failure(e: BaseException, what: str) -> UserCodeError:
    """The one-line error of the user's code ``what`` raising ``e``."""
    if isinstance(e, SystemExit):
        return UserCodeError(f"{what} called sys.exit({e.code!r})")
    line = f"{what} raised {first_line(e)}{_where(e)}"
    if is_oom(e):
        return UserCodeError(f"out of memory: {line}", EXIT_MEMORY)
    return UserCodeError(line)


def file_module(path: Path, shown: str, name: str) -> tuple[ModuleType, Loader]:
    """The module of the user's Python file ``path`` (``shown``: as the user named it) under
    ``name``, not yet run, and the loader that runs it; a one-line UserError when there is no
    such file or it is not Python. Running it is the caller's: each says its failure itself."""
    if not path.is_file():
        raise UserError(f"{shown}: no such file")
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise UserError(f"{shown}: not a Python file")
    return importlib.util.module_from_spec(spec), spec.loader
