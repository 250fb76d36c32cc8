"""Every record roofbench writes to or reads from disk, in one place: results.json and roofs files.

Each record is a dataclass with ``to_dict`` (what is written, exactly) and ``from_dict`` (which
reads every version ever written and migrates it). Readers get typed fields, never dict keys
agreed by convention. The files and their versions:

- ``roofbench.results`` (results.json), version 2 (``RESULTS_SCHEMA_VERSION``); version 1 is
  read and migrated (``migrate_v1_units``). A launch's theoretical occupancy, once kept in the
  backend facts ``extra["launches"][i]["occupancy"]``, is the typed ``LaunchResult.occupancy``;
  files that kept it in ``extra`` are moved over on reading (``attach_occupancy``).
- a roof set (``RoofSet.to_dict``), version 2 (``ROOFSET_SCHEMA_VERSION``); version 1 (free-form
  ``info``) is read and migrated.
- ``roofbench.calibrated-roofs/1`` (``CalibratedRoofs``): a GPU's calibration cache, a roof set
  plus a creation time and a measured-vs-datasheet table.

This module depends on nothing else in roofbench but ``kernels`` (the v1 unit migration), so
kernels/, roofs/ and bench/ can all use it.
"""

from __future__ import annotations

import math
import statistics
from dataclasses import asdict, dataclass, field, replace
from typing import Any, Literal

from . import __version__

# ---------------------------------------------------------------------------- roofs

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


CALIBRATED_SCHEMA = "roofbench.calibrated-roofs/1"
# `roofbench fleet`: every rank's roof set and the link roofs, in one report file
FLEET_SCHEMA = "roofbench.fleet/1"


@dataclass
class CalibratedRoofs:
    """A GPU's calibration cache (roofs/<slug>.json): the roof set plus when it was measured
    and the measured-vs-datasheet ``table`` (kept for a reader of the file; never read back).

    Written as a roof set dict with three more keys, so any roof-set reader takes it. Files
    written before the roof set carried a ``schema_version`` hold only ``device``/``info``/
    ``roofs`` (a version 1 roof set) and read as such.
    """

    roofs: RoofSet
    created_utc: str | None = None
    slug: str = ""
    table: list[dict[str, Any]] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        d = self.roofs.to_dict()
        return {"schema": CALIBRATED_SCHEMA, "created_utc": self.created_utc,
                "device": d["device"], "slug": self.slug, "table": self.table,
                **{k: d[k] for k in ("schema_version", "datasheet", "failed_probes", "notes",
                                     "elapsed_s", "info", "roofs")}}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> CalibratedRoofs:
        if d.get("schema") != CALIBRATED_SCHEMA:
            raise ValueError(f"wrong schema {d.get('schema')!r} (expected {CALIBRATED_SCHEMA!r})")
        return cls(roofs=RoofSet.from_dict(d), created_utc=d.get("created_utc"),
                   slug=str(d.get("slug") or ""), table=list(d.get("table") or []))


# ---------------------------------------------------------------------------- timing


@dataclass
class Timing:
    """The samples of one timed function and how sampling stopped (bench/measure/timer.py)."""

    samples: list[float]  # seconds, raw
    warmup_runs: int
    stopped_by: str  # "noise", "median_ci", "budget" or "max_samples"
    config: dict[str, Any] = field(default_factory=dict)
    flags: list[str] = field(default_factory=list)

    @property
    def n(self) -> int:
        return len(self.samples)

    @property
    def median(self) -> float:
        return statistics.median(self.samples)

    @property
    def mean(self) -> float:
        return statistics.fmean(self.samples)

    @property
    def stdev(self) -> float:
        return statistics.stdev(self.samples) if self.n > 1 else 0.0

    @property
    def cv(self) -> float:
        return self.stdev / self.mean if self.mean > 0 else 0.0

    @property
    def min(self) -> float:
        return min(self.samples)

    @property
    def max(self) -> float:
        return max(self.samples)

    def quantile(self, q: float) -> float:
        s = sorted(self.samples)
        if len(s) == 1:
            return s[0]
        pos = q * (len(s) - 1)
        lo = int(pos)
        hi = min(lo + 1, len(s) - 1)
        return s[lo] + (s[hi] - s[lo]) * (pos - lo)

    def summary(self) -> dict[str, Any]:
        return {"n": self.n, "median_s": self.median, "mean_s": self.mean, "min_s": self.min,
                "max_s": self.max, "p25_s": self.quantile(0.25), "p75_s": self.quantile(0.75),
                "stdev_s": self.stdev, "cv": self.cv, "warmup_runs": self.warmup_runs,
                "stopped_by": self.stopped_by, "flags": list(self.flags)}

    def to_dict(self) -> dict[str, Any]:
        """The summary (derived, for a reader of the file) plus the raw samples."""
        d = self.summary()
        d["samples_s"] = list(self.samples)
        d["config"] = dict(self.config)
        return d

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Timing:
        return cls(samples=[float(x) for x in d["samples_s"]], warmup_runs=int(d["warmup_runs"]),
                   stopped_by=str(d["stopped_by"]), config=dict(d.get("config") or {}),
                   flags=list(d.get("flags") or []))


# ---------------------------------------------------------------------------- launches


@dataclass(frozen=True)
class Occupancy:
    """Theoretical occupancy of one launch (bench/backends/occupancy.py computes it)."""

    threads_per_block: int
    registers_per_thread: int
    smem_per_block: int
    blocks_per_sm: int
    warps_per_sm: int
    max_warps_per_sm: int
    occupancy: float  # warps_per_sm / max_warps_per_sm
    limiter: str  # "warps", "blocks", "registers" or "shared_memory"

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Occupancy:
        return cls(**{k: d[k] for k in cls.__dataclass_fields__})


@dataclass
class LaunchCounters:
    """What ncu measured for one launch of a pipeline (values exactly as read, base units)."""

    kernel: str  # the kernel name ncu reported (joined by '+' when several were summed)
    dram_read: float | None = None  # bytes
    dram_write: float | None = None  # bytes
    l2_bytes: float | None = None  # bytes
    flops: dict[str, float] = field(default_factory=dict)  # precision -> FLOPs (tensor: ops)
    duration_s: float | None = None
    achieved_occupancy: float | None = None  # fraction of the peak warps per SM
    kernels: int = 1  # kernels summed into this launch (a library call may launch several)
    metrics: dict[str, float | None] = field(default_factory=dict)  # every metric as read

    @property
    def flops_total(self) -> float | None:
        return sum(self.flops.values()) if self.flops else None

    @property
    def dram_total(self) -> float | None:
        if self.dram_read is None or self.dram_write is None:
            return None
        return self.dram_read + self.dram_write

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> LaunchCounters:
        known = set(cls.__dataclass_fields__)
        return cls(**{k: v for k, v in d.items() if k in known})


@dataclass
class LaunchResult:
    """One launch of a case's pipeline: what the model counts, and what was measured of it."""

    kernel: str
    note: str
    flops: int
    bytes: dict[str, int]
    timing: Timing | None = None  # this launch timed alone (multi-launch pipelines)
    counters: LaunchCounters | None = None  # Nsight Compute's reading (run --ncu)
    occupancy: Occupancy | None = None  # theoretical, where the backend knows the registers

    def to_dict(self) -> dict[str, Any]:
        d: dict[str, Any] = {
            "kernel": self.kernel, "note": self.note, "flops": self.flops,
            "bytes": dict(self.bytes),
            "timing": self.timing.to_dict() if self.timing else None,
            "counters": self.counters.to_dict() if self.counters else None}
        if self.occupancy is not None:  # absent, not null, where unknown (CPU files unchanged)
            d["occupancy"] = self.occupancy.to_dict()
        return d

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> LaunchResult:
        return cls(kernel=d["kernel"], note=d["note"], flops=d["flops"], bytes=dict(d["bytes"]),
                   timing=Timing.from_dict(d["timing"]) if d.get("timing") else None,
                   counters=(LaunchCounters.from_dict(d["counters"]) if d.get("counters")
                             else None),
                   occupancy=Occupancy.from_dict(d["occupancy"]) if d.get("occupancy") else None)


def attach_occupancy(launches: list[LaunchResult], extra: dict[str, Any]) -> dict[str, Any]:
    """Move each launch's occupancy out of the backend facts (``extra["launches"][i]``, one per
    launch, in order: how GPU backends report it and how older files stored it) onto the typed
    ``LaunchResult.occupancy``; returns ``extra`` without it (a copy: the caller's is kept)."""
    facts = (extra or {}).get("launches")
    if not isinstance(facts, list) or not any(
            isinstance(f, dict) and "occupancy" in f for f in facts):
        return extra
    if len(facts) == len(launches):
        for la, f in zip(launches, facts, strict=True):
            occ = f.get("occupancy") if isinstance(f, dict) else None
            if isinstance(occ, dict) and la.occupancy is None:
                la.occupancy = Occupancy.from_dict(occ)
    else:  # facts that do not map one-to-one on the launches: leave them as they are
        return extra
    return {**extra, "launches": [{k: v for k, v in f.items() if k != "occupancy"}
                                  if isinstance(f, dict) else f for f in facts]}


# ---------------------------------------------------------------------------- cases, runs


@dataclass
class CaseResult:
    """One (workload, variant, dtype, size) on one backend: counted, validated, timed, placed."""

    workload: str
    variant: str
    backend: str
    dtype: str
    size: list[int]
    precision: str  # the compute roof the case is held against
    unit: str
    flops: int
    bytes: dict[str, int]
    ai: dict[str, float]
    status: str  # "ok", "invalid" (failed validation), "error", "unsupported"
    valid: bool
    error: str | None = None
    rel_error: float | None = None
    tolerance: float | None = None
    timing: Timing | None = None  # raw samples kept
    median_s: float | None = None
    flop_per_s: float | None = None
    bytes_per_s: dict[str, float] = field(default_factory=dict)
    attainable: float | None = None
    efficiency: float | None = None  # achieved / attainable
    bound: str | None = None  # "memory" or "compute" (what limits it under the roofs)
    limiting_roof: str | None = None
    launches: list[LaunchResult] = field(default_factory=list)
    extra: dict[str, Any] = field(default_factory=dict)  # backend facts, free-form evidence
    # Wall (host) seconds of each phase of this case (inputs, compile, prepare, validate,
    # time, time_launches): where a slow run spent its time.
    phases: dict[str, float] = field(default_factory=dict)
    # Device seconds of the phases whose work ran on a GPU: CUDA events around the phase
    # (inputs, prepare, validate), the timed samples' sum (time, time_launches; warm-ups not
    # counted). Absent for phases that ran on the host only.
    device_phases: dict[str, float] = field(default_factory=dict)

    @property
    def key(self) -> str:
        return f"{self.workload}/{self.variant}/{self.dtype}/{'x'.join(map(str, self.size))}"

    def to_dict(self) -> dict[str, Any]:
        d = asdict(replace(self, timing=None, launches=[]))
        d["timing"] = self.timing.to_dict() if self.timing else None
        d["launches"] = [la.to_dict() for la in self.launches]
        if not d["device_phases"]:  # optional in version 2: a host-only case writes none
            del d["device_phases"]
        return d

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> CaseResult:
        d = dict(d)
        d["launches"] = [LaunchResult.from_dict(x) for x in d.get("launches") or []]
        d["timing"] = Timing.from_dict(d["timing"]) if d.get("timing") else None
        known = set(cls.__dataclass_fields__)
        c = cls(**{k: v for k, v in d.items() if k in known})
        c.extra = attach_occupancy(c.launches, c.extra)  # files that kept it in extra
        return c


RESULTS_SCHEMA = "roofbench.results"
# 1: first release. 2: cases carry ``phases`` (and, optional, ``device_phases``), runs
# ``interrupted``, the roof set its typed fields; version 1 files are read and migrated
# (``migrate_v1_units``).
RESULTS_SCHEMA_VERSION = 2
RESULTS_READS_VERSIONS = (1, 2)


class SchemaError(ValueError):
    """A file that is not a roofbench file of the expected kind or version (one line)."""


@dataclass
class RunResult:
    """One `roofbench run`: what ran where, under which roofs, and every case."""

    backend: str
    device: str
    roofs: RoofSet | None
    cases: list[CaseResult]
    environment: dict[str, Any] = field(default_factory=dict)
    command: list[str] = field(default_factory=list)
    created: str = ""
    git_commit: str | None = None
    timer: dict[str, Any] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    interrupted: bool = False  # stopped (SIGTERM, Ctrl-C) before every case ran

    def to_dict(self) -> dict[str, Any]:
        return {
            "schema": RESULTS_SCHEMA, "schema_version": RESULTS_SCHEMA_VERSION,
            "roofbench_version": __version__,
            "created": self.created, "command": self.command, "git_commit": self.git_commit,
            "backend": self.backend, "device": self.device,
            "environment": self.environment, "timer": self.timer, "notes": self.notes,
            "interrupted": self.interrupted,
            "roofs": self.roofs.to_dict() if self.roofs else None,
            "cases": [c.to_dict() for c in self.cases],
        }

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> RunResult:
        """Read any version this roofbench reads (SchemaError otherwise); version 1 is
        migrated."""
        if not isinstance(d, dict) or d.get("schema") != RESULTS_SCHEMA:
            raise SchemaError("not a roofbench results file (schema missing or wrong)")
        version = d.get("schema_version")
        if version not in RESULTS_READS_VERSIONS:
            raise SchemaError(f"results schema version {version!r}, this roofbench reads "
                              f"versions {', '.join(map(str, RESULTS_READS_VERSIONS))}")
        run = cls(backend=d["backend"], device=d["device"],
                  roofs=RoofSet.from_dict(d["roofs"]) if d.get("roofs") else None,
                  cases=[CaseResult.from_dict(c) for c in d["cases"]],
                  environment=d.get("environment") or {}, command=d.get("command") or [],
                  created=d.get("created", ""), git_commit=d.get("git_commit"),
                  timer=d.get("timer") or {}, notes=d.get("notes") or [],
                  interrupted=bool(d.get("interrupted", False)))
        if version == 1:
            migrate_v1_units(run)
        return run


# ---------------------------------------------------------------------------- placing a case


def roof_precision(precision: str, roofs: RoofSet) -> str:
    """The compute roof a case of ``precision`` meets on this device: a tensor precision
    falls back to the CUDA-core roof of its dtype where the device has no such tensor roof
    (cuBLAS DGEMM on sm_89 runs on CUDA cores)."""
    if roofs.compute(precision) is None and precision.endswith("_tc"):
        base = precision.removesuffix("_tc")
        if roofs.compute(base) is not None:
            return base
    return precision


def apply_roofs(rec: CaseResult, roofs: RoofSet) -> None:
    """Attainable performance, efficiency and bound of a measured case under ``roofs``."""
    try:
        b = roofs.bound(rec.ai, roof_precision(rec.precision, roofs))
    except KeyError:
        # No compute roof of this precision: fall back to the memory roof alone.
        m = roofs.memory("dram")
        if m is None or "dram" not in rec.ai:
            return
        rec.attainable, rec.bound, rec.limiting_roof = m.value * rec.ai["dram"], "memory", m.name
    else:
        rec.attainable, rec.bound, rec.limiting_roof = b.attainable, b.limiter, b.roof
    if rec.flop_per_s and rec.attainable:
        rec.efficiency = rec.flop_per_s / rec.attainable


def migrate_v1_units(run: RunResult) -> None:
    """Version 1 held every case against the roof of its variant's declared unit, so a
    library GEMM on tensor cores (cuBLAS HGEMM) met the FP32 CUDA-core roof. Re-derive the
    unit from the workload declaration and the derived metrics (attainable, efficiency, bound)
    under the stored roofs; measured samples and times are untouched."""
    from .kernels.registry import workloads
    from .kernels.spec import Case

    ws = workloads()
    kind = "cpu" if run.backend == "cpu" else "gpu"
    fixed = []
    for c in run.cases:
        w = ws.get(c.workload)
        v = w.variants.get(c.variant) if w else None
        if v is None or c.dtype not in v.dtypes:
            continue
        case = Case(w, v, c.dtype, tuple(c.size))
        precision = case.precision_on(kind)
        if precision == c.precision:
            continue
        c.precision, c.unit = precision, case.unit(kind)
        if run.roofs is not None and c.median_s:
            c.attainable = c.efficiency = c.bound = c.limiting_roof = None
            apply_roofs(c, run.roofs)
        fixed.append(c.key)
    if fixed:
        run.notes.append(f"read from schema version 1: {', '.join(fixed)} re-held against "
                         "the roof of the unit that runs them (derived metrics recomputed; "
                         "measured times unchanged)")
