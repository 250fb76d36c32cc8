"""Bytes counted by the emulator against what the workloads and the probes declare: the
model-versus-counters check of `--ncu` (roofbench/ncu_checks.py), without a GPU.

The kernels run under the CPU emulation built with counters (cuda_tools.build_counting: every
global load and store the compiled kernel executes, TMA's reads included, per watched buffer).
A workload's launch declares the buffers it reads and writes (kernels/spec.py): the minimum
traffic, every element once. The rule, per buffer of every launch:

- written bytes equal the declaration exactly (no suite kernel writes an element twice);
- read bytes equal the declaration exactly, except where the kernel re-reads by design, and
  there they equal a stated formula of the kernel's own tile constants (``reread_bytes``): a
  re-read is served by L1/L2 on a GPU, so DRAM still sees the declaration, but the count must be
  exactly what the tiling implies (a tile loaded twice, or skipped, changes it);
- a buffer the launch does not name is not touched.

The memory probes (roofs/probes/cuda/stream.cu, the L2 probe of cache.cu) are held against the
bytes they count (gpu_memory.stream_bytes, L2Launch.bytes_per_launch) within PROBE_FACTOR: the
counted reads and writes must each reach what the probe counts (a probe that reads less than it
counts would report a bandwidth it never reached) and their sum stay within the factor of it
(STREAM's read kernel adds one atomic per warp).
"""

from __future__ import annotations

import ctypes
import importlib
import importlib.util
import re
import sys
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import cuda_tools as ct
import numpy as np
import pytest
from roofbench.bench.backends import tma_launch
from roofbench.bench.backends.gpu_common import (
    ALL_LAUNCHERS,
    POISON,
    STORAGE,
    PlannedLaunch,
    plan_launches,
    to_storage,
)
from roofbench.kernels import wgmma_gemm as wg
from roofbench.kernels.cuda_impl import CUDA_DIR, DeviceProps
from roofbench.kernels.registry import workloads
from roofbench.kernels.spec import Case, Launch
from roofbench.roofs.probes.cuda_driver import KernelParams
from roofbench.roofs.probes.gpu_memory import STREAM_RW, L2Launch, stream_bytes
from testpaths import FAKE_CUPY

pytestmark = pytest.mark.skipif(ct.emulation_missing() is not None,
                                reason=ct.emulation_missing() or "")

DEV = DeviceProps(cc=(9, 0), sm_count=1, max_threads_per_sm=512, name="host emulation")
H200 = DeviceProps(cc=(9, 0), sm_count=132, name="emulated H200")
SOURCES = ("vector_add.cu", "l2norm.cu", "rownorm.cu", "gemm.cu", "attention.cu", "gemv.cu",
           "stream.cu", "cache.cu")
# Counted bytes of a memory probe over the bytes it counts: at least 1, at most this.
PROBE_FACTOR = 1.05


@pytest.fixture(scope="module")
def libs() -> dict[str, ctypes.CDLL]:
    with ThreadPoolExecutor(max_workers=2) as ex:
        built = dict(zip(SOURCES, ex.map(ct.build_counting, SOURCES), strict=True))
    return {src: _load(so) for src, so in built.items()}


def _load(so: Any) -> ctypes.CDLL:
    lib = ctypes.CDLL(str(so))
    lib.rb_launch.restype = ctypes.c_int
    return lib


def rb_launch(lib: ctypes.CDLL, function: str, grid: tuple[int, ...], block: tuple[int, ...],
              args: list[Any]) -> None:
    """A launch through the emulation's SysV launcher: arrays as pointers, integers, floats."""
    ints, floats = [], []
    for a in args:
        if isinstance(a, np.ndarray):
            ints.append(a.ctypes.data)
        elif isinstance(a, int | np.integer):
            ints.append(int(a))
        else:
            floats.append(float(a))
    ia = (ctypes.c_longlong * 6)(*ints, *[0] * (6 - len(ints)))
    fa = (ctypes.c_float * 2)(*floats, *[0.0] * (2 - len(floats)))
    g, b = (*grid, 1, 1)[:3], (*block, 1, 1)[:3]
    fn = ctypes.cast(getattr(lib, function), ctypes.c_void_p)
    if lib.rb_launch(fn, *g, *b, ia, fa) != 0:
        raise AssertionError(f"{function}: {lib.rb_last_error().decode()}")


def _arrays(case: Case) -> dict[str, np.ndarray]:
    inputs = case.workload.make_inputs(case.size, case.dtype, np.random.default_rng(7))
    out = {}
    for name, buf in case.buffers().items():
        if buf.role == "input":
            out[name] = to_storage(inputs[name], buf).copy()
        else:
            out[name] = np.full(buf.shape, POISON[buf.dtype], dtype=STORAGE[buf.dtype])
    return out


def count_case(libs: dict[str, ctypes.CDLL], case: Case,
               change: Callable[[PlannedLaunch], PlannedLaunch] = lambda pl: pl
               ) -> Iterator[tuple[Launch, PlannedLaunch, dict[str, ct.Traffic]]]:
    """Each launch of ``case`` and what it moved per buffer, run as a GPU backend runs it."""
    arrays = _arrays(case)
    for la, pl in zip(case.launches(), plan_launches(case, DEV), strict=True):
        pl = change(pl)
        lib = libs[pl.impl.source]
        counter = ct.ByteCounter(lib)
        counter.watch(arrays)
        args = [arrays[a] if isinstance(a, str) else a for a in pl.args]
        yield la, pl, counter.count(lambda: rb_launch(lib, pl.function, pl.grid, pl.block,
                                                      args))


def _define(source: str, name: str) -> int:
    """An integer #define of a kernel source (its tile constants)."""
    m = re.search(rf"^#define\s+{name}\s+(\d+)\b", (CUDA_DIR / source).read_text(), re.M)
    assert m, f"{name} not defined in {source}"
    return int(m.group(1))


def _tiles(n: int, t: int) -> int:
    return -(-n // t)


def reread_bytes(case: Case, kernel: str, buf: str, block: int) -> int | None:
    """Read bytes of ``buf`` by launch ``kernel`` where the kernel re-reads it by design (None:
    it reads the declaration exactly). Each formula is the kernel's tiling:

    - GEMM (C = A B, M x N x K): naive reads a row of A and a column of B per C element (A N
      times, B M times); tiled (TT), regblock (RB_BM x RB_BN), tensor_mma (TC_BM x TC_BN) and
      the wgmma kernel (WG_BM x WG_BN, through TMA) read A once per column of C tiles and B once
      per row of C tiles; out-of-range tile elements are zero-filled, not read.
    - gemv: every row's warp reads all of x (M times).
    - rownorm naive: every thread of a row's block loads the row's scale (``block`` times).
    - attention (N keys, ATT_BM query rows per block): the naive scores kernel reads Q and K once
      per tile of the other; pv reads V once per query block; flash reads K and V once per query
      block, causal flash only up to the diagonal tile (min(N, ATT_BN (q + 1)) keys).
    """
    w, v = case.workload.name, case.variant.name
    nb = case.buffers()[buf].nbytes if buf in case.buffers() else 0
    if w == "gemm":
        m, n, _ = case.size
        bm, bn = {"naive": (1, 1),
                  "tiled": (_define("gemm.cu", "TT"),) * 2,
                  "regblock": (_define("gemm.cu", "RB_BM"), _define("gemm.cu", "RB_BN")),
                  "tensor_mma": (_define("gemm.cu", "TC_BM"), _define("gemm.cu", "TC_BN")),
                  "tensor": (wg.wgmma_constants()["WG_BM"], wg.wgmma_constants()["WG_BN"]),
                  }[v]
        return {"A": nb * _tiles(n, bn), "B": nb * _tiles(m, bm)}.get(buf)
    if w == "gemv" and buf == "x":
        return nb * case.size[0]
    if w == "rownorm" and kernel == "scale" and buf == "scale":
        return nb * block
    if w.startswith("attention"):
        bsz, heads, n, d = case.size
        bm = _define("attention.cu", "ATT_BM")
        qt = _tiles(n, bm)
        if kernel == "flash" and buf in ("K", "V"):
            causal = w == "attention_causal"
            rows = sum(min(n, _define("attention.cu", "ATT_BN") * (q + 1)) if causal else n
                       for q in range(qt))
            return rows * bsz * heads * d * (nb // case.buffers()[buf].count)
        if (kernel, buf) in (("scores", "Q"), ("scores", "K"), ("pv", "V")):
            return nb * qt
    return None


def expected(case: Case, la: Launch, pl: PlannedLaunch) -> dict[str, ct.Traffic]:
    out = {}
    for name, buf in case.buffers().items():
        read = la.reads.count(name) * buf.nbytes
        block = int(np.prod(pl.block or (1,)))
        rule = reread_bytes(case, la.kernel, name, block) if read else None
        if rule is not None:
            assert rule >= read, f"{name}: a re-read rule below the declared minimum"
        out[name] = ct.Traffic(read if rule is None else rule, la.writes.count(name) * buf.nbytes)
    return out


ALL = ("fp32", "fp64", "fp16", "bf16", "fp8")
CASES = (
    [("vector_add", v, d, (1003,)) for v in ("scalar", "vec4") for d in ALL]
    + [("l2norm", v, d, (2051,)) for v in ("naive", "fused") for d in ALL]
    + [("rownorm", v, d, s) for v in ("naive", "fused", "onepass") for d in ("fp32", "fp16")
       for s in ((3, 1024), (2, 1001))]
    + [("gemm", v, d, (67, 45, 33)) for v in ("naive", "tiled", "regblock")
       for d in ("fp32", "fp16")]
    + [("gemm", "regblock", "fp32", (130, 132, 20))]
    + [("gemm", "tensor_mma", d, s) for d in ("fp16", "fp8") for s in ((130, 136, 97),
                                                                        (17, 9, 40))]
    + [(w, "flash", "fp16", s) for w in ("attention", "attention_causal")
       for s in ((1, 2, 67, 64), (2, 1, 131, 128))]
    + [("attention", "naive", "fp16", (1, 2, 67, 64)),
       ("attention_causal", "naive", "bf16", (1, 1, 72, 128))]
    + [("gemv", "rows", d, s) for d in ("fp32", "fp8") for s in ((37, 1001), (70, 4096))]
)


def _rw(t: ct.Traffic) -> tuple[int, int]:
    return t.read, t.written


def _case(name: str, variant: str, dtype: str, size: tuple[int, ...]) -> Case:
    w = workloads()[name]
    if variant == "vec4" and dtype == "fp64":
        variant = "scalar"
    return Case(w, w.variants[variant], dtype, size)


@pytest.mark.parametrize("case", CASES,
                         ids=[f"{w}-{v}-{d}-{'x'.join(map(str, s))}" for w, v, d, s in CASES])
def test_counted_bytes_equal_the_declaration(libs, case):
    c = _case(*case)
    for la, pl, got in count_case(libs, c):
        want = expected(c, la, pl)
        diff = {n: (_rw(got[n]), _rw(want[n])) for n in want if _rw(got[n]) != _rw(want[n])}
        assert not diff, f"{c.key} {la.kernel}: (counted read, written) != declared: {diff}"
