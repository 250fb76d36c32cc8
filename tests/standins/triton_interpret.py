"""Triton under its interpreter (TRITON_INTERPRET=1, numpy on the CPU) for one test file.

Triton decorates its own library (tl.sum, ...) as the interpreter's functions only when the
variable is set at its import; and the variable must be as it was outside the file: an xdist
worker collects every file before it runs any, and the other files' tests must not run under
it (roofbench.measure refuses to time an interpreter)."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from types import ModuleType

import pytest


@contextlib.contextmanager
def triton_interpret() -> Iterator[None]:
    """TRITON_INTERPRET=1 inside; after, the variable as it was (unset, or its value)."""
    was = os.environ.get("TRITON_INTERPRET")
    os.environ["TRITON_INTERPRET"] = "1"
    try:
        yield
    finally:
        if was is None:
            os.environ.pop("TRITON_INTERPRET", None)
        else:
            os.environ["TRITON_INTERPRET"] = was


def import_interpreted_triton(reason: str = "triton is not installed") -> ModuleType:
    """triton, imported (or skipped with ``reason``) with the variable set for the import only."""
    with triton_interpret():
        return pytest.importorskip("triton", reason=reason)
