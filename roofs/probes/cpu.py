"""CPU roofs measured for real: STREAM bandwidth, peak FMA throughput, a BLAS GEMM ceiling.

Everything runs numba ``@njit(parallel=True)`` code on every core (numba's default thread
count), except the BLAS probe, which is numpy.matmul (OpenBLAS/MKL threads). Timing is injected:
``time_fn(fn) -> Timing`` comes from the caller (roofs/ never imports bench/); a Timing is only
duck-typed here (``.median``, ``.samples``, ``.summary()``, ``.to_dict()``).

Roofs produced (all ``source="measured"``; CPU datasheet roofs are unknown and never invented):

- memory, level "dram": ``dram stream-copy|scale|add|triad``. FP64 arrays at least 4x the
  last-level cache each (``stream_elements``); bytes = reads + writes as STREAM counts them
  (copy 16 B/elt, scale 16, add 24, triad 24; write-allocate traffic not counted).
  ``RoofSet.memory("dram")`` takes the highest of the four.
- compute, precision "fp64"/"fp32": ``fp64 FMA peak`` (the CUDA-core-style peak: independent
  FMA chains, widest vectors) and ``fp64 BLAS dgemm`` / ``fp32 BLAS sgemm`` (a library
  ceiling, evidence probe "blas-gemm"). Both are kept; ``RoofSet.compute`` picks the max within
  the measured source, which is the FMA peak unless BLAS beats it (it should not: GEMM is FMAs
  plus loads). The BLAS roof is still recorded so a report can show how close a library gets;
  when a probe comes out below its BLAS GEMM, ``compute_roof_notes`` says so on the RoofSet
  and the BLAS roof is the one used.

The FMA probe (``cpu_fma.py``) keeps explicit vector chains of the widest width in
registers, as many as the target's register file and FMA latency x pipes call for
(``fma_model.py``); the CPU backend measures it in a child process started with the widest
vector setting (``cpu_features.widest_vector_env``, ``bench/measure/cpu_fma_probe.py``) and
keeps the best of a few repeats. docs/cpu-roofs.md has the model, its sources and the
measurements.

Against the C reference (``scripts/cpu_reference.py``: interleaved rounds, each side's best
sample per round, median over rounds) the triad matches C/OpenMP when both run in the same
bandwidth state: a VM's bandwidth can flip between states that last seconds and hit the two
programs unequally. Both use huge pages.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, Protocol

import numpy as np
from numba import njit, prange
from roofbench.kernels import nt_stores

from roofbench.cpu_cache import last_level_cache_bytes, llc_from_lscpu, llc_from_sysfs
from roofbench.records import Roof

from .cpu_features import (
    host_cpu_features,
    parse_features,
    widest_vector_bits,
    widest_vector_env,
)
from .cpu_fma import (
    STEPS,
    FmaProbe,
    aligned_rows,
    best_of_repeats,
    fma_flops,
    probe_shape,
    repeat_notes,
)
from .numba_env import env, threads, timing_evidence
from .x86_asm import fma_asm_facts

MiB = 1 << 20
GiB = 1 << 30

# STREAM accounting: bytes read + written per element (FP64), and FLOPs per element.
# "add-nt" is STREAM's add with non-temporal stores (kernels/nt_stores.py), the store policy the
# elementwise kernels use above the LLC: without it they could run above the DRAM roof.
STREAM_BYTES_PER_ELEMENT: dict[str, int] = {"copy": 16, "scale": 16, "add": 24, "triad": 24,
                                            "add-nt": 24}
STREAM_FLOPS_PER_ELEMENT: dict[str, int] = {"copy": 0, "scale": 1, "add": 1, "triad": 2,
                                            "add-nt": 1}
STREAM_KERNELS = tuple(STREAM_BYTES_PER_ELEMENT)
STREAM_SCALAR = 3.0  # STREAM's own scalar

TimeFn = Callable[[Callable[[], None]], Any]
Progress = Callable[[str], None] | None


class _TimingLike(Protocol):
    median: float
    samples: list[float]

    def summary(self) -> dict[str, Any]: ...


# --------------------------------------------------------------------------- machine facts


def available_memory_bytes(meminfo: str | None = None) -> int:
    """MemAvailable from /proc/meminfo (or the given text), else 4 GiB."""
    try:
        text = Path("/proc/meminfo").read_text() if meminfo is None else meminfo
        for line in text.splitlines():
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return 4 * GiB


def case_memory_budget(available: int) -> int:
    """Bytes one benchmark case may allocate on a CPU: a third of what is free, at most
    2 GiB (make bench stays well under 8 GB on a 24 GB machine: the float64 reference and the
    inputs sit beside the case's buffers)."""
    return int(min(max(available, 0) // 3, 2 * GiB))


def default_stream_budget(available: int | None = None) -> int:
    """Bytes the three STREAM arrays may take: a quarter of free memory, at most 2 GiB."""
    avail = available_memory_bytes() if available is None else available
    return int(min(avail // 4, 2 * GiB))


def stream_elements(llc_bytes: int, mem_budget: int, factor: float = 4.0, arrays: int = 3,
                    itemsize: int = 8, align: int = 1024) -> int:
    """Elements per STREAM array.

    Rule: each array holds ``factor`` x the last-level cache (factor >= 4, STREAM's own rule),
    capped so that all ``arrays`` arrays fit in ``mem_budget`` bytes; rounded down to a multiple
    of ``align`` elements. When the cap bites the array is smaller than 4x LLC and the result
    says so in its evidence (``llc_multiple``); it never goes below ``align`` elements.
    """
    if llc_bytes <= 0 or mem_budget <= 0 or factor <= 0:
        raise ValueError("llc_bytes, mem_budget and factor must be positive")
    want = int(factor * llc_bytes) // itemsize
    cap = mem_budget // (arrays * itemsize)
    return max(align, min(want, cap) // align * align)


# --------------------------------------------------------------------------- STREAM


@njit(parallel=True, cache=True)
def _stream_init(a: np.ndarray, b: np.ndarray, c: np.ndarray) -> None:
    # First touch in parallel with the same static split as the kernels: pages live where used.
    for i in prange(a.shape[0]):
        a[i] = 1.0 + (i % 1013) * 1e-3
        b[i] = 2.0 - (i % 977) * 1e-3
        c[i] = 0.5 + (i % 1019) * 1e-4


@njit(parallel=True, cache=True)
def stream_copy(c: np.ndarray, a: np.ndarray) -> None:
    for i in prange(a.shape[0]):
        c[i] = a[i]


@njit(parallel=True, cache=True)
def stream_scale(b: np.ndarray, c: np.ndarray, s: float) -> None:
    for i in prange(c.shape[0]):
        b[i] = s * c[i]


@njit(parallel=True, cache=True)
def stream_add(c: np.ndarray, a: np.ndarray, b: np.ndarray) -> None:
    for i in prange(a.shape[0]):
        c[i] = a[i] + b[i]


@njit(parallel=True, cache=True)
def stream_triad(a: np.ndarray, b: np.ndarray, c: np.ndarray, s: float) -> None:
    for i in prange(b.shape[0]):
        a[i] = b[i] + s * c[i]


def aligned_empty(n: int, dtype: Any = np.float64, align: int = 2 * MiB,
                  offset: int = 0) -> np.ndarray:
    """An uninitialised array whose data starts ``offset`` bytes past an ``align`` boundary."""
    dt = np.dtype(dtype)
    buf = np.empty(n * dt.itemsize + align + offset, dtype=np.uint8)
    off = -buf.ctypes.data % align + offset
    return buf[off:off + n * dt.itemsize].view(dt)


# Where a, b, c start: on cache lines (numpy's large arrays start 16 B past a page, so every
# 64-byte zmm access would straddle two lines) but at different offsets within a 4 KiB page,
# STREAM's OFFSET idea: a[i], b[i], c[i] never share a cache set or alias by their low 12 bits.
STREAM_OFFSETS = (0, 1344, 2688)


class StreamArrays:
    """The three STREAM arrays a, b, c (FP64), first-touched in parallel, allocated once."""

    def __init__(self, n: int) -> None:
        self.n = int(n)
        self.a, self.b, self.c = (aligned_empty(self.n, offset=o) for o in STREAM_OFFSETS)
        _stream_init(self.a, self.b, self.c)

    def call(self, kernel: str) -> Callable[[], None]:
        """The STREAM kernel as a no-argument call (STREAM's own operands and order)."""
        a, b, c, s = self.a, self.b, self.c, STREAM_SCALAR
        calls: dict[str, Callable[[], None]] = {
            "copy": lambda: stream_copy(c, a),
            "scale": lambda: stream_scale(b, c, s),
            "add": lambda: stream_add(c, a, b),
            "triad": lambda: stream_triad(a, b, c, s),
            "add-nt": lambda: nt_stores.add(a, b, c, self.n),
        }
        return calls[kernel]

    def check(self, kernel: str) -> None:
        """Run ``kernel`` once on poisoned output and check every element against numpy."""
        out = {"copy": self.c, "scale": self.b, "add": self.c, "triad": self.a,
               "add-nt": self.c}[kernel]
        out.fill(np.nan)
        self.call(kernel)()
        ref = {"copy": lambda: self.a, "scale": lambda: STREAM_SCALAR * self.c,
               "add": lambda: self.a + self.b, "add-nt": lambda: self.a + self.b,
               "triad": lambda: self.b + STREAM_SCALAR * self.c}[kernel]()
        if not np.array_equal(out, ref):
            raise RuntimeError(f"stream-{kernel}: numba result differs from numpy")


def settle(arrays: StreamArrays, seconds: float) -> None:
    """Run the triad untimed for ``seconds`` so first-touch and page backing settle."""
    triad = arrays.call("triad")
    t_end = time.perf_counter() + seconds
    while time.perf_counter() < t_end:
        triad()


def stream_roof(kernel: str, arrays: StreamArrays, timing: _TimingLike,
                llc_bytes: int | None = None) -> Roof:
    """A "dram" memory Roof from one STREAM kernel's timing: bytes/s at the best time, as
    STREAM reports its "Best Rate" (a roof is a ceiling; the median is kept as evidence)."""
    bpe = STREAM_BYTES_PER_ELEMENT[kernel]
    nbytes = bpe * arrays.n
    best = min(timing.samples)
    ev: dict[str, Any] = {
        "probe": f"stream-{kernel}",
        "implementation": "numba njit(parallel=True), prange" + (
            ", explicit 64-byte non-temporal vector stores" if kernel.endswith("-nt") else ""),
        "dtype": "fp64", "array_elements": arrays.n, "array_bytes": 8 * arrays.n, "arrays": 3,
        "bytes_per_element": bpe, "bytes_per_run": nbytes,
        "flops_per_element": STREAM_FLOPS_PER_ELEMENT[kernel],
        "counting": "reads + writes as STREAM counts them (no write-allocate)",
        "threads": threads(), "value_from": "best time",
        "median_bytes_per_s": nbytes / timing.median, "timing": timing_evidence(timing),
        **env(),
    }
    if llc_bytes:
        ev["llc_bytes"] = llc_bytes
        ev["llc_multiple"] = 8 * arrays.n / llc_bytes
    return Roof(name=f"dram stream-{kernel}", kind="memory", level="dram",
                value=nbytes / best, source="measured", evidence=ev)


def measure_stream(time_fn: TimeFn, n: int, kernels: tuple[str, ...] = STREAM_KERNELS,
                   progress: Progress = None, llc_bytes: int | None = None,
                   settle_s: float = 1.0) -> list[Roof]:
    """STREAM copy/scale/add/triad on arrays of ``n`` FP64 elements, each validated first.

    The triad runs untimed for ``settle_s`` first (``settle``), longer than a timer warm-up:
    on a VM freshly allocated arrays can stream slower for some seconds before reaching
    their steady rate (host-side page backing, by all appearances). Whether settling helps
    there is not established (a VM's bandwidth can also flip between states on its own); it
    costs a few seconds and is recorded in the evidence.
    """
    arrays = StreamArrays(n)
    settle(arrays, settle_s)
    roofs = []
    for k in kernels:
        if progress:
            progress(f"cpu roofs: stream-{k} ({8 * n / MiB:.0f} MiB per array)")
        arrays.check(k)
        roof = stream_roof(k, arrays, time_fn(arrays.call(k)), llc_bytes)
        roof.evidence["settle_s"] = settle_s
        roofs.append(roof)
    return roofs


# --------------------------------------------------------------------------- BLAS GEMM


def gemm_flops(n: int) -> int:
    return 2 * n ** 3


def blas_gemm_roof(precision: str, n: int, time_fn: TimeFn) -> Roof:
    """numpy.matmul on square n x n matrices of random data: a library ceiling."""
    dt = np.float64 if precision == "fp64" else np.float32
    rng = np.random.default_rng()
    a = rng.standard_normal((n, n)).astype(dt)
    b = rng.standard_normal((n, n)).astype(dt)
    c = np.full((n, n), np.nan, dtype=dt)
    np.matmul(a, b, out=c)
    rows = rng.choice(n, size=min(n, 8), replace=False)  # spot-check against float64
    ref = a[rows].astype(np.float64) @ b.astype(np.float64)
    err = np.linalg.norm(c[rows] - ref) / np.linalg.norm(ref)
    if not err < (1e-12 if precision == "fp64" else 1e-5):
        raise RuntimeError(f"BLAS {precision} GEMM relative error {err:.2e}")
    timing = time_fn(lambda: np.matmul(a, b, out=c))
    flops = gemm_flops(n)
    blas = "dgemm" if precision == "fp64" else "sgemm"
    ev = {"probe": "blas-gemm", "implementation": f"numpy {np.__version__} matmul ({blas})",
          "blas": _blas_name(), "blas_runtime": _openblas_runtime(), "dtype": precision,
          "n": n, "flops_per_run": flops,
          "counting": "2 n^3", "relative_error": float(err), "value_from": "best time",
          "median_flop_per_s": flops / timing.median, "timing": timing_evidence(timing)}
    return Roof(name=f"{precision} BLAS {blas}", kind="compute", precision=precision,
                value=flops / min(timing.samples), source="measured", evidence=ev)


def _blas_name() -> str:
    try:
        cfg = np.show_config(mode="dicts")
        return str(cfg["Build Dependencies"]["blas"]["name"])
    except Exception:  # noqa: BLE001 - informational only
        return "unknown"


def _openblas_runtime() -> dict[str, Any]:
    """OpenBLAS's chosen kernel set ("SkylakeX", "Zen"...) and threads, when numpy bundles it.

    Best effort: the library numpy loaded is opened again by path (same handle) and asked.
    """
    import ctypes
    import glob

    libs_dir = Path(np.__file__).resolve().parent.parent / "numpy.libs"
    for path in sorted(glob.glob(str(libs_dir / "lib*openblas*.so*"))):
        try:
            lib = ctypes.CDLL(path)
        except OSError:
            continue
        out: dict[str, Any] = {}
        for prefix in ("scipy_openblas_", "openblas_"):
            for suffix in ("64_", ""):
                for key in ("config", "corename"):
                    fn = getattr(lib, f"{prefix}get_{key}{suffix}", None)
                    if fn is not None and key not in out:
                        fn.restype = ctypes.c_char_p
                        out[key] = fn().decode(errors="replace")
                nt = getattr(lib, f"{prefix}get_num_threads{suffix}", None)
                if nt is not None and "threads" not in out:
                    nt.restype = ctypes.c_int
                    out["threads"] = int(nt())
        if out:
            return out
    return {}


# --------------------------------------------------------------------------- all together


def compute_roof_notes(roofs: list[Roof]) -> list[str]:
    """Notes for the report when the FMA probe of a precision came out below the measured BLAS
    GEMM of that precision. A compute roof below a GEMM that ran is impossible (GEMM is FMAs
    plus loads): the probe missed the peak, and the higher ceiling, the BLAS one, is the roof
    used (``RoofSet.compute`` takes the highest measured roof of a precision)."""
    notes = []
    for prec in ("fp64", "fp32"):
        fma = [r for r in roofs if r.precision == prec and r.evidence.get("probe") == "fma-peak"]
        blas = [r for r in roofs if r.precision == prec and r.evidence.get("probe") == "blas-gemm"]
        if not fma or not blas:
            continue
        f, b = max(fma, key=lambda r: r.value), max(blas, key=lambda r: r.value)
        if b.value > f.value:
            notes.append(
                f"{prec}: the FMA probe ({f.name}, {f.value / 1e9:.1f} GFLOP/s) measured below "
                f"the BLAS GEMM ({b.name}, {b.value / 1e9:.1f} GFLOP/s); a compute roof cannot "
                f"be below a GEMM that ran, so the {prec} roof used is the higher ceiling, "
                f"{b.name}")
    return notes


FmaRoofFn = Callable[[str, bool], Roof]


FMA_REPEATS = {False: 3, True: 2}  # independent measurements of each FMA roof (by quick)


def fma_roof_in_process(time_fn: TimeFn) -> FmaRoofFn:
    """The FMA probe run in this process, with whatever tuning numba was started with."""
    def measure(precision: str, quick: bool) -> Roof:
        probe = FmaProbe(precision, target_s=0.03 if quick else 0.05)
        roof = probe.roof(time_fn(probe))
        roof.evidence["process"] = "in process"
        return roof
    return measure


def measure_cpu_roofs(time_fn: TimeFn, quick: bool = False, progress: Progress = None,
                      fma_roof: FmaRoofFn | None = None) -> list[Roof]:
    """Measure this CPU's roofs: STREAM x4 (dram), FMA peak and BLAS GEMM (fp64, fp32).

    ``time_fn(fn)`` times a no-argument call and returns a Timing. ``fma_roof(precision,
    quick)`` measures one FMA roof (default: in this process; the CPU backend runs it in a
    process started with the widest vectors), ``FMA_REPEATS`` times per precision, the two
    precisions alternating; each roof is the best repeat, flagged when they disagree by more
    than 10% (``best_of_repeats``). ``quick`` keeps arrays at the 4x-LLC minimum
    (memory permitting), shortens FMA calls and uses n=1024 for GEMM; the full run uses 8x LLC
    and n=2048.
    """
    llc = last_level_cache_bytes()
    n = stream_elements(llc, default_stream_budget(), factor=4.0 if quick else 8.0)
    roofs = measure_stream(time_fn, n, progress=progress, llc_bytes=llc,
                           settle_s=0.5 if quick else 3.0)
    fma_roof = fma_roof or fma_roof_in_process(time_fn)
    repeats: dict[str, list[Roof]] = {"fp64": [], "fp32": []}
    n_rep = FMA_REPEATS[quick]
    for r in range(n_rep):  # the precisions alternate: a slow spell is unlikely to hit all
        for prec in repeats:
            if progress:
                progress(f"cpu roofs: {prec} FMA peak (repeat {r + 1}/{n_rep})")
            repeats[prec].append(fma_roof(prec, quick))
    roofs += [best_of_repeats(reps) for reps in repeats.values()]
    gemm_n = 1024 if quick else 2048
    for prec in ("fp64", "fp32"):
        if progress:
            progress(f"cpu roofs: {prec} BLAS GEMM n={gemm_n}")
        roofs.append(blas_gemm_roof(prec, gemm_n, time_fn))
    return roofs


__all__ = [
    "FMA_REPEATS", "STEPS", "aligned_rows", "best_of_repeats", "probe_shape", "repeat_notes",
    "STREAM_BYTES_PER_ELEMENT", "STREAM_KERNELS", "FmaProbe",
    "StreamArrays", "aligned_empty", "available_memory_bytes", "blas_gemm_roof",
    "case_memory_budget", "compute_roof_notes", "default_stream_budget", "fma_asm_facts",
    "fma_flops", "fma_roof_in_process", "gemm_flops", "host_cpu_features", "last_level_cache_bytes",
    "llc_from_lscpu", "llc_from_sysfs", "parse_features", "widest_vector_bits",
    "widest_vector_env", "measure_cpu_roofs", "measure_stream", "settle", "stream_add",
    "stream_copy", "stream_elements", "stream_roof", "stream_scale", "stream_triad",
]
