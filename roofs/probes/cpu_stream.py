"""STREAM on the CPU: copy, scale, add, triad (and add with non-temporal stores) in FP64 over
three arrays of at least 4x the last-level cache, each validated before it is timed.

numba ``@njit(parallel=True)`` loops on every core (numba's default thread count); bytes =
reads + writes as STREAM counts them (copy 16 B/elt, scale 16, add 24, triad 24;
write-allocate traffic not counted); the roof is the best time, as STREAM reports its "Best
Rate", with the median and every sample kept in the evidence. Timing is injected: ``time_fn(fn)
-> Timing`` comes from the caller (the backend's clock).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
from numba import njit, prange
from roofbench.kernels import nt_stores

from roofbench.roof_records import Roof
from roofbench.timing import Timing

from .host_memory import available_memory_bytes
from .numba_env import env, threads, timing_evidence

MiB = 1 << 20
GiB = 1 << 30

STREAM_SCALAR = 3.0  # STREAM's own scalar

TimeFn = Callable[[Callable[[], None]], Any]
Progress = Callable[[str], None] | None


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


@dataclass(frozen=True)
class StreamKernel:
    """One STREAM kernel, the one record its probe, its check and the codegen test
    (tests/roofs/codegen_child.py) read: a new kernel is one row of ``STREAM``.

    ``args`` names its operands in STREAM's order: "a", "b", "c" the arrays, "s" STREAM's
    scalar, "n" the element count. Bytes are reads + writes per FP64 element as STREAM counts
    them (no write-allocate). ``sets_roof``: whether its figure may be the DRAM roof (the
    probe marks its Roof so, and RoofSet.memory picks among those only); a kernel measured for
    comparison only says False."""

    name: str
    fn: Callable[..., None]
    args: tuple[str, ...]
    out: str  # the array it writes
    reference: Callable[[np.ndarray, np.ndarray, np.ndarray, float], np.ndarray]  # a, b, c, s
    bytes_per_element: int
    flops_per_element: int
    sets_roof: bool
    nontemporal: bool = False  # stores bypass the caches (kernels/nt_stores.py)


# "add-nt" is STREAM's add with non-temporal stores (kernels/nt_stores.py), the store policy the
# elementwise kernels use above the LLC: without it they could run above the DRAM roof. Every
# kernel may set the roof: a roof is a ceiling, the best any of them streams.
STREAM: tuple[StreamKernel, ...] = (
    StreamKernel("copy", stream_copy, ("c", "a"), "c", lambda a, b, c, s: a, 16, 0, True),
    StreamKernel("scale", stream_scale, ("b", "c", "s"), "b", lambda a, b, c, s: s * c, 16, 1,
                 True),
    StreamKernel("add", stream_add, ("c", "a", "b"), "c", lambda a, b, c, s: a + b, 24, 1, True),
    StreamKernel("triad", stream_triad, ("a", "b", "c", "s"), "a",
                 lambda a, b, c, s: b + s * c, 24, 2, True),
    StreamKernel("add-nt", nt_stores.add, ("a", "b", "c", "n"), "c", lambda a, b, c, s: a + b,
                 24, 1, True, nontemporal=True),
)
STREAM_BY_NAME: dict[str, StreamKernel] = {k.name: k for k in STREAM}
STREAM_KERNELS = tuple(STREAM_BY_NAME)
# Views of the table, by kernel name (the pairs and brackets read these).
STREAM_BYTES_PER_ELEMENT: dict[str, int] = {k.name: k.bytes_per_element for k in STREAM}
STREAM_FLOPS_PER_ELEMENT: dict[str, int] = {k.name: k.flops_per_element for k in STREAM}


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

    def operand(self, name: str) -> Any:
        """An operand of a STREAM kernel by its name in ``StreamKernel.args``."""
        return {"a": self.a, "b": self.b, "c": self.c, "s": STREAM_SCALAR, "n": self.n}[name]

    def call(self, kernel: str) -> Callable[[], None]:
        """The STREAM kernel as a no-argument call (STREAM's own operands and order)."""
        k = STREAM_BY_NAME[kernel]
        fn, args = k.fn, tuple(self.operand(x) for x in k.args)
        return lambda: fn(*args)

    def check(self, kernel: str) -> None:
        """Run ``kernel`` once on poisoned output and check every element against numpy."""
        k = STREAM_BY_NAME[kernel]
        out = self.operand(k.out)
        out.fill(np.nan)
        self.call(kernel)()
        ref = k.reference(self.a, self.b, self.c, STREAM_SCALAR)
        if not np.array_equal(out, ref):
            raise RuntimeError(f"stream-{kernel}: numba result differs from numpy")


def settle(arrays: StreamArrays, seconds: float) -> None:
    """Run the triad untimed for ``seconds`` so first-touch and page backing settle."""
    triad = arrays.call("triad")
    t_end = time.perf_counter() + seconds
    while time.perf_counter() < t_end:
        triad()


def stream_roof(kernel: str, arrays: StreamArrays, timing: Timing,
                llc_bytes: int | None = None) -> Roof:
    """A "dram" memory Roof from one STREAM kernel's timing: bytes/s at the best time, as
    STREAM reports its "Best Rate" (a roof is a ceiling; the median is kept as evidence)."""
    k = STREAM_BY_NAME[kernel]
    bpe = k.bytes_per_element
    nbytes = bpe * arrays.n
    best = min(timing.samples)
    ev: dict[str, Any] = {
        "probe": f"stream-{kernel}",
        "implementation": "numba njit(parallel=True), prange" + (
            ", explicit 64-byte non-temporal vector stores" if k.nontemporal else ""),
        "dtype": "fp64", "array_elements": arrays.n, "array_bytes": 8 * arrays.n, "arrays": 3,
        "bytes_per_element": bpe, "bytes_per_run": nbytes,
        "flops_per_element": k.flops_per_element,
        "counting": "reads + writes as STREAM counts them (no write-allocate)",
        "threads": threads(), "value_from": "best time", "sets_roof": k.sets_roof,
        "median_bytes_per_s": nbytes / timing.median, "timing": timing_evidence(timing),
        **env(),
    }
    if llc_bytes:
        ev["llc_bytes"] = llc_bytes
        ev["llc_multiple"] = 8 * arrays.n / llc_bytes
    return Roof(name=f"dram stream-{kernel}", kind="memory", level="dram",
                value=nbytes / best, source="measured", evidence=ev,
                median=nbytes / timing.median)


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


class StreamBracket:
    """A short STREAM probe between a run's cases (bench/suite/drift.py): ``kernel`` on
    arrays of ``n`` elements (the DRAM roof's own size), allocated and checked on first use
    and kept until ``close``; one untimed call, then ``samples`` timed ones. Returns (best,
    median) bytes/s: a fraction of a second where the arrays stream at tens of GB/s."""

    def __init__(self, n: int, kernel: str = "add-nt", samples: int = 5) -> None:
        self.n, self.kernel, self.samples = int(n), kernel, samples
        self.arrays: StreamArrays | None = None

    @property
    def name(self) -> str:
        return f"stream-{self.kernel}"

    def __call__(self) -> tuple[float, float]:
        if self.arrays is None:
            self.arrays = StreamArrays(self.n)
            self.arrays.check(self.kernel)
        fn = self.arrays.call(self.kernel)
        fn()
        times = []
        for _ in range(self.samples):
            t0 = time.perf_counter()
            fn()
            times.append(time.perf_counter() - t0)
        nbytes = STREAM_BYTES_PER_ELEMENT[self.kernel] * self.n
        return nbytes / min(times), nbytes / float(np.median(times))

    def close(self) -> None:
        self.arrays = None
