"""Every parallel CPU kernel of kernels/, with the arguments it is compiled for and what its
machine code must show on every target of the matrix (codegen_matrix.MATRIX):

- every kernel: no gather, on any target, no exemption (a kernel that indexes memory it could
  read contiguously: a negative-index wraparound left in an index, or a strided loop with a
  runtime trip count, makes LLVM gather wherever its model finds gathers legal and cheap:
  znver4, the Intel AVX-512 cores, Skylake; GEMM's B transpose is written in constant 8 x 8
  blocks for that); no non-temporal store, unless it is a non-temporal row kernel
  (``streams``), which must have one. Scatters are recorded, and asserted only where a row
  says so (``no_scatter``: the transpose): LLVM stores a register block's columns of C with
  them in the GEMM and attention cores on the AVX-512 rows, once per tile;
- the kernels whose speed rests on it: packed arithmetic (``min_packed``), vector partial sums
  of a reduction in more than one FMA chain (``min_chains``), adds on ymm/zmm (``min_wide_adds``).

The rows are the workloads' own declarations: each module that holds a workload's CPU
implementations lists its parallel kernels in ``CPU_CODE`` (kernels/spec.py: CpuCode), and
``kernel_rows`` reads them through the registry; every module-level parallel dispatcher of
roofbench.kernels must have one (``parallel_kernels``): a new kernel without one fails a
test. The non-temporal-store kernels of kernels/nt_stores.py are compiled by codegen_child's
``nt_stores`` unit, where their stores are read too. A kernel is compiled with its own
options (fastmath included), never run.
"""

from __future__ import annotations

import dataclasses
import importlib
import pkgutil
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

DTYPES = ("float32", "float64")
PACKAGE = "roofbench.kernels."


@dataclass(frozen=True)
class KernelRow:
    """A kernel's spec.CpuCode and the module that declares it."""

    module: str  # under roofbench.kernels (a plug-in's: its own name)
    fn: str
    args: Callable[[Any], tuple]  # example arguments for a numpy dtype: they give the signature
    min_packed: int = 0
    min_chains: int = 0
    min_wide_adds: int = 0
    why: str = ""
    streams: bool = False  # stores non-temporally (else: never)
    no_scatter: bool = False  # scatters are a fault too (else recorded only)
    import_name: str = ""  # the module's full name (default: roofbench.kernels.<module>)

    @property
    def name(self) -> str:
        return f"{self.module}.{self.fn}"

    def dispatcher(self) -> Any:
        return getattr(importlib.import_module(self.import_name or PACKAGE + self.module),
                       self.fn)


def kernel_rows() -> list[KernelRow]:
    """A row per ``CPU_CODE`` entry of every module that holds a workload's CPU
    implementations (roofbench.kernels.registry.code_modules: the plug-ins' too), in registry
    order: the workload's own declaration, never a list kept here."""
    from roofbench.kernels.registry import code_modules
    from roofbench.kernels.spec import CpuCode

    rows = []
    for name in code_modules():
        for code in getattr(importlib.import_module(name), "CPU_CODE", ()):
            assert isinstance(code, CpuCode), (name, code)
            rows.append(KernelRow(name.removeprefix(PACKAGE), import_name=name, **{
                f.name: getattr(code, f.name) for f in dataclasses.fields(code)}))
    return rows


KERNELS = kernel_rows()
ROWS = {r.name: r for r in KERNELS}
IDS = [f"{r.name}-{d}" for r in KERNELS for d in DTYPES]


def parallel_kernels() -> set[str]:
    """``module.function`` of every module-level parallel numba dispatcher in
    roofbench.kernels (nt_stores included)."""
    import roofbench.kernels as pkg
    from numba.core.registry import CPUDispatcher

    found = set()
    for info in pkgutil.iter_modules(pkg.__path__):
        mod = importlib.import_module(f"roofbench.kernels.{info.name}")
        for attr, obj in vars(mod).items():
            if (isinstance(obj, CPUDispatcher) and obj.__module__ == mod.__name__
                    and obj.targetoptions.get("parallel")):
                found.add(f"{info.name}.{attr}")
    return found


def signature(row: KernelRow, dtype: str) -> tuple:
    import numba

    return tuple(numba.typeof(a) for a in row.args(np.dtype(dtype).type))


def kernel_jobs(rows: list[KernelRow] | None = None, only: tuple[str, ...] = (),
                dtypes: tuple[str, ...] = DTYPES) -> list[Any]:
    """Every row (of the modules ``only`` names, if any) in ``dtypes``, with its own options:
    codegen_fanout.Job, keyed ``module.function-dtype``."""
    from codegen_fanout import Job

    out = []
    for row in KERNELS if rows is None else rows:
        if only and row.module not in only:
            continue
        d = row.dispatcher()
        opts = d.targetoptions.get("fastmath", False)
        out += [Job(f"{row.name}-{dtype}", lambda d=d: d, signature(row, dtype), opts)
                for dtype in dtypes]
    return out


def kernel_facts(rows: list[KernelRow] | None = None, only: tuple[str, ...] = ()
                 ) -> dict[str, Any]:
    """In the child (one process per target): every row's job compiled afresh, the facts of
    its whole listing (codegen_matrix.code_facts)."""
    from codegen_matrix import code_facts, compile_asm

    return {j.key: code_facts(compile_asm(j.pick(), j.sig, j.fastmath))
            for j in kernel_jobs(rows, only)}


def problems(row: KernelRow, facts: dict[str, Any]) -> list[str]:
    """What is wrong with one compiled kernel, one line each (empty: nothing)."""
    out = []
    if facts["gathers"]:
        out.append(f"gathers {facts['gathers']}")
    if facts["scatters"] and row.no_scatter:
        out.append(f"scatters {facts['scatters']} ({row.why})")
    if facts["nontemporal"] and not row.streams:
        out.append(f"{facts['nontemporal']} non-temporal stores in a cached kernel")
    if row.streams and not facts["nontemporal"]:
        out.append("no non-temporal store")
    if facts["packed"] < row.min_packed:
        out.append(f"{facts['packed']} packed FP instructions < {row.min_packed} ({row.why})")
    chains = facts["fma_loop"].get("fma_chains", 0) if facts["fma_loop"]["loop"] else 0
    if chains < row.min_chains:
        out.append(f"{chains} FMA chains < {row.min_chains} ({row.why})")
    if facts["wide_adds"] < row.min_wide_adds:
        out.append(f"{facts['wide_adds']} ymm/zmm adds < {row.min_wide_adds} ({row.why})")
    return out
