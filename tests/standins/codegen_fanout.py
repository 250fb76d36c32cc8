"""Numba's frontend once, its backend for every target: the kernels' codegen matrix without
eleven full compiles.

A fresh process under NUMBA_CPU_NAME / NUMBA_CPU_FEATURES (codegen_matrix.compile_for) repeats
numba's whole compile for each CPU, though only the LLVM part depends on the CPU: numba's codegen
is a JITCPUCodegen whose target machine is built from those two settings; its libraries
(CPUCodeLibrary) take IR modules (``add_llvm_module``, which runs the function passes), other
libraries to link (``add_linking_library``) and are then optimised and compiled
(``finalize``: link, module passes, MCJIT object), all through that target machine.

Here one process (``frontend``) compiles every job for the host, in the order a fresh child
compiles them (codegen_child's units; what a process compiled before changes what it emits
next: register allocation of attention's flash core moved when fp64 was compiled alone), and
records each library's calls: the IR text as it came (before the host's passes), the libraries
it links. Then ``replay`` processes (two, five foreign targets each) build, for each target, a
JITCPUCodegen under its settings and replay those calls, in order, on libraries of that codegen
(linked ones first), and finalize them: numba's own code on the same IR. A replayed library's
``get_asm_str`` is what ``inspect_asm`` gives in a fresh process for that target.

What a replay cannot see is Python that reads the target while numba compiles (the planted
tuning branch picks its function by ``target_cpu()``): a job's function is picked under each
target's numba config (``numba_target``), and each distinct pick compiled once, the host's
first. tests/kernels/test_cpu_kernels.py compares this path with fresh processes on two targets;
docs/tests.md has the full comparison (every target, every kernel: identical facts).

    python tests/standins/codegen_fanout.py frontend LOG UNIT...   (UNIT: kernels, planted)
    python tests/standins/codegen_fanout.py replay LOG TARGET...
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

from codegen_matrix import FOREIGN, HOST, MATRIX, Target, code_facts
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


def unit_jobs(unit: str) -> list[Job]:
    """A unit's jobs, both dtypes, in codegen_child's order ("kernels:rownorm,gemm": those
    modules' kernels only)."""
    from codegen_kernels import kernel_jobs
    from planted_kernels import planted_jobs

    name, _, only = unit.partition(":")
    if name == "kernels":
        return kernel_jobs(only=tuple(m for m in only.split(",") if m))
    assert name == "planted" and not only, unit
    return planted_jobs()


# ----------------------------------------------------------------------------- frontend


def _record() -> list[list[list[Any]]]:
    """From now on every library numba creates logs its calls: log[i] is library i's
    ["name", its name], then ["add", IR text, module name] and ["link", library index] in
    order."""
    from numba.core import codegen as cg

    log: list[list[list[Any]]] = []
    cls = cg.CPUCodeLibrary
    add, link = cls.add_llvm_module, cls.add_linking_library

    def ops(lib: Any) -> list[list[Any]]:
        if "_fanidx" not in lib.__dict__:
            lib._fanidx = len(log)
            log.append([["name", lib.name]])
        return log[lib._fanidx]

    def add_llvm_module(lib: Any, ll_module: Any) -> None:
        ops(lib).append(["add", str(ll_module), ll_module.name])  # before the host's passes
        add(lib, ll_module)

    def add_linking_library(lib: Any, other: Any) -> None:
        link(lib, other)  # finalizes ``other``: its log is complete
        if "_fanidx" not in other.__dict__:
            raise RuntimeError(f"{other!r} was built before the recording (or cached)")
        ops(lib).append(["link", other._fanidx])

    def unserialize_library(gen: Any, serialized: Any) -> Any:
        raise RuntimeError("numba's cache holds compiled code, no IR to replay")

    cls.add_llvm_module, cls.add_linking_library = add_llvm_module, add_linking_library
    cg.JITCPUCodegen.unserialize_library = unserialize_library
    return log


def frontend(log_path: Path, units: list[str], read: Callable[[str], Any] = code_facts
             ) -> dict[str, Any]:
    """Compile every job for the host, write the log ({"libs", "tops": {unit: {key: {target:
    library}}}}) and return the host's facts {unit: {key: facts}}."""
    import numba

    log = _record()
    tops: dict[str, dict[str, dict[str, int]]] = {}
    facts: dict[str, dict[str, Any]] = {}
    for unit in units:
        name = unit.partition(":")[0]
        for job in unit_jobs(unit):
            picks = {}
            for t in MATRIX:
                with numba_target(t):
                    picks[t.name] = getattr(job.pick(), "py_func", job.pick())
            libs: dict[Any, int] = {}
            for py in sorted(set(picks.values()), key=lambda f: f is not picks[HOST]):
                d = numba.njit(parallel=True, fastmath=job.fastmath)(py)
                d.compile(job.sig)
                lib = d.overloads[job.sig].library
                lib._ensure_finalized()
                if "_fanidx" not in lib.__dict__:
                    raise RuntimeError(f"{job.key}: its library logged nothing")
                libs[py] = lib._fanidx
                if py is picks[HOST]:
                    facts.setdefault(name, {})[job.key] = read(d.inspect_asm(job.sig))
            tops.setdefault(name, {})[job.key] = {t: libs[py] for t, py in picks.items()}
    log_path.write_text(json.dumps({"libs": log, "tops": tops}))
    return facts


# ----------------------------------------------------------------------------- replay


def replay(log_path: Path, names: list[str], read: Callable[[str], Any] = code_facts
           ) -> dict[str, dict[str, Any]]:
    """Every job's listing for the foreign targets ``names``, numba's codegen for each built
    under its settings: {target: {unit: {key: facts}}}."""
    import llvmlite.binding as ll
    import numba
    from numba.core import codegen as cg
    from numba.core.compiler_lock import global_compiler_lock
    from numba.np.ufunc.parallel import _launch_threads

    # the symbols a numba process that compiled a parallel kernel has: runtime, C helpers,
    # threading layer (MCJIT resolves the listings' calls to them)
    numba.njit(lambda: 0)()
    _launch_threads()
    data = json.loads(log_path.read_text())
    libs: list[list[list[Any]]] = data["libs"]
    out: dict[str, dict[str, Any]] = {}
    for t in [t for t in FOREIGN if t.name in names]:
        with numba_target(t):
            gen = cg.JITCPUCodegen("numba.exec")
            assert (gen._get_host_cpu_name(), gen._tm_features) == (t.cpu, t.features)
        built: dict[int, Any] = {}

        def build(i: int, gen: Any = gen, built: dict[int, Any] = built) -> Any:
            if i not in built:
                lib = gen.create_library(libs[i][0][1])
                for op in libs[i][1:]:
                    if op[0] == "add":
                        m = ll.parse_assembly(op[1])
                        m.name = op[2]
                        lib.add_llvm_module(m)
                    else:
                        lib.add_linking_library(build(op[1]))
                lib.finalize()
                built[i] = lib
            return built[i]

        res: dict[str, Any] = {"numba_cpu_name": t.cpu}
        with global_compiler_lock:  # as numba finalizes
            for unit, jobs in data["tops"].items():
                res[unit] = {key: read(build(top[t.name]).get_asm_str())
                             for key, top in jobs.items()}
        out[t.name] = res
    return out


# ----------------------------------------------------------------------------- the caller


def _run(args: list[str], cache_dir: Path, record: dict[str, str]) -> Any:
    env = {k: v for k, v in os.environ.items() if not k.startswith("NUMBA_")} | record
    env["NUMBA_CACHE_DIR"] = str(cache_dir)  # fresh: nothing is loaded from numba's cache
    p = subprocess.run([sys.executable, __file__, *args], capture_output=True, text=True,
                       env=env, timeout=patience(1800))
    assert p.returncode == 0, f"{args[:3]}: {p.stderr[-2000:]}"
    return json.loads(p.stdout.strip().splitlines()[-1])


def fanout_facts(units: list[str], cache_dir: Path) -> dict[str, dict[str, Any]]:
    """Every row of the matrix (codegen_matrix.MATRIX), ``units`` compiled: {row name:
    {"numba_cpu_name", unit: {key: facts}}}, as codegen_matrix.matrix_facts gives a row. The
    frontend, then two replay processes at a time (one per core of a small machine); kept
    between sessions with the same inputs (codegen_store)."""
    from codegen_store import kept

    return kept("fanout", units, lambda: _fanout(units, cache_dir))


def _fanout(units: list[str], cache_dir: Path) -> dict[str, dict[str, Any]]:
    from concurrent.futures import ThreadPoolExecutor

    from codegen_store import recording_env

    log = cache_dir / "fanout-log.json"
    rec = recording_env()  # this thread's: the pool's threads are not the one kept() runs in
    out = {HOST: {"numba_cpu_name": None,
                  **_run(["frontend", str(log), *units], cache_dir, rec)}}
    names = [t.name for t in FOREIGN]
    with ThreadPoolExecutor(max_workers=2) as pool:
        for part in pool.map(lambda c: _run(["replay", str(log), *c], cache_dir, rec),
                             [names[0::2], names[1::2]]):
            out.update(part)
    assert list(out) != [] and set(out) == {t.name for t in MATRIX}, sorted(out)
    return out


if __name__ == "__main__":
    mode, path, rest = sys.argv[1], Path(sys.argv[2]), sys.argv[3:]
    print(json.dumps(frontend(path, rest) if mode == "frontend" else replay(path, rest)))
