"""Which roof a case's samples are paired with, and its sampler (``roofs/probes/cpu_pairs.py``
on a CPU, ``roofs/probes/gpu_pairs.py`` on a GPU).

Before a case is timed it is placed under the roofs (its working set, its intensity): the roof
that bounds it is the one sampled beside each of its samples. On a CPU a case on DRAM gets the
DRAM roof's STREAM kernel (on the arrays the run's brackets share; the bytes of launches
streaming one or two arrays against a probe of as many, ``stream_shares``), one on a cache
level that level's sweep pass, a compute-bound one the FMA probe of its precision. On a GPU a
case bound by HBM gets the HBM roof's STREAM kernel (or the library copy that set it), one
bound by L2 (its declared L2 bytes) the L2 roof's kernel, a compute-bound one the CUDA-core FMA
probe of its precision, each at the launch that measured the roof and timed by CUDA events on
the backend's stream (the backend's ``pair_device``). No pair where the roofs are not this
device's measured ones (another device's file, a datasheet, a user's figure), or where the
bounding roof has no sampler (a BLAS roof, a DRAM figure no STREAM probe of ours measured, a
GPU's tensor-core or shared-memory roof), or where the clock has no way to sample it (a GPU
backend without CuPy, whose samplers run through CuPy, or a GPU sampler that failed its first
call: one line on stderr says why): the case is then timed and placed as before, and its record
says nothing of pairs.

Samplers are kept for the process, one per roof (and device), so that a suite or a pytest
session pays the allocation and compile once; ``close`` frees them (the suite's end).
"""

from __future__ import annotations

import inspect
import sys
from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from roofbench.cpu_cache import last_level_cache_bytes
from roofbench.errors_text import first_line
from roofbench.records import CaseResult
from roofbench.roof_records import Roof, RoofSet
from roofbench.roofline import apply_roofs, bound_level, place
from roofbench.timing import RoofPair

if TYPE_CHECKING:  # the samplers (Numba: ~1.5 s to import) load when a case is paired; a
    # command that pairs nothing (--help, list, compare, report) never pays for them
    from roofbench.roofs.probes import cpu_pairs as cp
    from roofbench.roofs.probes import cpu_stream as cs

_SAMPLERS: dict[str, Any] = {}
_REFUSED: dict[str, str] = {}  # GPU samplers whose first call failed: why (said once)


def dram_bracket(roofs: RoofSet) -> cs.StreamBracket:
    """The DRAM roof's own STREAM kernel on its own array size (the CPU probes' rule when the
    roof does not say), one per process: the run's brackets and the pairs share its arrays."""
    from roofbench.roofs.probes import cpu_stream as cs

    # STREAM add with non-temporal stores where it was measured: the plain-store kernels
    # (triad, copy) swing between two rates on a VM (30 vs 50 GB/s on the Zen 3 VM, 12-03)
    # where it holds, so a run whose best roof was triad's sampled a slower kernel than
    # its cases ran: pair ratios 1.3 in two make bench runs of three.
    dram = next((r for r in roofs.roofs if r.level == "dram" and r.kind == "memory"
                 and r.evidence.get("probe") == "stream-add-nt"), None) or roofs.memory("dram")
    ev: dict[str, Any] = dram.evidence if dram is not None else {}
    kernel = str(ev.get("probe", "")).removeprefix("stream-")
    n = ev.get("array_elements") or cs.stream_elements(last_level_cache_bytes(),
                                                       cs.default_stream_budget())
    kernel = kernel if kernel in cs.STREAM_KERNELS else "add-nt"
    key = f"bracket:{kernel}:{int(n)}"
    if key not in _SAMPLERS:
        _SAMPLERS[key] = cs.StreamBracket(int(n), kernel)
    return _SAMPLERS[key]


# An array under 1/64 of a launch's bytes is no stream of its own (gemv's x and y beside W,
# a row sum's sums): its lines are few among the others'.
MINOR_ARRAY = 1 / 64


def stream_count(sizes: Sequence[int]) -> int:
    """How many streams arrays of these bytes make when moved together: those of at least
    ``MINOR_ARRAY`` of their bytes, at most 3 (``cpu_pairs.SHAPE_NAMES``)."""
    total = sum(sizes)
    return min(3, sum(1 for b in sizes if b >= MINOR_ARRAY * total))


def stream_shares(rec: CaseResult, arrays: Sequence[int] = ()) -> dict[int, float]:
    """The fraction of the case's declared DRAM bytes moved by launches streaming 1, 2 and
    3 or more arrays (``cpu_pairs.SHAPE_NAMES``: the probe each part is timed against), from
    each launch's buffers; for a callable, which declares no launches, from the ``arrays``
    its reads=/writes= gave (``Counts.arrays``); all 3+ where neither is known."""
    bufs, launches = rec.declaration.buffers, rec.measurement.launches
    if not launches:
        return mixed_shares([(arrays, 1.0)])
    calls: list[tuple[Sequence[int], float]] = []
    for la in launches:
        # a buffer read and written (in place) is two streams: its lines go both ways
        names = [*dict.fromkeys(la.reads), *dict.fromkeys(la.writes)]
        if not names or any(n not in bufs for n in names):
            return {3: 1.0}
        sizes = [bufs[n].nbytes for n in names]
        calls.append((sizes, sum(sizes)))
    return mixed_shares(calls)


def mixed_shares(calls: Iterable[tuple[Sequence[int], float]]) -> dict[int, float]:
    """``stream_shares`` of several calls, each given as (its arrays' bytes, its weight: the
    bytes it moves); a call of unknown arrays (empty) counts as 3+ streams, as does a whole
    of no weight (a profiled program's ops, ``Distinct.arrays``). A part under
    ``MINOR_ARRAY`` of the whole is left out (a decode step's small element-wise ops beside
    its weights' reads): it would cost a probe sample of its own for a rate it barely moves."""
    parts: dict[int, float] = {}
    for sizes, weight in calls:
        k = stream_count(sizes) if sum(sizes) > 0 else 3
        parts[k] = parts.get(k, 0.0) + weight
    whole = sum(parts.values())
    if whole <= 0:
        return {3: 1.0}
    kept = {k: v for k, v in parts.items() if v >= MINOR_ARRAY * whole}
    return {k: v / sum(kept.values()) for k, v in sorted(kept.items())}


def _read_pass(bracket: cs.StreamBracket) -> cp.ReadPass:
    """The read pass over one of the bracket's arrays' bytes, one per process."""
    from roofbench.roofs.probes import cpu_pairs as cp

    key = f"read:{bracket.n}"
    if key not in _SAMPLERS:
        _SAMPLERS[key] = cp.ReadPass(8 * bracket.n)
    return _SAMPLERS[key]


def _sampler(rec: CaseResult, roof: Roof, roofs: RoofSet, arrays: Sequence[int] = (),
             shares: Mapping[int, float] | None = None) -> tuple[str, Any] | None:
    from roofbench.roofs.probes import cpu_pairs as cp

    r = rec.roofline
    if r.bound == "memory":
        level = bound_level(rec, roofs)
        if level == "dram":
            if not str(roof.evidence.get("probe", "")).startswith("stream-"):
                return None  # not our STREAM probe's figure: nothing here can sample it
            b = dram_bracket(roofs)
            mix = dict(shares) if shares is not None else stream_shares(rec, arrays)
            reads = _read_pass(b) if 1 in mix else None
            return (f"memory:dram:{cp.pair_name(b.name, mix)}",
                    lambda: cp.StreamPair(b, mix, reads))
        if roof.cache is not None and roof.level == level:
            return f"memory:{level}:{roof.name}", lambda: cp.SweepPair(roof)
        return None
    if (r.bound == "compute" and roof.evidence.get("probe") == "fma-peak" and roof.precision
            and "scaled_from" not in roof.evidence):  # a roof scaled to fewer threads: the
        # probe here runs on all of numba's, so its rate is not that roof's
        prec = roof.precision
        return f"compute:{prec}:fma", lambda: cp.FmaPair(prec)
    return None


def pair_for(rec: CaseResult, roofs: RoofSet | None, clock: Any,
             working_set: int | None = None, arrays: Sequence[int] = (),
             shares: Mapping[int, float] | None = None) -> RoofPair | None:
    """The roof pair of ``rec`` (declared, not yet timed) under ``roofs`` on ``clock``, or
    None (module doc); ``arrays``: a callable's declared arrays (``stream_shares``);
    ``shares``: the streams of a whole of several calls (``mixed_shares``), given. Places
    the record as ``fill_metrics`` will (its placement and bound are overwritten then)."""
    kind = getattr(clock, "kind", "")
    if (roofs is None or kind not in ("cpu", "gpu")
            or not getattr(clock, "pairs_roofs", False) or not takes_pair(clock)):
        return None
    if roofs.device != clock.device_name():
        return None
    if working_set is not None:
        rec.roofline.placement = place(working_set, roofs)
    apply_roofs(rec, roofs)
    name = rec.roofline.limiting_roof
    roof = next((x for x in roofs.roofs if x.name == name), None)
    if roof is None or roof.source != "measured":
        return None
    if kind == "gpu":
        return gpu_pair(rec, roof, roofs, clock, working_set)
    found = _sampler(rec, roof, roofs, arrays, shares)
    if found is None:
        return None
    key, make = found
    if key not in _SAMPLERS:
        _SAMPLERS[key] = make()
    # the FMA probe's rows are a few lines: they evict nothing of the case's
    rewarm = key.startswith("memory:") and needs_rewarm(rec, working_set, roofs)
    return RoofPair(key, _SAMPLERS[key], rewarm=rewarm)


def gpu_pair(rec: CaseResult, roof: Roof, roofs: RoofSet, clock: Any,
             working_set: int | None) -> RoofPair | None:
    """The GPU sampler of ``roof`` on the clock's device (``gpu_pairs.sampler_of``), made
    and called once here: one that cannot run (no CuPy, memory, a compile error) gives no
    pair, said once, rather than failing the case in its timing loop."""
    from roofbench.roofs.probes import gpu_pairs as gp

    found = gp.sampler_of(roof)
    device = clock.pair_device() if found is not None and hasattr(clock, "pair_device") else None
    if found is None or device is None:
        return None
    probe, make = found
    key = f"{device.key}|{probe}"
    if key in _REFUSED:
        return None
    if key not in _SAMPLERS:
        sampler = make(device)
        try:
            sampler()  # allocates and compiles
        except Exception as e:
            sampler.close()
            _REFUSED[key] = first_line(e)
            print(f"roofbench: no paired samples of {roof.name} on this GPU ({_REFUSED[key]}):"
                  " its cases are timed unpaired", file=sys.stderr, flush=True)
            return None
        _SAMPLERS[key] = sampler
    sampler = _SAMPLERS[key]
    sampler.timed = device.timed  # this clock's stream and events; the arrays stay
    # the FMA kernel writes one word per thread: it evicts nothing of the case's
    rewarm = probe.startswith("memory:") and needs_rewarm(rec, working_set, roofs,
                                                          device.gpu.l2_bytes)
    return RoofPair(probe, sampler, rewarm=rewarm)


def needs_rewarm(rec: CaseResult, working_set: int | None, roofs: RoofSet,
                 llc: int | None = None) -> bool:
    """Whether the case's data can live in a cache the roof's sample evicts: bound by a
    cache level (placed on it, or a GPU's L2 roof), or a working set under four times the
    last-level cache (``llc``, default this CPU's: a small case held to DRAM by roofs
    without cache levels). A case streaming from DRAM needs none."""
    if bound_level(rec, roofs) != "dram":
        return True
    pl = rec.roofline.placement
    ws = working_set if working_set is not None else (
        pl.working_set_bytes if pl is not None
        else sum(b.nbytes for b in rec.declaration.buffers.values()))
    return ws < 4 * (llc if llc is not None else last_level_cache_bytes())


def takes_pair(clock: Any) -> bool:
    """Whether ``clock.time`` takes a ``pair`` (a plug-in backend's or a test's subclass of the
    CPU backend may override ``time(fn, cfg)`` as it was)."""
    try:
        return "pair" in inspect.signature(clock.time).parameters
    except (TypeError, ValueError):
        return False


def close() -> None:
    """Free every sampler's arrays (the end of a suite's cases)."""
    for s in _SAMPLERS.values():
        s.close()
    _SAMPLERS.clear()
    _REFUSED.clear()
