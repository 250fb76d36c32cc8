"""Numba's frontend once, its backend for every target: the kernels' codegen matrix in one
process per dtype instead of one per target.

A fresh process under NUMBA_CPU_NAME / NUMBA_CPU_FEATURES (codegen_matrix.compile_for) repeats
numba's whole compile for each CPU, though only the LLVM part depends on the CPU: numba's codegen
is a JITCPUCodegen whose target machine is built from those two settings; its libraries
(CPUCodeLibrary) take IR modules (``add_llvm_module``, which runs the function passes), other
libraries to link (``add_linking_library``) and are then optimised and compiled
(``finalize``: link, module passes, MCJIT object), all through that target machine. Here the
host compiles as usual while each of its libraries records the calls made on it (the IR text
as it came, before the host's passes; the libraries it links); the twin of a library for a
target replays those calls, in order, on a library of that target's JITCPUCodegen (built under
its settings), its linked libraries' twins first, and finalizes it: numba's own code on the
same IR. The twin's ``get_asm_str`` is what ``inspect_asm`` gives in a fresh process.

What the twins cannot see is Python that reads the target while numba compiles (the planted
tuning branch picks its function by ``target_cpu()``): a job's function is picked under each
target's numba config (``numba_target``), and compiled for every target once.
tests/kernels/test_cpu_kernels.py compares this path with fresh processes on two targets;
docs/tests.md has the full comparison (every target, every kernel: identical facts).

    python tests/standins/codegen_fanout.py DTYPE UNIT...   (UNIT: kernels, planted)
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from codegen_matrix import FOREIGN, HOST, MATRIX, Target, code_facts, host_target
from patience import patience


@dataclass(frozen=True)
class Job:
    """One listing to read: ``pick`` gives the function to compile (evaluated under each
    target's numba config), ``sig`` its signature, ``fastmath`` numba's option."""

    key: str
    pick: Callable[[], Any]
    sig: tuple
    fastmath: Any = False


@contextmanager
def numba_target(t: Target) -> Iterator[None]:
    """numba.config as a fresh process for ``t`` reads it (the host row: numba's defaults)."""
    from numba.core import config

    saved = config.CPU_NAME, config.CPU_FEATURES
    config.CPU_NAME, config.CPU_FEATURES = (t.cpu, t.features) if t.cpu else (None, None)
    try:
        yield
    finally:
        config.CPU_NAME, config.CPU_FEATURES = saved


class Fanout:
    """Twins every library the host's numba creates from now on, one per target."""

    def __init__(self, targets: list[Target]) -> None:
        from numba.core import codegen as cg

        self.targets = targets
        self.codegens = {}
        self.built_for: dict[str, tuple[str | None, str]] = {}  # CPU name, features of its TM
        for t in targets:
            with numba_target(t):
                gen = cg.JITCPUCodegen("numba.exec")
                self.built_for[t.name] = gen._get_host_cpu_name(), gen._tm_features
            gen._fanout_twin = True  # type: ignore[attr-defined]
            self.codegens[t.name] = gen
        self._install(cg.CPUCodeLibrary, cg.JITCPUCodegen)
        self._memo: dict[tuple, dict[str, Any]] = {}

    def _install(self, lib_cls: Any, gen_cls: Any) -> None:
        add, link = lib_cls.add_llvm_module, lib_cls.add_linking_library

        def add_llvm_module(lib: Any, ll_module: Any) -> None:
            if not getattr(lib.codegen, "_fanout_twin", False):  # before the host's passes
                lib.__dict__.setdefault("_fanlog", []).append(("add", str(ll_module),
                                                               ll_module.name))
            add(lib, ll_module)

        def add_linking_library(lib: Any, other: Any) -> None:
            if not getattr(lib.codegen, "_fanout_twin", False):
                lib.__dict__.setdefault("_fanlog", []).append(("link", other))
            link(lib, other)

        def unserialize_library(gen: Any, serialized: Any) -> Any:
            # numba's cache holds compiled code, no IR to replay: never used here
            raise RuntimeError("a cached library cannot be twinned (NUMBA_CACHE_DIR not fresh?)")

        lib_cls.add_llvm_module, lib_cls.add_linking_library = add_llvm_module, add_linking_library
        gen_cls.unserialize_library = unserialize_library

    def twin(self, lib: Any, target: str) -> Any:
        """``lib`` (a finalized host library) as the codegen of ``target`` builds it: the same
        calls, in the same order, on a library of that codegen; its linked libraries first."""
        import llvmlite.binding as ll

        twins = lib.__dict__.setdefault("_twins", {})
        if target not in twins:
            if not lib._finalized or "_fanlog" not in lib.__dict__:
                raise RuntimeError(f"{lib!r}: not finalized, or built before the fanout")
            tw = self.codegens[target].create_library(lib.name)
            for op in lib._fanlog:
                if op[0] == "add":
                    m = ll.parse_assembly(op[1])
                    m.name = op[2]
                    tw.add_llvm_module(m)
                else:
                    tw.add_linking_library(self.twin(op[1], target))
            tw.finalize()
            twins[target] = tw
        return twins[target]

    def listing(self, fn: Any, sig: tuple, fastmath: Any, target: str) -> str:
        """``inspect_asm``'s listing of ``fn`` compiled with ``njit(parallel=True)`` for
        ``target`` (HOST: this process's own compile); numba's frontend once per function."""
        import numba
        from numba.core.cpu_options import FastMathOptions

        py = getattr(fn, "py_func", fn)
        key = (py, sig, frozenset(FastMathOptions(fastmath).flags))
        if key not in self._memo:
            d = numba.njit(parallel=True, fastmath=fastmath)(py)
            d.compile(sig)
            self._memo[key] = {"": d.overloads[sig].library, HOST: d.inspect_asm(sig)}
        got = self._memo[key]
        if target not in got:
            from numba.core.compiler_lock import global_compiler_lock

            with global_compiler_lock:  # as numba finalizes
                got[target] = self.twin(got[""], target).get_asm_str()
        return got[target]

    def facts(self, jobs: list[Job], host: Target) -> dict[str, dict[str, Any]]:
        """{row name: {job key: code_facts}} for the host and every twin target."""
        out: dict[str, dict[str, Any]] = {t.name: {} for t in [host, *self.targets]}
        for job in jobs:
            for t in [host, *self.targets]:
                with numba_target(t):
                    fn = job.pick()
                out[t.name][job.key] = code_facts(self.listing(fn, job.sig, job.fastmath,
                                                               t.name))
        return out


def unit_jobs(unit: str, dtype: str) -> list[Job]:
    """A unit's jobs in one dtype ("kernels:rownorm,gemm": those modules' kernels only)."""
    from codegen_kernels import kernel_jobs
    from planted_kernels import planted_jobs

    name, _, only = unit.partition(":")
    if name == "kernels":
        return kernel_jobs(only=tuple(m for m in only.split(",") if m), dtypes=(dtype,))
    assert name == "planted" and not only, unit
    return planted_jobs(dtypes=(dtype,))


# ----------------------------------------------------------------------------- the caller


def fanout_facts(units: list[str], cache_dir: Path) -> dict[str, dict[str, Any]]:
    """Every row of the matrix (codegen_matrix.MATRIX), ``units`` compiled in both dtypes,
    one process per dtype, two at a time: {row name: {"numba_cpu_name", unit: facts}}, as
    codegen_matrix.matrix_facts gives them."""
    from concurrent.futures import ThreadPoolExecutor

    from codegen_kernels import DTYPES

    env = {k: v for k, v in os.environ.items() if not k.startswith("NUMBA_")}

    def run(dtype: str) -> dict[str, Any]:
        env_d = dict(env, NUMBA_CACHE_DIR=str(cache_dir / dtype))  # never shared: no cache hit
        p = subprocess.run([sys.executable, __file__, dtype, *units], capture_output=True,
                           text=True, env=env_d, timeout=patience(1800))
        assert p.returncode == 0, f"{dtype}: {p.stderr[-2000:]}"
        return json.loads(p.stdout.strip().splitlines()[-1])

    with ThreadPoolExecutor(max_workers=2) as pool:
        parts = list(pool.map(run, DTYPES))
    assert {row: res["numba_cpu_name"] for row, res in parts[0].items()} == \
        {t.name: t.cpu for t in MATRIX}
    out: dict[str, dict[str, Any]] = {}
    for part in parts:
        for row, res in part.items():
            merged = out.setdefault(row, {"numba_cpu_name": res["numba_cpu_name"]})
            for u in (u.partition(":")[0] for u in units):
                merged.setdefault(u, {}).update(res[u])
    return out


def main(dtype: str, units: list[str]) -> None:
    import numba

    host = host_target()
    fan = Fanout(FOREIGN)
    assert fan.built_for == {t.name: (t.cpu, t.features) for t in FOREIGN}, fan.built_for
    res: dict[str, dict[str, Any]] = {t.name: {"numba_cpu_name": fan.built_for[t.name][0]}
                                      for t in FOREIGN}
    res[HOST] = {"numba_cpu_name": numba.config.CPU_NAME}
    for u in units:
        for row, facts in fan.facts(unit_jobs(u, dtype), host).items():
            res[row][u.partition(":")[0]] = facts
    print(json.dumps(res))


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2:])
