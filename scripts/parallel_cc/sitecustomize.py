"""Compile the C/C++ sources of one setuptools extension in parallel (PYTHONPATH-only helper).

PyCUDA's extension has ~45 C++ sources (its Boost.Python subset) that setuptools compiles one
after another: minutes on one core. scripts/pycuda_offline.sh puts this folder on PYTHONPATH
for its pip build only; PARALLEL_CC_JOBS sets the number of compiler processes. Each source
goes through setuptools' own ``compile`` (same flags, same objects), so only the order changes.
Anything unexpected leaves setuptools as it is.
"""

from __future__ import annotations

import os
from concurrent.futures import ThreadPoolExecutor


def _patch() -> None:
    jobs = int(os.environ.get("PARALLEL_CC_JOBS", "0") or 0)
    if jobs < 2:
        return
    try:
        from setuptools._distutils import ccompiler
    except Exception:  # no setuptools here, or a layout this helper does not know
        return
    serial = ccompiler.CCompiler.compile

    def compile(self, sources, *args, **kwargs):  # noqa: A001 (distutils' method name)
        if len(sources) < 2:
            return serial(self, sources, *args, **kwargs)
        with ThreadPoolExecutor(min(jobs, len(sources))) as ex:
            parts = list(ex.map(lambda s: serial(self, [s], *args, **kwargs), sources))
        return [obj for part in parts for obj in part]

    ccompiler.CCompiler.compile = compile


_patch()
