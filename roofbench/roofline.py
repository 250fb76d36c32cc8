"""The Roofline model: its vocabulary (memory levels, precisions, device keys) and its math.

A roof is either a bandwidth ceiling of one memory level (bytes/s) or a compute ceiling of one
precision (FLOP/s). Attainable performance of a point with arithmetic intensity ``ai`` (FLOP per
byte of one level) is ``min(compute, bandwidth x ai)`` over every level (and link) that has a
roof. Which roof of a level or precision counts is decided once (``SOURCE_ORDER``, ``pick``)
and the bound of a point computed once (``bound``, ``ridge``, ``attainable``), beside the roof
records in roof_records.py (RoofSet's methods answer with them; this module hands them on), and
everything that ranks roofs uses this order. This module places cases (records.py's CaseResult)
under a roof set; neither record module imports it.
"""

from __future__ import annotations

import math
import re
import statistics
from typing import Any

from .cache_records import CACHE_LEVELS, CacheSweep, Placement
from .records import CaseResult
from .roof_context import PairedRoof, PairState
from .roof_records import (
    Roof,
    RoofSet,
    bound,
)
from .timing import Timing, median_ci

# Memory levels, outermost first. "dram" is the off-chip memory (HBM on a GPU, DDR on a CPU):
# the same key everywhere so that kernel accounting does not depend on the device. A CPU's
# caches are "l3", "l2", "l1" (measured by a working-set sweep, roofs/probes/cpu_cache_sweep.py).
LEVELS = ("dram", "l3", "l2", "l1", "smem")
LEVEL_LABELS = {"dram": "DRAM/HBM", "l3": "L3", "l2": "L2", "l1": "L1", "smem": "shared mem"}

# Compute precisions. A "_tc" suffix is the tensor-core (matrix unit) roof of that precision.
PRECISIONS = (
    "fp64", "fp32", "fp16", "bf16", "fp8",
    "fp64_tc", "tf32_tc", "fp16_tc", "bf16_tc", "fp8_tc",
)


def device_slug(name: str) -> str:
    """A file-name-safe key for a device: 'NVIDIA H200' -> 'nvidia-h200'."""
    s = re.sub(r"[^a-z0-9]+", "-", name.lower()).strip("-")
    return s or "unknown-device"


def roof_precision(precision: str, roofs: RoofSet) -> str:
    """The compute roof a case of ``precision`` meets on this device: a tensor precision
    falls back to the CUDA-core roof of its dtype where the device has no such tensor roof
    (cuBLAS DGEMM on sm_89 runs on CUDA cores)."""
    if roofs.compute(precision) is None and precision.endswith("_tc"):
        base = precision.removesuffix("_tc")
        if roofs.compute(base) is not None:
            return base
    return precision


def place(working_set: int, roofs: RoofSet, cores: int | None = None) -> Placement | None:
    """The level a working set of ``working_set`` bytes is placed on under ``roofs``: the
    smallest cache level with a measured sweep roof (``Roof.cache``) whose capacity for
    ``cores`` cores (None: the cores that measured it; cut where its sweep ran no faster
    than the DRAM roof, ``CacheSweep.capacity_for``) holds it, else "dram"; None when the
    roofs have no cache level (a GPU's, or a CPU's measured before the sweep existed).
    The rule is cache_records.PLACEMENT_RULE: a level too small is never chosen, and of two
    that hold it the faster, so a case is never held against a roof slower than its data."""
    sweeps: dict[str, CacheSweep] = {}
    for r in roofs.roofs:
        if r.kind == "memory" and r.cache is not None and r.level in CACHE_LEVELS:
            sweeps.setdefault(r.level, r.cache)
    if not sweeps:
        return None
    dram = roofs.memory("dram")
    for level in CACHE_LEVELS:
        sw = sweeps.get(level)
        cap = sw.capacity_for(cores, dram.value if dram else None) if sw else 0
        if sw is not None and working_set < cap:
            return Placement(level, int(working_set), cap, cores)
    return Placement("dram", int(working_set), None, cores)


def placement_problem(rec: CaseResult, roofs: RoofSet) -> str | None:
    """Why a case's stored placement is not the one the rule gives under ``roofs`` (None
    when it is, or when the case has no placement): a case held against a slower level than
    the one its data fits in can sit above that roof, a faster one below its own."""
    pl = rec.roofline.placement
    if pl is None:
        return None
    want = place(pl.working_set_bytes, roofs, pl.cores)
    if want is None or want.level == pl.level:
        return None
    return (f"{rec.key}: placed on {pl.level}, but its working set "
            f"({pl.working_set_bytes} B) belongs on {want.level} under these roofs")


def placed_intensities(rec: CaseResult) -> dict[str, float]:
    """The case's intensities with its modelled DRAM bytes moved to the level it is placed
    on (a case resident in L2 moves those bytes through L2, not DRAM)."""
    pl = rec.roofline.placement
    if pl is None or pl.level == "dram" or "dram" not in rec.declaration.ai:
        return rec.declaration.ai
    ai = {k: v for k, v in rec.declaration.ai.items() if k != "dram"}
    ai[pl.level] = min(ai.get(pl.level, math.inf), rec.declaration.ai["dram"])
    return ai


def placed_bytes(rec: CaseResult) -> dict[str, int]:
    """The case's bytes per level with its DRAM bytes moved to the level it is placed on
    (the bytes of ``placed_intensities``)."""
    pl = rec.roofline.placement
    if pl is None or pl.level == "dram" or "dram" not in rec.declaration.bytes:
        return dict(rec.declaration.bytes)
    out = {k: v for k, v in rec.declaration.bytes.items() if k != "dram"}
    out[pl.level] = max(out.get(pl.level, 0), rec.declaration.bytes["dram"])
    return out


def by_bandwidth(rec: CaseResult, roofs: RoofSet) -> None:
    """A case of 0 FLOPs (a copy, a cast, a layout change) placed by bandwidth: its
    intensity is 0, so no point of the FLOP/s plane holds it; it is held against the memory
    roof of the level its bytes take longest through (the level that bounds a point as its
    intensity goes to 0), its efficiency that level's attained bytes/s over the roof. Its
    attainable stays None (a FLOP/s roof at intensity 0 is 0). One that moves nothing (a
    view) is not placed."""
    r = rec.roofline
    r.bound = r.limiting_roof = r.attainable = r.efficiency = None
    slowest: tuple[float, int, Roof] | None = None
    for level, b in placed_bytes(rec).items():
        m = roofs.memory(level)
        if m is not None and b > 0 and (slowest is None or b / m.value > slowest[0]):
            slowest = (b / m.value, b, m)
    if slowest is None:
        return
    _, b, m = slowest
    r.bound, r.limiting_roof = "memory", m.name
    if rec.measurement.median_s:
        r.efficiency = b / rec.measurement.median_s / m.value


def _cores_of(rec: CaseResult) -> int | None:
    lv = rec.identity.occupancy_level
    return lv.value if lv is not None and lv.axis == "threads" else None


def apply_roofs(rec: CaseResult, roofs: RoofSet) -> None:
    """Attainable performance, efficiency and bound of a measured case under ``roofs``.

    A case with buffers and no placement yet is placed first (``place``: its working set is
    the sum of its buffers' bytes, its cores an occupancy scan's threads or all); a case
    placed on a cache level is bound by that level's roof with its modelled bytes; a case of
    0 FLOPs by bandwidth (``by_bandwidth``)."""
    r, buffers = rec.roofline, rec.declaration.buffers
    if r.placement is None and buffers:
        r.placement = place(sum(b.nbytes for b in buffers.values()), roofs, _cores_of(rec))
    if rec.declaration.flops == 0:
        by_bandwidth(rec, roofs)
    else:
        _by_intensity(rec, roofs)
    r.paired = paired_roof(rec, roofs)
    if r.paired is not None:
        r.efficiency = r.paired.efficiency


def _by_intensity(rec: CaseResult, roofs: RoofSet) -> None:
    r = rec.roofline
    ai = placed_intensities(rec)
    try:
        b = bound(roofs, ai, roof_precision(rec.identity.precision, roofs))
    except KeyError:
        # No compute roof of this precision: fall back to the memory roof alone.
        level = r.placement.level if r.placement and r.placement.level in ai else "dram"
        m = roofs.memory(level)
        if m is None or level not in ai:
            return
        r.attainable, r.bound, r.limiting_roof = m.value * ai[level], "memory", m.name
    else:
        r.attainable, r.bound, r.limiting_roof = b.attainable, b.limiter, b.roof
    if r.flop_per_s and r.attainable:
        r.efficiency = r.flop_per_s / r.attainable


def bound_level(rec: CaseResult, roofs: RoofSet) -> str:
    """The memory level whose roof bounds a memory-bound case: its placement's (a CPU's cache
    sweep places it), else its limiting roof's (a GPU case whose declared L2 bytes bind it:
    a GPU's roofs place nothing), else DRAM."""
    r = rec.roofline
    if r.placement is not None:
        return r.placement.level
    roof = next((x for x in roofs.roofs if x.name == r.limiting_roof), None)
    return roof.level if roof is not None and roof.kind == "memory" and roof.level else "dram"


def pair_matches(probe: str, rec: CaseResult, roofs: RoofSet) -> bool:
    """Whether the roof a timing was paired with (``kind:key:name``) is the one that bounds
    the case now: the same kind, and its level (memory) or precision (compute)."""
    kind, _, rest = probe.partition(":")
    key = rest.partition(":")[0]
    r = rec.roofline
    if kind != r.bound:
        return False
    if kind == "memory":
        return key == bound_level(rec, roofs)
    try:
        return key == roof_precision(rec.identity.precision, roofs)
    except KeyError:
        return False


def paired_roof(rec: CaseResult, roofs: RoofSet) -> PairedRoof | None:
    """The case's efficiency from its paired samples (``PairedRoof``), or None: no pairs, or
    pairs of another roof than the one that bounds it. Pair i's ratio is the case's rate in
    sample i over the roof's rate right after it: the efficiency at the median time, scaled by
    median / t_i and by ceiling / roof_i."""
    t, r = rec.measurement.timing, rec.roofline
    if (t is None or not t.paired or r.efficiency is None
            or not pair_matches(t.roof_probe, rec, roofs)):
        return None
    roof = next((x for x in roofs.roofs if x.name == r.limiting_roof), None)
    if roof is None or not (t.median > 0 and all(x > 0 for x in t.samples)
                            and all(math.isfinite(x) and x > 0 for x in t.roof_rates)):
        return None
    of_ceiling = r.efficiency
    by_sample = pair_ratios(t, of_ceiling, roof.value)
    states = state_split(t.roof_rates, by_sample, STATE_FLOOR * roof.value)
    ratios = sorted(by_sample)
    lo, hi = median_ci(ratios)
    rates = sorted(t.roof_rates)
    return PairedRoof(t.roof_probe, len(ratios), statistics.median(ratios), lo, hi, rates[0],
                      statistics.median(rates), rates[-1], roof.value, of_ceiling,
                      "B/s" if roof.kind == "memory" else "FLOP/s", states)


def pair_ratios(t: Timing, of_ceiling: float, ceiling: float) -> list[float]:
    """Each pair's ratio, in sample order: the efficiency at the median time (``of_ceiling``
    of ``ceiling``), scaled by median / t_i and by ceiling / roof_i."""
    return [of_ceiling * t.median / s * ceiling / q
            for s, q in zip(t.samples, t.roof_rates, strict=True)]


# Two states of a roof: its sorted rates step by at least this factor between neighbours, and
# each side holds at least STATE_MIN_PAIRS and a tenth of the pairs (the VMs' memory: ~40
# and ~70 GB/s, a step of 1.5-1.8 with nothing between).
STATE_STEP = 1.25
STATE_MIN_PAIRS = 3
# A roof sample under a quarter of the roof's best is its probe starved of CPU (a busy core
# under taskset: 0.8-1.5 GB/s beside a 32 GB/s roof on the Zen 4 VM), not a state of the
# memory (the VMs' slow states: 0.4-0.6 of the best): such pairs join no state.
STATE_FLOOR = 0.25


def state_split(rates: list[float], ratios: list[float], floor: float = 0.0
                ) -> tuple[PairState, ...]:
    """The pairs (roof rate, ratio) in the roof's two states, slow first, where its rates
    took two (the widest step between sorted neighbours, ``STATE_STEP``); () for one. Pairs
    whose roof rate is under ``floor`` are in neither."""
    pairs = sorted((r, x) for r, x in zip(rates, ratios, strict=True) if r >= floor)
    if len(pairs) < 2 * STATE_MIN_PAIRS:
        return ()
    least = max(STATE_MIN_PAIRS, math.ceil(0.1 * len(pairs)))
    cut = max(range(least, len(pairs) - least + 1),
              key=lambda i: pairs[i][0] / pairs[i - 1][0])
    if pairs[cut][0] / pairs[cut - 1][0] < STATE_STEP:
        return ()
    return tuple(PairState(statistics.median(r for r, _ in side),
                           statistics.median(x for _, x in side), len(side))
                 for side in (pairs[:cut], pairs[cut:]))


def side_by_side(rs: RoofSet) -> list[dict[str, Any]]:
    """One row per memory level / precision: best measured, datasheet, theoretical, ratio."""
    keys = [("memory", lv) for lv in LEVELS] + [("compute", p) for p in PRECISIONS]
    seen = {(r.kind, r.key) for r in rs.roofs}
    keys += sorted(k for k in seen if k not in keys and k[0] in ("memory", "compute"))
    rows = []
    for kind, key in keys:
        get = rs.memory if kind == "memory" else rs.compute
        m, d, t = get(key, "measured"), get(key, "datasheet"), get(key, "theoretical")
        if not (m or d or t):
            continue
        ceiling = (m.evidence.get("ceiling") if m else None) or ""
        # The hand-written mma.sync ceiling, kept beside the library one (max of the two wins).
        mma = [r.value for r in rs.roofs if r.kind == "compute" and r.precision == key
               and r.source == "measured" and r.evidence.get("ceiling") == "mma.sync"]
        rows.append({
            "kind": kind, "key": key, "unit": "B/s" if kind == "memory" else "FLOP/s",
            "measured": m.value if m else None, "measured_by": m.name if m else None,
            "ceiling": ceiling, "mma_sync": max(mma) if mma else None,
            "datasheet": d.value if d else None,
            "theoretical": t.value if t else None,
            "measured_over_datasheet": (m.value / d.value) if (m and d) else None,
            "measured_over_theoretical": (m.value / t.value) if (m and t) else None,
        })
    return rows
