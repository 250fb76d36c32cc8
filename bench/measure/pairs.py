"""Which roof a case's samples are paired with, and its sampler (``roofs/probes/cpu_pairs.py``).

Before a case is timed it is placed under the roofs (its working set, its intensity): the roof
that bounds it is the one sampled beside each of its samples. A case on DRAM gets the DRAM
roof's STREAM kernel (on the arrays the run's brackets share), one on a cache level that level's
sweep pass, a compute-bound one the FMA probe of its precision. No pair where the roofs are
not this machine's measured ones (another device's file, a datasheet, a user's figure), where
the clock is a GPU's (its probes are not paired yet), or where the bounding roof has no
sampler (a BLAS roof, a DRAM figure no STREAM probe of ours measured): the case is then
timed and placed as before, and its record says nothing of pairs.

Samplers are kept for the process, one per roof, so that a suite or a pytest session pays the
allocation and compile once; ``close`` frees them (the suite's end).
"""

from __future__ import annotations

import inspect
from typing import Any

from roofbench.roofs.probes import cpu_pairs as cp
from roofbench.roofs.probes import cpu_stream as cs

from roofbench.cpu_cache import last_level_cache_bytes
from roofbench.records import CaseResult
from roofbench.roof_records import Roof, RoofSet
from roofbench.roofline import apply_roofs, place
from roofbench.timing import RoofPair

_SAMPLERS: dict[str, Any] = {}


def dram_bracket(roofs: RoofSet) -> cs.StreamBracket:
    """The DRAM roof's own STREAM kernel on its own array size (the CPU probes' rule when the
    roof does not say), one per process: the run's brackets and the pairs share its arrays."""
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


def _sampler(rec: CaseResult, roof: Roof, roofs: RoofSet) -> tuple[str, Any] | None:
    r = rec.roofline
    if r.bound == "memory":
        level = r.placement.level if r.placement is not None else "dram"
        if level == "dram":
            if not str(roof.evidence.get("probe", "")).startswith("stream-"):
                return None  # not our STREAM probe's figure: nothing here can sample it
            b = dram_bracket(roofs)
            return f"memory:dram:{b.name}", lambda: cp.StreamPair(b)
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
             working_set: int | None = None) -> RoofPair | None:
    """The roof pair of ``rec`` (declared, not yet timed) under ``roofs`` on ``clock``, or
    None (module doc). Places the record as ``fill_metrics`` will (its placement and bound
    are overwritten then)."""
    if (roofs is None or getattr(clock, "kind", "") != "cpu"
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
    found = _sampler(rec, roof, roofs)
    if found is None:
        return None
    key, make = found
    if key not in _SAMPLERS:
        _SAMPLERS[key] = make()
    # the FMA probe's rows are a few lines: they evict nothing of the case's
    rewarm = key.startswith("memory:") and needs_rewarm(rec, working_set)
    return RoofPair(key, _SAMPLERS[key], rewarm=rewarm)


def needs_rewarm(rec: CaseResult, working_set: int | None) -> bool:
    """Whether the case's data can live in a cache the roof's sample evicts: placed on a
    cache level, or a working set under four times the last-level cache (a small case held
    to DRAM by roofs without cache levels). A case streaming from DRAM needs none."""
    pl = rec.roofline.placement
    if pl is not None and pl.level != "dram":
        return True
    ws = working_set if working_set is not None else (
        pl.working_set_bytes if pl is not None
        else sum(b.nbytes for b in rec.declaration.buffers.values()))
    return ws < 4 * last_level_cache_bytes()


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
