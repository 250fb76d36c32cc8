"""Short samples of a CPU roof, taken beside each timed sample of a case (``timing.sample_loop``'s
``pair``): the roof's own kernel, on the roof's own data, a few milliseconds a call.

On a cloud VM the memory bandwidth can flip 2x within seconds and a neighbour can share a
core, so a roof measured before a case is not the roof the case ran under. A sample of the roof
right after each sample of the case sees the same machine state; the case's efficiency is then
the median of the pairs' ratios (``roofline.apply_roofs``).

- ``StreamPair``: the DRAM roof's STREAM kernel on the arrays the run's brackets use
  (``cpu_stream.StreamBracket``, the roof's own size): one call. The bytes of a case's
  launches that stream fewer arrays are timed against a probe of as many (``SHAPE_NAMES``:
  gemv's weights against the cache sweep's read pass, l2norm's squares against square-nt);
  the sample is the rate they give the case's bytes.
- ``SweepPair``: a cache level's sweep pass (its access, its best working set, one chunk per
  thread): each thread's sustained burst over a few bursts, summed, as the roof is.
- ``FmaPair``: the FMA probe of a precision, the better of two calls of about ``target_s``.

Each returns one rate per call; the first call allocates and compiles (``sample_loop`` makes
it before the timed samples). Each call first waits for the case's thread pools to stop
spinning (``pool_quiet``): a library's pool that spins beside the roof's sample halves it.
"""

from __future__ import annotations

import time
from typing import Any

import numpy as np

from roofbench.roof_records import Roof

from .cpu_stream import STREAM_BYTES_PER_ELEMENT, StreamBracket
from .pool_quiet import QUIET

PAIR_S = 0.003  # about what one roof sample lasts: short beside a state that holds for seconds
# An FMA call: longer, a parallel region costs ms to start on a VM (3 ms calls read 0.5x the
# roof beside BLAS's dgemm on the Zen 3 VM, 12-03: pair ratios up to 2.2)
FMA_PAIR_S = 0.015


class ReadPass:
    """The cache sweep's read pass (its loads are held by the codegen matrix) over one STREAM
    array's bytes, a chunk per thread: DRAM's read-only rate now, bytes/s of one call."""

    def __init__(self, nbytes: int) -> None:
        self.nbytes_asked = nbytes
        self.buf: Any = None

    def __call__(self) -> float:
        from .cpu_cache_sweep import SweepBuffer
        from .numba_env import threads

        if self.buf is None:
            self.buf = SweepBuffer(self.nbytes_asked, threads())
            self.buf.check(self.nbytes_asked)
            self.buf.run("read", self.nbytes_asked, 2, 1)  # compiled and warm
        ws = self.nbytes_asked
        moved = 2 * 8 * self.buf.counted_words("read", ws) * self.buf.parts
        t0 = time.perf_counter()
        self.buf.run("read", ws, 2, 1)
        return moved / (time.perf_counter() - t0)

    def close(self) -> None:
        self.buf = None


# The probe that times a launch's bytes, by the arrays it streams (``bench/measure/pairs``
# counts them): one, the read pass; two, square-nt on STREAM's arrays (one read, one
# non-temporal write: kernels/nt_stores.py, the elementwise kernels' own loop); three or more,
# the DRAM roof's STREAM kernel (add-nt where it was measured). On the Zen 4 VM a pure
# stream of one or two arrays held its ratio to the probe of its count across the memory's
# two states, where its ratio to add-nt moved up to 0.27, and two-array kernels outran
# add-nt in the slow state (docs/measurements.md, scripts/pair_mix.py).
SHAPE_NAMES = {1: "read", 2: "stream-square-nt"}


class StreamPair:
    """The DRAM roof's STREAM kernel on the roof's own arrays (the brackets'): one call. A
    prefix would be cheaper, but one four times the reported last-level cache still ran at
    3x the DRAM roof now and then on a 2-core EPYC VM (a host cache the guest is not told of).

    ``shares``: the fraction of the case's bytes moved by launches of 1, 2 and 3+ streams
    (default: all 3+); each part is timed against its probe (``SHAPE_NAMES``; ``reads`` is the
    read pass) and the sample is the rate they give the case's bytes now:
    1 / sum(share / rate), the time each part would take, added."""

    def __init__(self, bracket: StreamBracket, shares: dict[int, float] | None = None,
                 reads: ReadPass | None = None) -> None:
        shares = {3: 1.0} if shares is None else {k: v for k, v in shares.items() if v > 0}
        if (not shares or set(shares) - {1, 2, 3} or abs(sum(shares.values()) - 1) > 1e-9
                or (1 in shares and reads is None)):
            raise ValueError(f"stream shares {shares!r}: 1, 2 or 3 streams, adding up to 1"
                             " (1 needs a read pass)")
        self.bracket, self.shares, self.reads = bracket, shares, reads
        self.nbytes = STREAM_BYTES_PER_ELEMENT[bracket.kernel] * bracket.n
        self.squared = False

    @property
    def name(self) -> str:
        return pair_name(self.bracket.name, self.shares)

    def _square_nt(self) -> float:
        from roofbench.kernels import nt_stores

        arrays, n = self.bracket.arrays, self.bracket.n
        assert arrays is not None
        if not self.squared:  # checked once: c = a * a, every element
            arrays.c.fill(np.nan)
            nt_stores.square(arrays.a, arrays.c, n)
            if not np.array_equal(arrays.c, arrays.a * arrays.a):
                raise RuntimeError("stream-square-nt: result differs from numpy")
            self.squared = True
        t0 = time.perf_counter()
        nt_stores.square(arrays.a, arrays.c, n)
        return 16 * n / (time.perf_counter() - t0)

    def __call__(self) -> float:
        b = self.bracket
        if b.arrays is None:
            b()  # allocates, checks and warms the arrays (the brackets' own first call)
        assert b.arrays is not None
        fn = b.arrays.call(b.kernel)
        QUIET.before()
        rates: dict[int, float] = {}
        if 3 in self.shares:
            t0 = time.perf_counter()
            fn()
            rates[3] = self.nbytes / (time.perf_counter() - t0)
        if 2 in self.shares:
            rates[2] = self._square_nt()
        if 1 in self.shares:
            assert self.reads is not None
            rates[1] = self.reads()
        QUIET.after()
        return 1.0 / sum(share / rates[k] for k, share in self.shares.items())

    def close(self) -> None:
        """The arrays belong to the bracket (the run's tracker closes it) and the read pass
        to the process's samplers (``bench/measure/pairs.close``)."""


def pair_name(stream: str, shares: dict[int, float]) -> str:
    """The DRAM sampler's name: its probe's ("stream-add-nt", "read"), or each probe with
    its share of the bytes ("stream-square-nt 80% + read 20%")."""
    names = {**SHAPE_NAMES, 3: stream}
    parts = sorted(((v, names[k]) for k, v in shares.items() if v > 0), reverse=True)
    if len(parts) == 1:
        return parts[0][1]
    return " + ".join(f"{name} {v:.0%}" for v, name in parts)


class SweepPair:
    """A cache level's sweep pass at the working set its roof was taken at."""

    def __init__(self, roof: Roof, bursts: int = 16) -> None:
        if roof.cache is None:
            raise ValueError(f"{roof.name}: not a cache sweep roof")
        self.roof, self.bursts = roof, bursts
        self.access = roof.cache.access
        ev = roof.evidence
        self.working_set = int(ev.get("best_working_set_bytes")
                               or max(p.working_set_bytes for p in roof.cache.points))
        self.buf: Any = None
        self.hz = 0.0
        self.reps = 2

    @property
    def name(self) -> str:
        return self.roof.name

    def _start(self) -> None:
        from .cpu_cache_sweep import SweepBuffer, ticks_per_second
        from .numba_env import threads

        self.buf = SweepBuffer(self.working_set, threads())
        self.hz = ticks_per_second()
        self.buf.run(self.access, self.working_set, 2, 3)
        per_pass = max(float(self.buf.burst_ticks().min(axis=1).max()) / self.hz / 2, 1e-9)
        burst_s = PAIR_S / self.bursts
        self.reps = max(2, int(burst_s / per_pass) // 2 * 2)

    def __call__(self) -> float:
        from .cpu_cache_sweep import rates_of

        if self.buf is None:
            self._start()
        QUIET.before()
        self.buf.run(self.access, self.working_set, self.reps, self.bursts)
        QUIET.after()
        per_burst = 8 * self.buf.counted_words(self.access, self.working_set) * self.reps
        return rates_of(self.buf.burst_ticks(), per_burst, self.hz).sustained

    def close(self) -> None:
        self.buf = None


class FmaPair:
    """The FMA probe of one precision, calibrated to calls of about ``target_s``."""

    def __init__(self, precision: str, target_s: float = FMA_PAIR_S) -> None:
        self.precision, self.target_s = precision, target_s
        self.probe: Any = None

    @property
    def name(self) -> str:
        return f"{self.precision} FMA peak"

    def __call__(self) -> float:
        if self.probe is None:
            from .cpu_fma import FmaProbe

            self.probe = FmaProbe(self.precision, target_s=self.target_s)
        best = float("inf")
        QUIET.before()
        for _ in range(2):  # the first call may wake the pool's threads (ms on a VM)
            t0 = time.perf_counter()
            self.probe()
            best = min(best, time.perf_counter() - t0)
        QUIET.after()
        return float(self.probe.flops) / best

    def close(self) -> None:
        self.probe = None

