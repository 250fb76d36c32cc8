"""Atomic file writes, shared by every folder (results, calibrated roofs, fleet reports).

A temporary file in the target's folder is written, flushed to disk, then renamed over the
target: a reader never sees a half-written file, and an interrupted write leaves the old one.
No write replaces a roofbench results file but the run's own save (``replace_results``): a
report, a plot or a roofs file sent onto one is refused (one line, exit 2), whatever the command.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

RESULTS_MARK = b'"schema": "roofbench.results"'  # the first key of every results.json


def is_results_file(path: Path) -> bool:
    """Whether ``path`` is a file that a run wrote (its results.json, under any name)."""
    try:
        with open(path, "rb") as f:
            return RESULTS_MARK in f.read(4096)
    except OSError:
        return False


def atomic_write_bytes(path: Path, data: bytes, *, replace_results: bool = False) -> None:
    path = Path(path)
    if not replace_results and path.is_file() and is_results_file(path):
        from .boundary import Refusal

        raise Refusal(f"{path} is a roofbench results file: refusing to replace it "
                      "(write elsewhere)")
    # A stop signal between the temporary file's creation and the `try` that removes it would
    # leave it behind: held back until that `try` is entered, then raised there.
    held = _hold_stops()
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    except OSError as e:  # said of the file being written, not of a temporary name
        _release(held)
        raise OSError(e.errno, e.strerror, str(path)) from None
    except BaseException:
        _release(held)
        raise
    try:
        _release(held)
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        # mkstemp makes the file 0600; a results file is shared like any other (umask applies)
        os.chmod(tmp, 0o666 & ~_umask())
        os.replace(tmp, path)
    except OSError as e:
        Path(tmp).unlink(missing_ok=True)
        raise OSError(e.errno, e.strerror, str(path)) from None
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def atomic_write_text(path: Path, text: str, *, replace_results: bool = False) -> None:
    """UTF-8; a path that is not valid UTF-8 (its bytes held as surrogate escapes) is written
    as its escapes (``\\udce9``), readable in every locale, never an error."""
    atomic_write_bytes(path, text.encode("utf-8", "backslashreplace"),
                       replace_results=replace_results)


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


_STOPS = ("SIGINT", "SIGTERM", "SIGHUP")


def _hold_stops() -> object:
    """Block the stop signals in this thread (POSIX); what to restore."""
    import signal

    if not hasattr(signal, "pthread_sigmask"):
        return None
    stops = {getattr(signal, n) for n in _STOPS if hasattr(signal, n)}
    return signal.pthread_sigmask(signal.SIG_BLOCK, stops)


def _release(held: object) -> None:
    import signal

    if held is not None:
        signal.pthread_sigmask(signal.SIG_SETMASK, held)  # type: ignore[arg-type]
