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
- a buffer the launch does not name is not touched;
- no access is misaligned to its width (the GPU faults on it; x86 does not);
- no access lands in the guard bytes around a buffer (out of bounds, deterministically: the
  next allocation in host memory no longer decides whether it is seen).

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
from functools import partial
from typing import Any

import cuda_tools as ct
import numpy as np
import pytest
from emu_run import LaunchError, sysv_launch
from roofbench.bench.backends import tma_launch
from roofbench.bench.backends.gpu_common import (
    ALL_LAUNCHERS,
    POISON,
    STORAGE,
    PlannedLaunch,
    from_storage,
    plan_launches,
    to_storage,
)
from roofbench.bench.suite.runner import validate
from roofbench.kernels import wgmma_gemm as wg
from roofbench.kernels.cuda_impl import CUDA_DIR, DeviceProps
from roofbench.kernels.registry import workloads
from roofbench.kernels.spec import Case, Launch
from roofbench.roofs.probes.cuda_driver import KernelParams
from roofbench.roofs.probes.gpu_memory import STREAM_RW, L2Launch, l2_read_xor, stream_bytes
from testpaths import FAKE_CUPY

pytestmark = ct.needs_emulation()

DEV = DeviceProps(cc=(9, 0), sm_count=1, max_threads_per_sm=512, name="host emulation")
H200 = DeviceProps(cc=(9, 0), sm_count=132, name="emulated H200")
SOURCES = ("vector_add.cu", "l2norm.cu", "rownorm.cu", "gemm.cu", "attention.cu", "gemv.cu",
           "stream.cu", "cache.cu")
# Counted bytes of a memory probe over the bytes it counts: at least 1, at most this.
PROBE_FACTOR = 1.05


class _Libs(dict):
    """The counting builds, each built on first use (a narrow selection builds one source)."""

    def __missing__(self, src: str) -> ctypes.CDLL:
        ds = ct.driver_sources().get(src)  # "gemm_wgmma": the driver-launched build
        self[src] = _load(ct.build_counting(ds.path if ds else src))
        return self[src]


@pytest.fixture(scope="module")
def libs() -> dict[str, ctypes.CDLL]:
    return _Libs()


def _load(so: Any) -> ctypes.CDLL:
    lib = ctypes.CDLL(str(so))
    lib.rb_launch.restype = lib.rb_launch_f64.restype = ctypes.c_int
    lib.rb_last_error.restype = ctypes.c_char_p  # the failed check's one line
    return lib


def _inputs(case: Case) -> dict[str, np.ndarray]:
    return case.workload.make_inputs(case.size, case.dtype, np.random.default_rng(7))


GUARD = 256  # bytes watched before and after every buffer (cudaMalloc's alignment kept)


def _arrays(case: Case) -> dict[str, np.ndarray]:
    """The case's buffers, each inside an allocation with GUARD bytes either side; the guards
    are returned too (as "<name>:before" / "<name>:after"): any access to them is out of
    bounds, whatever lies next to the buffer in host memory."""
    inputs = _inputs(case)
    out = {}
    for name, buf in case.buffers().items():
        raw = np.zeros(buf.nbytes + 2 * GUARD + 64, np.uint8)
        start = -raw.ctypes.data % 64  # 64-byte aligned, as device buffers are (256)
        raw = raw[start:start + buf.nbytes + 2 * GUARD]
        a = raw[GUARD:GUARD + buf.nbytes].view(STORAGE[buf.dtype]).reshape(buf.shape)
        if buf.role == "input":
            a[...] = to_storage(inputs[name], buf)
        else:
            a[...] = POISON[buf.dtype]
        out[name] = a
        out[f"{name}:before"], out[f"{name}:after"] = raw[:GUARD], raw[GUARD + buf.nbytes:]
    return out


def out_of_bounds(got: dict[str, ct.Traffic]) -> dict[str, ct.Traffic]:
    return {n: t for n, t in got.items() if ":" in n and (t.read or t.written)}


def count_case(libs: dict[str, ctypes.CDLL], case: Case, arrays: dict[str, np.ndarray],
               change: Callable[[PlannedLaunch], PlannedLaunch] = lambda pl: pl
               ) -> Iterator[tuple[Launch, PlannedLaunch, dict[str, ct.Traffic]]]:
    """Each launch of ``case`` over ``arrays`` (``_arrays``) and what it moved per buffer, run
    as a GPU backend runs it."""
    for la, pl in zip(case.launches(), plan_launches(case, DEV), strict=True):
        pl = change(pl)
        lib = libs[pl.impl.source]
        counter = ct.ByteCounter(lib)
        counter.watch(arrays)
        args = [arrays[a] if isinstance(a, str) else a for a in pl.args]
        yield la, pl, counter.count(partial(sysv_launch, lib, pl.function, pl.grid, pl.block,
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
    - rownorm naive: every thread of a row's block loads the row's scale (``block`` times);
      fused reads its row twice (reduce, then scale), the plan counting it once (the cache).
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
    if w == "rownorm" and kernel == "fused" and buf == "x":
        return 2 * nb  # the row is read again to scale it; the plan counts it once (cache)
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
    + [("gemm", "regblock", "fp32", (130, 132, 20)),
       ("gemm", "regblock", "fp32", (66, 70, 18))]  # rows of 2 mod 4 values: no float4 path
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
    """Per launch, per buffer; and the outputs validate (the counting build computes too)."""
    c = _case(*case)
    arrays = _arrays(c)
    for la, pl, got in count_case(libs, c, arrays):
        want = expected(c, la, pl)
        diff = {n: (_rw(got[n]), _rw(want[n])) for n in want if _rw(got[n]) != _rw(want[n])}
        assert not diff, f"{c.key} {la.kernel}: (counted read, written) != declared: {diff}"
        bad = {n: t.misaligned for n, t in got.items() if t.misaligned}
        assert not bad, f"{c.key} {la.kernel}: accesses not aligned to their width: {bad}"
        oob = out_of_bounds(got)
        assert not oob, f"{c.key} {la.kernel}: accesses out of bounds: {oob}"
    _validated(c, arrays)


def _validated(c: Case, arrays: dict[str, np.ndarray]) -> None:
    outs = {n: from_storage(arrays[n], b) for n, b in c.buffers().items() if b.role == "output"}
    ok, _, why = validate(c, outs, c.workload.expected(_inputs(c), c.size, c.dtype))
    assert ok, f"{c.key}: {why}"


def test_planted_misaligned_load_fails_the_count_cleanly(tmp_path):
    """The mma GEMM's B vector path taken at N % 8 == 4: its 16-byte fp16 loads at rows 8
    bytes off fail the launch naming the kernel and the access, before the access is made
    (issue 58: such a load, an x86 movdqa, was a segfault of the test process)."""
    src = (CUDA_DIR / "gemm.cu").read_text()
    old = "b_vec = (N % 8) == 0;"
    assert src.count(old) == 1
    lib = _load(ct.build_counting("gemm.cu", tmp_path, src.replace(old, "b_vec = (N % 4) == 0;")))
    c = _case("gemm", "tensor_mma", "fp16", (17, 52, 32))
    with pytest.raises(LaunchError, match=r"gemm_tensor_fp16: misaligned 16-byte load at B \+ "
                                          r"\d+ \(element 52"):
        list(count_case({"gemm.cu": lib}, c, _arrays(c)))


# ------------------------------------------------------------------ the memory probes
STREAM_N = 4 * 777 + 3  # the vector body, the ILP batches and a scalar tail
STREAM_GRID, STREAM_BLOCK = (3,), (128,)


def stream_args(kname: str, isz: int) -> tuple[dict[str, np.ndarray], list[Any]]:
    """The buffers and arguments of gpu_memory._stream's launch of ``kname``."""
    dt = np.float32 if isz == 4 else np.float64
    rng = np.random.default_rng(3)
    a, b, c = (rng.random(STREAM_N).astype(dt) for _ in range(3))
    out = np.zeros(1, dt)
    s, n = dt(0.5), np.int64(STREAM_N)
    args = {"copy": [a, c, n], "scale": [c, b, s, n], "add": [a, b, c, n],
            "triad": [a, b, c, s, n], "read": [a, out, n], "fill": [a, s, n]}[kname]
    return {"a": a, "b": b, "c": c, "out": out}, args


def check_probe(kname: str, got: dict[str, ct.Traffic], reads: int, writes: int) -> str | None:
    """Why the counted traffic disagrees with what the probe counts (reads, writes), or None."""
    r = sum(t.read for t in got.values())
    w = sum(t.written for t in got.values())
    if r < reads or w < writes:
        return (f"{kname} moves less than it counts: read {r} of {reads} bytes, wrote {w} of "
                f"{writes}")
    if r + w > PROBE_FACTOR * (reads + writes):
        return f"{kname} moves {(r + w) / (reads + writes):.3f}x the bytes it counts"
    return None


def count_stream(lib: ctypes.CDLL, kname: str, isz: int) -> str | None:
    suf = "f32" if isz == 4 else "f64"
    bufs, args = stream_args(kname, isz)
    counter = ct.ByteCounter(lib)
    counter.watch(bufs)
    got = counter.count(lambda: sysv_launch(lib, f"stream_{kname}_{suf}", STREAM_GRID,
                                             STREAM_BLOCK, args))
    r, w = STREAM_RW[kname]
    assert (r + w) * STREAM_N * isz == stream_bytes(kname, STREAM_N, isz)
    why = check_probe(kname, got, r * STREAM_N * isz, w * STREAM_N * isz)
    want = stream_result(kname, isz)
    if why is None and not np.allclose(bufs[want[0]], want[1], rtol=1e-5):
        why = f"stream_{kname}_{suf} computed the wrong {want[0]}"
    return why


def stream_result(kname: str, isz: int) -> tuple[str, np.ndarray]:
    """The buffer a STREAM kernel writes and what it must hold (numpy, from fresh inputs)."""
    b, _ = stream_args(kname, isz)
    a, bb, c, s = b["a"], b["b"], b["c"], 0.5
    return {"copy": ("c", a), "scale": ("b", s * c), "add": ("c", a + bb),
            "triad": ("a", bb + s * c), "read": ("out", np.array([a.sum()])),
            "fill": ("a", np.full_like(a, s))}[kname]


@pytest.mark.parametrize("isz", [4, 8])
@pytest.mark.parametrize("kname", list(STREAM_RW))
def test_stream_probe_moves_the_bytes_it_counts(libs, kname, isz):
    assert count_stream(libs["stream.cu"], kname, isz) is None


# A STREAM probe that reads a quarter, or half, of what it counts (its vector body over a
# fraction of the array): what the check exists to catch.
UNDER_READ = {"quarter": "nv / 4", "half": "nv / 2"}
_READ_BODY = "ilp_loop(nv, [&](long long i) { return av[i]; }, [&](long long, V x)"


@pytest.mark.parametrize("plant", list(UNDER_READ))
def test_planted_under_reading_stream_probe_fails(plant):
    src = (ct.PROBE_DIR / "stream.cu").read_text()
    assert src.count(_READ_BODY) == 1
    text = src.replace(_READ_BODY, _READ_BODY.replace("(nv,", f"({UNDER_READ[plant]},"))
    lib = _load(ct.build_counting("stream.cu", ct._TMP / f"under_{plant}", text))
    why = count_stream(lib, "read", 4)
    assert why is not None and "moves less than it counts" in why, why


@pytest.mark.parametrize("form", ["read", "copy"])
def test_l2_probe_moves_the_bytes_it_counts(libs, form):
    la = L2Launch(form, block=128, chunk_vecs=128 * 9, nchunks=2, grid=5)  # a tail of rows
    rng = np.random.default_rng(5)
    src = rng.integers(0, 2**32, la.chunk_vecs * la.nchunks * 4, dtype=np.uint32)
    dst, out = np.zeros_like(src), np.zeros(la.grid * la.block, np.uint32)
    args: list[Any] = ([src, la.chunk_vecs, la.nchunks, out, 0] if form == "read"
                       else [src, dst, la.chunk_vecs, la.nchunks])
    lib = libs["cache.cu"]
    counter = ct.ByteCounter(lib)
    counter.watch({"src": src, "dst": dst, "out": out})
    got = counter.count(lambda: sysv_launch(lib, f"l2_{form}_cg_ilp4", (la.grid,), (la.block,),
                                             args))
    per = la.bytes_per_launch // (2 if form == "copy" else 1)
    assert check_probe(form, got, per, per if form == "copy" else 0) is None
    if form == "copy":
        chunk = la.chunk_vecs * 4
        np.testing.assert_array_equal(dst[:la.nchunks * chunk], src[:la.nchunks * chunk])
    else:  # the validation launch: every thread's XOR (gpu_memory.l2_read_xor)
        args[-1] = 1
        sysv_launch(lib, "l2_read_cg_ilp4", (la.grid,), (la.block,), args)
        np.testing.assert_array_equal(out, l2_read_xor(src, la))


# ------------------------------------------------------ the wgmma GEMM (TMA loads)
@pytest.fixture(scope="module")
def fake_driver() -> Iterator[Any]:
    """The stand-in driver (cuTensorMapEncodeTiled as the emulated TMA reads it), as
    tma_launch's driver."""
    name = "rb_fake_cuda_bindings_bytes"
    where = FAKE_CUPY / "cuda" / "bindings"
    spec = importlib.util.spec_from_file_location(name, where / "__init__.py",
                                                  submodule_search_locations=[str(where)])
    assert spec is not None and spec.loader is not None
    sys.modules[name] = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(sys.modules[name])
    drv = importlib.import_module(f"{name}.driver")
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(tma_launch, "driver_module", lambda: drv)
        yield drv


@pytest.mark.parametrize("dtype,size", [("fp16", (130, 272, 112)), ("fp8", (200, 256, 160))])
def test_wgmma_gemm_tma_reads_what_its_tiles_imply(libs, fake_driver, dtype, size):
    c = _case("gemm", "tensor", dtype, size)
    arrays = _arrays(c)
    (pl,) = plan_launches(c, H200, launchers=ALL_LAUNCHERS)
    enc = {m.buffer: tma_launch.encode_tensor_map(m, arrays[m.buffer].ctypes.data)
           for m in pl.tensor_maps}
    values = tma_launch.param_bytes(pl.args, lambda b: arrays[b].ctypes.data, enc)
    lib = libs["gemm_wgmma"]
    lib.rb_launch_params.argtypes = [ctypes.c_void_p, *[ctypes.c_int] * 6, ctypes.c_uint,
                                     ctypes.c_void_p]
    params = KernelParams(values)
    thunk = ctypes.cast(getattr(lib, f"rb_params__{pl.function}"), ctypes.c_void_p).value

    def launch() -> None:
        if lib.rb_launch_params(thunk, *pl.grid, *pl.block, pl.smem, params.address) != 0:
            raise AssertionError(lib.rb_last_error().decode())

    counter = ct.ByteCounter(lib)
    counter.watch(arrays)
    got = counter.count(launch)
    want = expected(c, c.launches()[0], pl)
    assert {n: _rw(t) for n, t in got.items() if n in want} == {
        n: _rw(t) for n, t in want.items()}
    assert not out_of_bounds(got)
    _validated(c, arrays)
