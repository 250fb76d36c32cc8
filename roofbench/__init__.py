"""roofbench: GPU kernel micro-benchmarks on the Roofline model.

The code lives in three folders installed under this one import name:
``roofbench.kernels`` (what is measured), ``roofbench.roofs`` (what the hardware can do) and
``roofbench.bench`` (how it is measured and shown). ``roofbench.measure`` and
``roofbench.Session`` (bench/measure/api.py) put one's own kernel on this device's roofline;
``roofbench.profile`` (bench/profile/torch_program.py) every op of a PyTorch program;
``roofbench.tune`` (bench/tune/search.py) searches a kernel's configurations against its roof.
"""

import os as _os
from pathlib import Path as _Path

__version__ = "0.1.0"

# This process's cores as it started, before an OpenMP runtime could pin its main thread to
# one (OMP_PROC_BIND, GOMP_CPU_AFFINITY): what a CPU probe counts as the caller's choice
# (roofs/probes/cpu_env.py).
START_AFFINITY = frozenset(_os.sched_getaffinity(0)) if hasattr(_os, "sched_getaffinity") \
    else None

# Source tree without an install (a GPU box with no network, `python -m` from a checkout):
# kernels/, bench/ and roofs/ sit beside this folder, so the checkout root joins the package
# path and `roofbench.bench` resolves to ./bench. An installed copy holds them inside this
# folder (setuptools' package-dir mapping) and needs nothing.
_root = _Path(__file__).resolve().parent.parent
if not (_Path(__file__).resolve().parent / "kernels").is_dir() and all(
        (_root / d / "__init__.py").is_file() for d in ("kernels", "bench", "roofs")):
    __path__.append(str(_root))  # noqa: F821 (the package's own __path__)


def __getattr__(name: str):
    # The user API, imported on first use: an eager import would make every module of the
    # shared root pull in the floors above it (and numba); the one upward import of the root.
    if name in ("measure", "Session"):
        from .bench.measure import api

        return getattr(api, name)
    if name == "tune":  # a kernel's configurations searched against its roof (bench/tune)
        from .bench.tune import search

        return search.tune
    if name == "profile":  # every aten op of a PyTorch program on the roofs (or a jitted JAX)
        from .bench.profile import torch_program

        return torch_program.profile
    if name == "trace":  # a PyTorch profiler trace's ops on the roofs (bench/trace/api.py)
        from .bench.trace import api as trace_api

        return trace_api.trace
    raise AttributeError(f"module 'roofbench' has no attribute {name!r}")
