"""Compatibility of numba-cuda with the machine, applied on import (cheap, no numba import).

numpy 2.5 removed ``numpy.row_stack`` (a deprecated alias of ``vstack``), but numba-cuda 0.30.4
still registers an overload of it when its registries load on the first compile, so every Numba
CUDA kernel failed on the H200 image (numpy 2.5.2) with ``AttributeError: module 'numpy' has
no attribute 'row_stack'``. Import this module before numba-cuda compiles anything; it is a
no-op where numpy still has the alias.

libNVVM: numba-cuda 0.30 finds it through cuda-pathfinder, which searches the pip wheels (the
GPU image has no nvidia-nvvm wheel) and the system's library path (the toolkit's
``nvvm/lib64`` is not on it); failing that, numba infers the toolkit from NVRTC's location, but
only when NVRTC itself came from a system search: when it came from site-packages (the
nvidia-cuda-nvrtc wheel) it gives up, and no Numba kernel compiles. ``CUDA_HOME`` pointing at
a toolkit that has ``nvvm/`` is what pathfinder then needs: set on import when unset.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import numpy


def restore_row_stack() -> bool:
    """Put ``numpy.row_stack = numpy.vstack`` back when missing; True when it was missing."""
    if hasattr(numpy, "row_stack"):
        return False
    numpy.row_stack = numpy.vstack  # numba-cuda <= 0.30 references it (removed in numpy 2.5)
    return True


def nvvm_home() -> str | None:
    """The CUDA toolkit root whose ``nvvm/`` numba-cuda should use: the one of ``nvcc`` on
    PATH, else /usr/local/cuda; None when CUDA_HOME or CUDA_PATH is already set or no toolkit
    here has ``nvvm/``."""
    if os.environ.get("CUDA_HOME") or os.environ.get("CUDA_PATH"):
        return None
    roots = []
    nvcc = shutil.which("nvcc")
    if nvcc:
        roots.append(Path(nvcc).resolve().parent.parent)
    roots.append(Path("/usr/local/cuda"))
    for root in roots:
        if (root / "nvvm").is_dir():
            return str(root)
    return None


def point_numba_at_nvvm() -> str | None:
    """Set CUDA_HOME to ``nvvm_home()`` when it finds one (before numba reads it); returns it."""
    home = nvvm_home()
    if home is not None:
        os.environ["CUDA_HOME"] = home
    return home


restore_row_stack()
point_numba_at_nvvm()
