"""The Roofline model: roofs, a device's set of roofs, and where a point sits under them.

A roof is either a bandwidth ceiling of one memory level (bytes/s) or a compute ceiling of one
precision on one unit (FLOP/s). Attainable performance of a kernel with arithmetic intensity
``ai`` (FLOP per byte of one level) is ``min(compute, bandwidth * ai)``.
"""

from __future__ import annotations

import math
import re
from dataclasses import asdict, dataclass, field
from typing import Any, Literal

RoofKind = Literal["memory", "compute", "interconnect"]
Source = Literal["measured", "datasheet", "theoretical", "user"]

# Memory levels, outermost first. "dram" is the off-chip memory (HBM on a GPU, DDR on a CPU):
# the same key everywhere so that kernel accounting does not depend on the device.
LEVELS = ("dram", "l2", "l1", "smem")
LEVEL_LABELS = {"dram": "DRAM/HBM", "l2": "L2", "l1": "L1", "smem": "shared mem"}

# Compute precisions. A "_tc" suffix is the tensor-core (matrix unit) roof of that precision.
PRECISIONS = (
    "fp64", "fp32", "fp16", "bf16", "fp8",
    "fp64_tc", "tf32_tc", "fp16_tc", "bf16_tc", "fp8_tc",
)


def device_slug(name: str) -> str:
    """A file-name-safe key for a device: 'NVIDIA H200' -> 'nvidia-h200'."""
    s = re.sub(r"[^a-z0-9]+", "-", name.lower()).strip("-")
    return s or "unknown-device"


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

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["unit"] = self.unit
        return d

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Roof:
        known = {"name", "kind", "value", "source", "level", "precision", "evidence"}
        return cls(**{k: v for k, v in d.items() if k in known})


@dataclass(frozen=True)
class Bound:
    """Where a point sits: the roof that limits it and the attainable performance there."""

    attainable: float  # FLOP/s
    limiter: Literal["memory", "compute", "interconnect"]
    roof: str  # name of the limiting roof


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

    def add(self, roof: Roof) -> None:
        self.roofs.append(roof)

    def _pick(self, kind: str, key: str, attr: str, source: str | None) -> Roof | None:
        cands = [r for r in self.roofs if r.kind == kind and getattr(r, attr) == key]
        if source is not None:
            cands = [r for r in cands if r.source == source]
        if not cands:
            return None
        # Measured beats user-given beats theoretical beats datasheet: a roof is a statement
        # about what this device did, and a datasheet is only a lead. Within one source the
        # highest value is the ceiling (several probes may measure one level).
        order = {"measured": 0, "user": 1, "theoretical": 2, "datasheet": 3}
        best_src = min(order[r.source] for r in cands)
        return max((r for r in cands if order[r.source] == best_src), key=lambda r: r.value)

    def compute(self, precision: str, source: str | None = None) -> Roof | None:
        return self._pick("compute", precision, "precision", source)

    def memory(self, level: str = "dram", source: str | None = None) -> Roof | None:
        return self._pick("memory", level, "level", source)

    def interconnect(self, level: str, source: str | None = None) -> Roof | None:
        return self._pick("interconnect", level, "level", source)

    def sources(self) -> list[str]:
        return sorted({r.source for r in self.roofs})

    def ridge(self, precision: str, level: str = "dram", source: str | None = None) -> float:
        """Intensity (FLOP/byte) where the bandwidth roof meets the compute roof."""
        c, m = self.compute(precision, source), self.memory(level, source)
        if c is None or m is None:
            raise KeyError(f"{self.device}: no {precision} compute roof or {level} memory roof"
                           + (f" from source {source}" if source else ""))
        return c.value / m.value

    def bound(self, intensities: dict[str, float], precision: str,
              link_intensities: dict[str, float] | None = None,
              source: str | None = None) -> Bound:
        """Attainable FLOP/s for a point with one intensity per memory level.

        ``intensities`` maps level -> FLOP per byte moved through that level; every level that
        has a roof bounds the point. ``link_intensities`` does the same for interconnect roofs
        (FLOP per byte communicated): attainable = min(compute, B_l x AI_l for every level/link).
        """
        c = self.compute(precision, source)
        if c is None:
            raise KeyError(f"{self.device}: no {precision} compute roof")
        best = Bound(c.value, "compute", c.name)
        for level, ai in intensities.items():
            m = self.memory(level, source)
            if m is None or ai is None or not math.isfinite(ai):
                continue
            if m.value * ai < best.attainable:
                best = Bound(m.value * ai, "memory", m.name)
        for link, ai in (link_intensities or {}).items():
            r = self.interconnect(link, source)
            if r is None or ai is None or not math.isfinite(ai):
                continue
            if r.value * ai < best.attainable:
                best = Bound(r.value * ai, "interconnect", r.name)
        return best

    def attainable(self, ai: float, precision: str, level: str = "dram",
                   source: str | None = None) -> float:
        return self.bound({level: ai}, precision, source=source).attainable

    def to_dict(self) -> dict[str, Any]:
        return {"schema_version": ROOFSET_SCHEMA_VERSION, "device": self.device,
                "datasheet": asdict(self.datasheet) if self.datasheet else None,
                "failed_probes": [asdict(f) for f in self.failed_probes],
                "notes": list(self.notes), "elapsed_s": self.elapsed_s,
                "info": self.info, "roofs": [r.to_dict() for r in self.roofs]}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> RoofSet:
        """Read any stored version (files written before version 2 are migrated)."""
        if not isinstance(d, dict) or "device" not in d or not isinstance(d.get("roofs"), list):
            raise ValueError("not a roof set: needs 'device' and a 'roofs' list")
        version = d.get("schema_version", 1)
        if version not in (1, ROOFSET_SCHEMA_VERSION):
            raise ValueError(f"roof set schema version {version!r}; this roofbench reads "
                             f"1 and {ROOFSET_SCHEMA_VERSION}")
        info = dict(d.get("info") or {})
        if version == 1:
            failed = _failures(info.pop("failed_probes", None))
            ds = _datasheet_v1(info.pop("datasheet_match", None), info.pop("datasheet", None))
            elapsed = info.pop("elapsed_s", None)
            notes: list[str] = []
        else:
            failed = _failures(d.get("failed_probes"))
            ds = DatasheetMatch(**d["datasheet"]) if d.get("datasheet") else None
            elapsed = d.get("elapsed_s")
            notes = [str(n) for n in d.get("notes") or []]
        return cls(device=str(d["device"]), info=info, datasheet=ds, failed_probes=failed,
                   notes=notes, elapsed_s=float(elapsed) if elapsed is not None else None,
                   roofs=[Roof.from_dict(r) for r in d["roofs"]])


def _failures(raw: Any) -> list[ProbeFailure]:
    """Failed probes as stored: a list of {probe, reason} (calibrate) or a {probe: reason}
    dict (an older writer)."""
    if not raw:
        return []
    if isinstance(raw, dict):
        return [ProbeFailure(str(k), str(v)) for k, v in raw.items()]
    if isinstance(raw, list):
        return [ProbeFailure(str(f.get("probe")), str(f.get("reason"))) if isinstance(f, dict)
                else ProbeFailure(str(f), "") for f in raw]
    raise ValueError(f"failed_probes must be a list or a dict, not {type(raw).__name__}")


def _datasheet_v1(match: Any, text: Any) -> DatasheetMatch | None:
    if isinstance(match, dict):
        return DatasheetMatch(entry=match.get("entry"), reason=str(match.get("reason") or ""))
    if text:
        return DatasheetMatch(entry=None, reason=str(text))
    return None
