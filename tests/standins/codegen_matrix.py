"""The one way the tests compile a Numba kernel for a named LLVM target, and the target matrix
every codegen assertion runs over (docs/tests.md lists the assertions).

numba compiles for whichever CPU ``NUMBA_CPU_NAME`` / ``NUMBA_CPU_FEATURES`` name, on any x86
host, but reads them once, at import: each target gets a fresh process (tests/roofs/
codegen_child.py) that only compiles and reads the assembly (code for a foreign CPU could
fault here). The host is one more row, compiled with numba's defaults: what this machine's
``make bench`` runs.

    facts = matrix_facts(["kernels"], cache_dir)   # {row name: the child's JSON}
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from codegen_store import record_loaded, recording_env
from patience import patience
from testpaths import FIXTURES, ROOT

record_loaded()  # in a compiling child (every one imports this): which sources it read

CHILD = ROOT / "tests" / "roofs" / "codegen_child.py"
_REAL = json.loads((FIXTURES / "cpu_features.json").read_text())
AVX2 = "+avx,+avx2,+fma,+f16c,-avx512f,-avx512vl"
AVX512 = "+avx,+avx2,+fma,+f16c,+avx512f,+avx512vl,+avx512bw,+avx512dq,+avx512cd"
HOST = "host"


@dataclass(frozen=True)
class Target:
    """A row of the matrix: ``name`` (the test id), ``cpu`` (NUMBA_CPU_NAME; None: numba's
    default, the host) and llvmlite's feature string on such a machine."""

    name: str
    cpu: str | None
    features: str


def _foreign(cpu: str, features: str) -> Target:
    return Target(cpu, cpu, features)


# The ten CPUs the project has met or must run on (two feature strings read on real machines:
# tests/fixtures/cpu_features.json).
FOREIGN = [
    _foreign("znver2", AVX2), _foreign("znver3", _REAL["znver3"]),
    _foreign("znver4", AVX512 + ",+avx512bf16"), _foreign("haswell", AVX2),
    _foreign("skylake", AVX2), _foreign("skylake-avx512", AVX512),
    _foreign("icelake-server", AVX512),
    _foreign("sapphirerapids", AVX512 + ",+amx-tile,+avx512fp16"),
    _foreign("emeraldrapids", _REAL["emeraldrapids"]), _foreign("x86-64-v3", AVX2),
]


def host_cpu() -> tuple[str, str]:
    """This machine's LLVM CPU name and feature string."""
    import llvmlite.binding as ll

    return ll.get_host_cpu_name(), ll.get_host_cpu_features().flatten()


def host_target() -> Target:
    return Target(HOST, None, host_cpu()[1])


MATRIX = [*FOREIGN, host_target()]
IDS = [t.name for t in MATRIX]
X86 = re.match(r"(x86_64|amd64)$", os.uname().machine.lower()) is not None
NOT_X86 = "x86-64 codegen needs an x86-64 LLVM host (numba JITs for its own architecture)"


def child_env(target: Target, features: str | None = None) -> dict[str, str]:
    """The environment of a process compiling for ``target``: none of the caller's NUMBA_
    settings, the target's CPU name and features (the host row: numba's defaults, unless
    ``features`` overrides them, as the FMA probe's own process does)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("NUMBA_")}
    if target.cpu is not None:
        env.update(NUMBA_CPU_NAME=target.cpu, NUMBA_CPU_FEATURES=features or target.features)
    elif features:
        env["NUMBA_CPU_FEATURES"] = features
    return env


def compile_for(target: Target, units: list[str], cache_dir: Path,
                features: str | None = None, keep: bool = True) -> dict[str, Any]:
    """Compile the child's ``units`` (codegen_child.UNITS) for ``target`` in a fresh process:
    its facts, one JSON object; kept between sessions with the same inputs (codegen_store),
    unless ``keep`` is False."""
    from codegen_store import kept

    if not keep:
        return _compile_for(target, units, cache_dir, features)
    return kept("child", [target.name, target.cpu, target.features, units, features],
                lambda: _compile_for(target, units, cache_dir, features))


def _compile_for(target: Target, units: list[str], cache_dir: Path,
                 features: str | None) -> dict[str, Any]:
    env = child_env(target, features) | recording_env()
    env["NUMBA_CACHE_DIR"] = str(cache_dir)
    p = subprocess.run([sys.executable, str(CHILD), *units], capture_output=True, text=True,
                       env=env, timeout=patience(900))
    assert p.returncode == 0, f"{target.name}: {p.stderr[-2000:]}"
    out = json.loads(p.stdout.strip().splitlines()[-1])
    assert out["numba_cpu_name"] == target.cpu, (target, out["numba_cpu_name"])
    return out


def matrix_facts(units: list[str], cache_dir: Path, targets: list[Target] | None = None,
                 jobs: list[tuple[Target, str | None]] | None = None,
                 job_units: list[str] | None = None, keep: bool = True
                 ) -> dict[tuple[str, str | None], dict[str, Any]]:
    """Every target's facts for ``units``, two processes at a time (one per core of a small
    machine): {(row name, features override or None): facts}. ``jobs`` adds rows compiled
    with other features, for ``job_units`` (default ``units``: keep the child's order, a
    unit's code depends on what its process compiled before). ``keep``: compile_for's."""
    todo = [(t, None, units) for t in (MATRIX if targets is None else targets)]
    todo += [(t, f, job_units or units) for t, f in jobs or []]
    with ThreadPoolExecutor(max_workers=2) as pool:
        done = pool.map(lambda j: compile_for(j[0], j[2], cache_dir, j[1], keep), todo)
        return {(t.name, f): res for (t, f, _), res in zip(todo, done, strict=True)}


# ----------------------------------------------------------------------------- in the child


def compile_asm(fn: Any, sig: tuple, fastmath: Any = False, kernel_only: bool = False) -> str:
    """The assembly of a fresh compile of ``fn`` (a numba dispatcher or a Python function) for
    the CPU this process targets: never numba's cache, never run. ``kernel_only``: numba's
    parallel loop body only, not its argument-unpacking wrappers."""
    import numba
    from roofbench.roofs.probes import x86_asm

    d = numba.njit(parallel=True, fastmath=fastmath)(getattr(fn, "py_func", fn))
    d.compile(sig)
    asm = d.inspect_asm(sig)
    return x86_asm.kernel_part(asm) if kernel_only else asm


def compile_llvm(fn: Any, sig: tuple, fastmath: Any = False) -> str:
    import numba

    d = numba.njit(parallel=True, fastmath=fastmath)(getattr(fn, "py_func", fn))
    d.compile(sig)
    return d.inspect_llvm(sig)


_PACKED = re.compile(r"^\s*v(?:fn?m(?:add|sub)\d{3}|mul|add|sub|div|sqrt|max|min)p[sd]\s"
                     r"[^\n]*%[xyz]mm", re.M)
_WIDE_ADD = re.compile(r"^\s*vaddp[sd]\s[^\n]*%[yz]mm", re.M)
_GATHER = re.compile(r"^\s*(vp?gather\w+)", re.M)
_SCATTER = re.compile(r"^\s*(vp?scatter\w+)", re.M)
_NT = re.compile(r"^\s*v?movnt\w*\s", re.M)


def code_facts(asm: str) -> dict[str, Any]:
    """What the kernel assertions read from a listing: packed floating-point arithmetic
    (FMA, mul, add, sub, div, sqrt, max, min on vector registers), adds on ymm/zmm, gathers and
    scatters (a kernel indexing memory it could read contiguously), non-temporal stores, and
    its FMA loop."""
    from roofbench.roofs.probes import x86_asm

    return {"packed": len(_PACKED.findall(asm)), "wide_adds": len(_WIDE_ADD.findall(asm)),
            "gathers": _GATHER.findall(asm), "scatters": _SCATTER.findall(asm),
            "nontemporal": len(_NT.findall(asm)),
            "fma_loop": x86_asm.loop_facts(x86_asm.fma_loop(asm), asm)}
