"""The roof records (Roof, RoofSet: what a roofs file and a run's roofs hold) and which roof
counts: ``SOURCE_ORDER``, ``pick``, and the bound of a point under a roof set (``ridge``,
``bound``, ``attainable``), the math RoofSet's own methods answer with.

Below records.py (which hands these names on) and roofline.py (which places cases under them):
neither is imported here, so the two no longer import each other.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import asdict, dataclass, field, replace
from typing import Any, Literal

from .cache_records import CacheSweep
from .roof_context import RoofContext

# Measured beats user-given beats theoretical beats datasheet: a roof is a statement about what
# this device did, and a datasheet is only a lead.
SOURCE_ORDER = ("measured", "user", "theoretical", "datasheet")
SOURCE_RANK = {s: i for i, s in enumerate(SOURCE_ORDER)}

RoofKind = Literal["memory", "compute", "interconnect"]
Source = Literal["measured", "datasheet", "theoretical", "user"]


@dataclass
class Roof:
    """One ceiling of a device.

    ``value`` is in FLOP/s for compute roofs and bytes/s for memory and interconnect roofs.
    ``evidence`` holds how a measured roof was obtained (probe, size, samples, clocks) or where
    a datasheet figure comes from.
    """

    name: str
    kind: RoofKind
    value: float
    source: Source
    level: str | None = None  # memory/interconnect roofs
    precision: str | None = None  # compute roofs
    evidence: dict[str, Any] = field(default_factory=dict)
    median: float | None = None  # the probe's median figure; ``value`` is its best (ROOF_RULE)
    cache: CacheSweep | None = None  # a CPU cache level's roof: the sweep it comes from

    def __post_init__(self) -> None:
        if not (isinstance(self.value, (int, float)) and math.isfinite(self.value)
                and self.value > 0):
            raise ValueError(f"roof {self.name!r}: value must be a positive finite number, "
                             f"got {self.value!r}")
        if self.kind == "compute" and not self.precision:
            raise ValueError(f"compute roof {self.name!r} needs a precision")
        if self.kind in ("memory", "interconnect") and not self.level:
            raise ValueError(f"{self.kind} roof {self.name!r} needs a level")

    @property
    def unit(self) -> str:
        return "FLOP/s" if self.kind == "compute" else "B/s"

    @property
    def key(self) -> str:
        """Its precision (a compute roof) or its level (memory, interconnect): never None."""
        key = self.precision if self.kind == "compute" else self.level
        assert key is not None  # __post_init__ refuses a roof without it
        return key

    def to_dict(self) -> dict[str, Any]:
        d = asdict(replace(self, cache=None))
        del d["cache"]  # absent, not null, on every roof but a cache level's
        d.update({"cache": self.cache.to_dict()} if self.cache else {}, unit=self.unit)
        if d["median"] is None:  # optional: roofs written before it, datasheet roofs
            del d["median"]
        return d


@dataclass(frozen=True)
class ProbeFailure:
    """A probe that could not measure its roof, and why (the others are still measured)."""

    probe: str
    reason: str


@dataclass(frozen=True)
class DatasheetMatch:
    """Which datasheet entry the device matched (None: no datasheet roofs), and why."""

    entry: str | None
    reason: str


# Version of the roof-set layout below. 1: free-form ``info`` (failed probes as a list or a
# dict, the datasheet as ``info["datasheet"]`` on CPUs or ``info["datasheet_match"]`` on GPUs);
# 2: those facts are typed fields and ``info`` holds only raw probe evidence.
ROOFSET_SCHEMA_VERSION = 2


@dataclass
class RoofSet:
    """All roofs of one device, measured and datasheet side by side.

    ``datasheet``, ``failed_probes``, ``notes`` and ``elapsed_s`` are what reports read;
    ``info`` keeps the raw evidence of the probes (sweeps, configurations, per-probe seconds),
    stored as measured and shown only as evidence.
    """

    device: str
    roofs: list[Roof] = field(default_factory=list)
    info: dict[str, Any] = field(default_factory=dict)
    datasheet: DatasheetMatch | None = None
    failed_probes: list[ProbeFailure] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)  # caveats a report must print
    elapsed_s: float | None = None  # seconds the probes took
    context: RoofContext | None = None  # the probe environment, a run's states (roof_context)

    def add(self, roof: Roof) -> None:
        self.roofs.append(roof)

    def compute(self, precision: str, source: str | None = None) -> Roof | None:
        return pick(self.roofs, "compute", precision, source)

    def memory(self, level: str = "dram", source: str | None = None) -> Roof | None:
        return pick(self.roofs, "memory", level, source)

    def interconnect(self, level: str, source: str | None = None) -> Roof | None:
        return pick(self.roofs, "interconnect", level, source)

    def sources(self) -> list[str]:
        return sorted({r.source for r in self.roofs})

    def ridge(self, precision: str, level: str = "dram", source: str | None = None) -> float:
        return ridge(self, precision, level, source)

    def bound(self, intensities: dict[str, float], precision: str,
              link_intensities: dict[str, float] | None = None,
              source: str | None = None) -> Bound:
        return bound(self, intensities, precision, link_intensities, source)

    def attainable(self, ai: float, precision: str, level: str = "dram",
                   source: str | None = None) -> float:
        return attainable(self, ai, precision, level, source)

    def to_dict(self) -> dict[str, Any]:
        return {"schema_version": ROOFSET_SCHEMA_VERSION, "device": self.device,
                "datasheet": asdict(self.datasheet) if self.datasheet else None,
                "failed_probes": [asdict(f) for f in self.failed_probes],
                "notes": list(self.notes), "elapsed_s": self.elapsed_s,
                "info": self.info, "roofs": [r.to_dict() for r in self.roofs],
                **({"context": self.context.to_dict()} if self.context else {})}


@dataclass(frozen=True)
class Bound:
    """Where a point sits: the roof that limits it and the attainable performance there."""

    attainable: float  # FLOP/s
    limiter: Literal["memory", "compute", "interconnect"]
    roof: str  # name of the limiting roof


def pick(roofs: Iterable[Roof], kind: str, key: str, source: str | None = None) -> Roof | None:
    """The roof of ``kind`` for a level or precision ``key``: the best source by SOURCE_ORDER,
    and within one source the highest value (several probes may measure one level) among the
    probes that may set it: a roof whose evidence says ``sets_roof: false`` (a probe's record
    declares it, e.g. cpu_stream.StreamKernel) is measured and kept, never the ceiling."""
    attr = "precision" if kind == "compute" else "level"
    cands = [r for r in roofs if r.kind == kind and getattr(r, attr) == key
             and (source is None or r.source == source)
             and r.evidence.get("sets_roof", True) is not False]
    if not cands:
        return None
    best = min(SOURCE_RANK[r.source] for r in cands)
    return max((r for r in cands if SOURCE_RANK[r.source] == best), key=lambda r: r.value)


def ridge(rs: RoofSet, precision: str, level: str = "dram", source: str | None = None) -> float:
    """Intensity (FLOP/byte) where the bandwidth roof meets the compute roof."""
    c, m = rs.compute(precision, source), rs.memory(level, source)
    if c is None or m is None:
        raise KeyError(f"{rs.device}: no {precision} compute roof or {level} memory roof"
                       + (f" from source {source}" if source else ""))
    return c.value / m.value


def bound(rs: RoofSet, intensities: dict[str, float], precision: str,
          link_intensities: dict[str, float] | None = None,
          source: str | None = None) -> Bound:
    """Attainable FLOP/s for a point with one intensity per memory level.

    ``intensities`` maps level -> FLOP per byte moved through that level; every level that has
    a roof bounds the point. ``link_intensities`` does the same for interconnect roofs (FLOP per
    byte communicated): attainable = min(compute, B_l x AI_l for every level/link).
    """
    c = rs.compute(precision, source)
    if c is None:
        raise KeyError(f"{rs.device}: no {precision} compute roof")
    best = Bound(c.value, "compute", c.name)
    for level, ai in intensities.items():
        m = rs.memory(level, source)
        if m is None or ai is None or not math.isfinite(ai):
            continue
        if m.value * ai < best.attainable:
            best = Bound(m.value * ai, "memory", m.name)
    for link, ai in (link_intensities or {}).items():
        r = rs.interconnect(link, source)
        if r is None or ai is None or not math.isfinite(ai):
            continue
        if r.value * ai < best.attainable:
            best = Bound(r.value * ai, "interconnect", r.name)
    return best


def attainable(rs: RoofSet, ai: float, precision: str, level: str = "dram",
               source: str | None = None) -> float:
    return bound(rs, {level: ai}, precision, source=source).attainable
