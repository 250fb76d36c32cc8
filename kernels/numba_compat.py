"""Compatibility of numba-cuda with the installed numpy, applied on import (numpy only, cheap).

numpy 2.5 removed ``numpy.row_stack`` (a deprecated alias of ``vstack``), but numba-cuda 0.30.4
still registers an overload of it when its registries load on the first compile, so every Numba
CUDA kernel failed on the H200 image (numpy 2.5.2) with ``AttributeError: module 'numpy' has
no attribute 'row_stack'``. Import this module before numba-cuda compiles anything; it is a
no-op where numpy still has the alias.
"""

from __future__ import annotations

import numpy


def restore_row_stack() -> bool:
    """Put ``numpy.row_stack = numpy.vstack`` back when missing; True when it was missing."""
    if hasattr(numpy, "row_stack"):
        return False
    numpy.row_stack = numpy.vstack  # numba-cuda <= 0.30 references it (removed in numpy 2.5)
    return True


restore_row_stack()
