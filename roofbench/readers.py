"""Reading roofbench's files: every version ever written, migrated to today's records.

One function per record (``read_run``, ``read_roofset``, ...), the version dispatch, and the
migrations of older files:

- results.json version 1 held every case against the roof of its variant's declared unit, so a
  library GEMM on tensor cores (cuBLAS HGEMM) met the FP32 CUDA-core roof; ``migrate_v1_cores``
  re-holds those cases from a frozen table of the declarations it migrates (legacy.py), never
  from today's workloads;
- results.json before version 3 kept the backend facts of each launch (occupancy included)
  in ``extra["launches"]``, the ncu settings in ``extra["ncu"]``, and none of the report facts
  of the declarations: ``fill_v2_case`` moves the first two onto their typed fields and fills
  the report facts from the frozen table (legacy.py) and the buffers from an injected
  resolver;
- results.json before version 4 stored a case flat, with ``valid`` beside ``status``:
  ``legacy.nest_flat_case`` puts each field in its group of the nested record;
- a roof set of version 1 kept its typed facts in the free-form ``info``.

Part of the shared root: it imports nothing from kernels/, roofs/ or bench/.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

from roofbench.records import (
    RESULTS_SCHEMA,
    RESULTS_SCHEMA_VERSION,
    BufferFacts,
    CaseResult,
    Declaration,
    Evidence,
    Identity,
    LaunchCounters,
    LaunchFacts,
    LaunchResult,
    Measurement,
    NcuSettings,
    Occupancy,
    OccupancyLevel,
    Outcome,
    RooflinePlace,
    RunResult,
    RunStop,
)
from roofbench.roof_records import (
    ROOFSET_SCHEMA_VERSION,
    DatasheetMatch,
    ProbeFailure,
    Roof,
    RoofSet,
)

from . import legacy
from .cache_records import read_placement
from .calibrated import CALIBRATED_SCHEMA, CalibratedRoofs
from .roof_check import RoofError, check_names, checked_roof, figures_note
from .roof_context import PairedRoof, PairState, read_context, read_state
from .roofline import apply_roofs
from .timing import ROOF_CAUSES, Timing

RESULTS_READS_VERSIONS = (1, 2, 3, 4, 5, RESULTS_SCHEMA_VERSION)


class SchemaError(ValueError):
    """A file that is not a roofbench file of the expected kind or version (one line)."""


# ---------------------------------------------------------------------------- roofs


def read_roof(d: dict[str, Any], i: int = 0) -> Roof:
    """A stored roof, every field checked (roofbench/roof_check.py): SchemaError otherwise."""
    try:
        return checked_roof(d, i)
    except RoofError as e:
        raise SchemaError(f"invalid roofs: {e}") from None


def read_roofset(d: Any) -> RoofSet:
    """A roof set of any stored version (files written before version 2 are migrated)."""
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
    roofs = [read_roof(r, i) for i, r in enumerate(d["roofs"])]
    try:
        check_names(roofs)
    except RoofError as e:
        raise SchemaError(f"invalid roofs: {e}") from None
    return RoofSet(device=str(d["device"]), info=info, datasheet=ds, failed_probes=failed,
                   notes=notes, elapsed_s=float(elapsed) if elapsed is not None else None,
                   roofs=roofs, context=read_context(d.get("context")))


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


def read_calibrated(d: dict[str, Any]) -> CalibratedRoofs:
    """A calibration cache. Files written before the roof set carried a ``schema_version``
    hold only ``device``/``info``/``roofs`` (a version 1 roof set) and read as such."""
    if d.get("schema") != CALIBRATED_SCHEMA:
        raise ValueError(f"wrong schema {d.get('schema')!r} (expected {CALIBRATED_SCHEMA!r})")
    return CalibratedRoofs(roofs=read_roofset(d), created_utc=d.get("created_utc"),
                           slug=str(d.get("slug") or ""), table=list(d.get("table") or []))


# ---------------------------------------------------------------------------- cases


_CAUSE, _NO_CAUSE = "noise cause: ", ("noise cause: no outside cause", *ROOF_CAUSES)


def read_timing(d: dict[str, Any]) -> Timing:
    flags = [str(f) for f in d.get("flags") or []]
    # Files before the field say it only in the noisy flag's cause (the CPU backend's words)
    load = d.get("outside_load") or next(
        (f[len(_CAUSE):] for f in flags if f.startswith(_CAUSE) and not f.startswith(_NO_CAUSE)),
        "")
    return Timing(samples=[float(x) for x in d["samples_s"]], warmup_runs=int(d["warmup_runs"]),
                  stopped_by=str(d["stopped_by"]), config=dict(d.get("config") or {}),
                  flags=flags, outside_load=str(load),
                  waits=[float(x) for x in d.get("waits_s") or []],
                  roof_probe=str(d.get("roof_probe") or ""),
                  roof_rates=[float(x) for x in d.get("roof_rates") or []])


def read_occupancy(d: dict[str, Any]) -> Occupancy:
    return Occupancy(**{k: d[k] for k in Occupancy.__dataclass_fields__})


def read_counters(d: dict[str, Any]) -> LaunchCounters:
    known = set(LaunchCounters.__dataclass_fields__)
    return LaunchCounters(**{k: v for k, v in d.items() if k in known})


def read_facts(d: dict[str, Any]) -> LaunchFacts:
    known = set(LaunchFacts.__dataclass_fields__) - {"occupancy"}
    occ = d.get("occupancy")
    return LaunchFacts(**{k: v for k, v in d.items() if k in known},
                       occupancy=read_occupancy(occ) if isinstance(occ, dict) else None)


def read_launch(d: dict[str, Any]) -> LaunchResult:
    la = LaunchResult(kernel=d["kernel"], note=d["note"], flops=d["flops"],
                      bytes=dict(d["bytes"]),
                      timing=read_timing(d["timing"]) if d.get("timing") else None,
                      counters=read_counters(d["counters"]) if d.get("counters") else None,
                      facts=read_facts(d["facts"]) if d.get("facts") else None,
                      reads=list(d.get("reads") or []), writes=list(d.get("writes") or []))
    if la.facts is None and isinstance(d.get("occupancy"), dict):  # version 2
        la.facts = LaunchFacts(occupancy=read_occupancy(d["occupancy"]))
    return la


def read_ncu(d: dict[str, Any]) -> NcuSettings:
    known = set(NcuSettings.__dataclass_fields__)
    return NcuSettings(**{k: v for k, v in d.items() if k in known})


def _known(cls: Any, d: dict[str, Any]) -> Any:
    return cls(**{k: v for k, v in d.items() if k in cls.__dataclass_fields__})


def read_paired(d: dict[str, Any]) -> PairedRoof:
    p = _known(PairedRoof, d)
    states = tuple(_known(PairState, s) for s in d.get("states") or [] if isinstance(s, dict))
    return replace(p, states=states)


def read_case(d: dict[str, Any]) -> CaseResult:
    """A case of any version: nested (version 4 on), or flat (legacy.nest_flat_case)."""
    if "identity" not in d:  # versions 1 to 3 stored a case flat
        d = legacy.nest_flat_case(d)
    i, de, o, m, r, e = (dict(d.get(g) or {}) for g in legacy.FLAT_CASE_GROUPS)
    lv = i.get("occupancy_level")
    i["occupancy_level"] = OccupancyLevel(
        **{k: lv[k] for k in OccupancyLevel.__dataclass_fields__}) if lv else None
    de["buffers"] = {n: BufferFacts(**b) for n, b in (de.get("buffers") or {}).items()}
    m["launches"] = [read_launch(x) for x in m.get("launches") or []]
    m["timing"] = read_timing(m["timing"]) if m.get("timing") else None
    r["roof_states"] = [read_state(s) for s in r.get("roof_states") or []]
    r["paired"] = read_paired(r["paired"]) if isinstance(r.get("paired"), dict) else None
    pl = r.get("placement")
    r["placement"] = read_placement(pl) if isinstance(pl, dict) else None
    e["ncu"] = read_ncu(e["ncu"]) if e.get("ncu") else None
    return CaseResult(_known(Identity, i), _known(Declaration, de), _known(Outcome, o),
                      _known(Measurement, m), _known(RooflinePlace, r), _known(Evidence, e))


# ---------------------------------------------------------------------------- older cases


@dataclass(frozen=True)
class BufferModel:
    """The buffers of a case and the ones each launch reads and writes, as a workload
    declares them: what a file before version 3 did not store."""

    buffers: dict[str, BufferFacts]
    # (reads, writes) per launch; None: today's launches count other bytes than the record
    launches: list[tuple[list[str], list[str]]] | None


# Given a case record, its BufferModel (None when no declaration matches it). Injected by
# the caller that knows the workloads (bench/results.py): the shared root never imports them.
BufferResolver = Callable[[CaseResult], "BufferModel | None"]


def fill_v2_case(c: CaseResult, resolver: BufferResolver | None = None) -> None:
    """What a case of a file before version 3 lacks: the declarations' facts from the frozen
    table (legacy.py), the backend facts of each launch and the ncu settings out of ``extra``,
    and, when a resolver is given, the buffers."""
    w = legacy.WORKLOADS.get(c.identity.workload)
    if w is not None:
        c.declaration.marker, c.declaration.flop_convention = w.marker, w.flop_convention
    c.declaration.arrow_from = legacy.ARROW_FROM.get((c.identity.workload, c.identity.variant))
    c.evidence.extra = attach_launch_facts(c.measurement.launches, dict(c.evidence.extra or {}))
    ncu = c.evidence.extra.pop("ncu", None)
    if isinstance(ncu, dict):
        c.evidence.ncu = read_ncu(ncu)
    model = resolver(c) if resolver is not None else None
    if model is None:
        return
    if model.launches is None:  # the buffers are the size's; today's reads are not its
        c.declaration.buffers = dict(model.buffers)
    elif len(model.launches) == len(c.measurement.launches):
        c.declaration.buffers = dict(model.buffers)
        for la, (reads, writes) in zip(c.measurement.launches, model.launches, strict=True):
            la.reads, la.writes = list(reads), list(writes)


def attach_launch_facts(launches: list[LaunchResult], extra: dict[str, Any]) -> dict[str, Any]:
    """Move the backend facts of each launch out of ``extra["launches"]`` (one dict per launch,
    in order, occupancy included: how files before version 3 stored them) onto the typed
    ``LaunchResult.facts``; returns ``extra`` without them."""
    facts = extra.get("launches")
    if not isinstance(facts, list) or len(facts) != len(launches) or not all(
            isinstance(f, dict) for f in facts):
        return extra  # facts that do not map one-to-one on the launches: left as they are
    arch = extra.get("arch")
    for la, f in zip(launches, facts, strict=True):
        fn = f.get("function")
        known = set(LaunchFacts.__dataclass_fields__) - {"occupancy", "arch",
                                                         "validated_on_hardware"}
        occ = f.get("occupancy")
        la.facts = LaunchFacts(
            **{k: v for k, v in f.items() if k in known}, arch=arch,
            occupancy=(read_occupancy(occ) if isinstance(occ, dict) else la.occupancy),
            validated_on_hardware=not (isinstance(fn, str) and any(
                fn.startswith(p) for p in legacy.NOT_VALIDATED_ON_HARDWARE)))
    return {k: v for k, v in extra.items() if k != "launches"}


# ---------------------------------------------------------------------------- runs


def read_run(d: Any, resolver: BufferResolver | None = None) -> RunResult:
    """Any version this roofbench reads (SchemaError otherwise); older versions are migrated
    (``resolver``: the buffers of a case of a file before version 3, see fill_v2_case).

    Every number of every case is checked (``case_problem``): a case that cannot be read or
    holds a negative or non-finite time, count or rate is left out and named in the notes
    ("unreadable case ..."), and the rest is read."""
    if not isinstance(d, dict) or d.get("schema") != RESULTS_SCHEMA:
        raise SchemaError("not a roofbench results file (schema missing or wrong)")
    version = d.get("schema_version")
    if version not in RESULTS_READS_VERSIONS:
        raise SchemaError(f"results schema version {version!r}, this roofbench reads "
                          f"versions {', '.join(map(str, RESULTS_READS_VERSIONS))}")
    if not isinstance(d.get("cases"), list):
        raise SchemaError("not a roofbench results file ('cases' is not a list)")
    notes = d.get("notes") or []
    if not isinstance(notes, list):
        raise SchemaError("'notes' is not a list")
    cases: list[CaseResult] = []
    unreadable: list[str] = []
    left_out: dict[str, str] = {}
    for raw in d["cases"]:
        c, why = _read_checked_case(raw)
        if c is None:
            unreadable.append(f"unreadable case {_raw_key(raw)}: {why} (left out)")
            backend = _raw_identity(raw).get("backend", d.get("backend")) if isinstance(
                raw, dict) else "?"
            left_out[f"{backend}/{_raw_key(raw)}"] = why
        else:
            cases.append(c)
    stop = d.get("stop")
    run = RunResult(backend=str(d["backend"]), device=str(d["device"]),
                    roofs=read_roofset(d["roofs"]) if d.get("roofs") else None,
                    cases=cases,
                    environment=d.get("environment") or {}, command=d.get("command") or [],
                    created=str(d.get("created", "")), git_commit=d.get("git_commit"),
                    timer=d.get("timer") or {}, notes=[str(n) for n in notes] + unreadable,
                    interrupted=_flag(d.get("interrupted", False), "interrupted"),
                    stop=_read_stop(stop) if isinstance(stop, dict) else None,
                    unreadable=left_out,
                    trace=d["trace"] if isinstance(d.get("trace"), dict) else None)
    if version < 3:
        for c in run.cases:
            fill_v2_case(c, resolver)
    if version == 1:
        migrate_v1_cores(run)
    contradiction = figures_note(run.cases, run.roofs)
    if contradiction:
        run.notes.append(contradiction)
    return run


def _flag(x: Any, what: str) -> bool:
    """A true/false field: only JSON's true or false ("yes", 1 or "false" refused, never
    read as whatever Python's bool() makes of it)."""
    if not isinstance(x, bool):
        raise SchemaError(f"{what!r} is {x!r}, not true or false")
    return x


def _read_stop(d: dict[str, Any]) -> RunStop | None:
    cause, phase = d.get("cause"), d.get("phase")
    if cause not in ("signal", "os-error", "memory", "error") or \
            phase not in ("start", "roofs", "cases", "report"):
        return None
    return RunStop(cause=cause, detail=str(d.get("detail") or ""), phase=phase)


def _raw_identity(raw: dict[str, Any]) -> dict[str, Any]:  # flat before version 4
    ident = raw.get("identity", raw)
    return ident if isinstance(ident, dict) else {}


def _raw_key(raw: Any) -> str:
    if not isinstance(raw, dict):
        return f"({type(raw).__name__}, not a case)"
    raw = _raw_identity(raw)
    size = raw.get("size")
    size_s = "x".join(map(str, size)) if isinstance(size, list) else str(size)
    return "/".join(str(raw.get(k, "?")) for k in ("workload", "variant", "dtype")) + "/" + size_s


def _read_checked_case(raw: Any) -> tuple[CaseResult | None, str]:
    if not isinstance(raw, dict):
        return None, "not an object"
    try:
        c = read_case(raw)
    except (KeyError, TypeError, ValueError, AttributeError) as e:
        return None, f"malformed ({type(e).__name__}: {e})"
    why = case_problem(c)
    return (None, why) if why else (c, "")


def _bad_number(x: Any, *, integer: bool = False, positive: bool = False) -> str | None:
    """Why ``x`` is not a usable count or measure (None when it is)."""
    t = type(x)  # the common cases first: a 20,000-case file has a million numbers
    if (t is float and not integer and 0.0 < x < math.inf) or (t is int and x > 0) or \
            (not positive and x == 0 and (t is int or (t is float and not integer))):
        return None
    if isinstance(x, bool) or not isinstance(x, int if integer else (int, float)):
        return f"{type(x).__name__} {x!r}, not {'an integer' if integer else 'a number'}"
    if not math.isfinite(x):
        return f"{x} (not finite)"
    if x < 0 or (positive and x == 0):
        return f"{x} ({'not positive' if positive else 'negative'})"
    return None


def _samples(what: str, xs: list[float]) -> list[tuple[str, Any, bool, bool]]:
    """The first sample that is not a finite number >= 0, as a check that fails (else none):
    one pass over the floats ``read_timing`` made of them."""
    for i, x in enumerate(xs):
        if not 0.0 <= x < math.inf:
            return [(f"{what} sample {i}", x, False, False)]
    return []


def _waits_problem(what: str, t: Timing) -> str | None:
    """Waits are one per sample, in sample order (``Timing.waits``), each seconds >= 0, or
    none at all: any other count pairs a wait with no sample."""
    if t.waits and len(t.waits) != len(t.samples):
        return f"{what} holds {len(t.waits)} waits_s for {len(t.samples)} samples (one each)"
    bad = _samples(f"{what} waits_s", t.waits)
    return f"{bad[0][0]} is {bad[0][1]} (not a time)" if bad else None


def case_problem(c: CaseResult) -> str | None:
    """The first number of a case that a report cannot use, said in words; None when every
    one is a finite, non-negative number of the right type."""
    checks: list[tuple[str, Any, bool, bool]] = []  # (what, value, integer, positive)
    ident = c.identity
    for what, name in (("workload", ident.workload), ("variant", ident.variant),
                       ("backend", ident.backend), ("dtype", ident.dtype),
                       ("precision", ident.precision), ("status", c.outcome.status)):
        if not isinstance(name, str) or not name:
            return f"{what} is {name!r}, not a name"
    if not isinstance(c.identity.size, list):  # [] is a case without dimensions: a closure
        return f"size {c.identity.size!r} is not a list of dimensions"
    checks += [(f"size[{i}]", n, True, True) for i, n in enumerate(c.identity.size)]
    checks.append(("flops", c.declaration.flops, True, False))
    for what, d in (("bytes", c.declaration.bytes), ("ai", c.declaration.ai),
                    ("bytes_per_s", c.roofline.bytes_per_s)):
        if not isinstance(d, dict):
            return f"{what} is {type(d).__name__}, not a mapping"
        checks += [(f"{what}[{k}]", v, False, False) for k, v in d.items()]
    r = c.roofline
    for what, x in (("median_s", c.measurement.median_s), ("flop_per_s", r.flop_per_s),
                    ("attainable", r.attainable), ("efficiency", r.efficiency)):
        if x is not None:
            checks.append((what, x, False, what == "median_s"))
    if c.measurement.timing is not None:
        checks += _samples("timing", c.measurement.timing.samples)
        why = _waits_problem("timing", c.measurement.timing)
        if why:
            return why
    for j, la in enumerate(c.measurement.launches):
        checks.append((f"launch {j} flops", la.flops, False, False))
        if not isinstance(la.bytes, dict):
            return f"launch {j} bytes is {type(la.bytes).__name__}, not a mapping"
        checks += [(f"launch {j} bytes[{k}]", v, False, False) for k, v in la.bytes.items()]
        if la.timing is not None:
            checks += _samples(f"launch {j} timing", la.timing.samples)
            why = _waits_problem(f"launch {j} timing", la.timing)
            if why:
                return why
    for what, v, integer, positive in checks:
        why = _bad_number(v, integer=integer, positive=positive)
        if why:
            return f"{what} is {why}"
    if c.valid and c.measurement.median_s is None:
        return "status ok without a time"
    return None


def migrate_v1_cores(run: RunResult) -> None:
    """Re-hold the version 1 cases whose cores depend on where they run (legacy.V1_CORES_ON)
    against the roof of those cores, and recompute their derived metrics (attainable,
    efficiency, bound) under the stored roofs; measured samples and times are untouched."""
    kind = "cpu" if run.backend == "cpu" else "gpu"
    fixed = []
    for c in run.cases:
        rule = legacy.V1_CORES_ON.get((c.identity.workload, c.identity.variant))
        if rule is None or c.identity.dtype not in rule.dtypes:
            continue
        cores = rule.cores(kind, c.identity.dtype)
        precision = f"{c.identity.dtype}_tc" if cores == "tensor" else c.identity.precision
        if precision == c.identity.precision:
            continue
        c.identity.precision, c.identity.cores = precision, cores
        if run.roofs is not None and c.measurement.median_s:
            r = c.roofline
            r.attainable = r.efficiency = r.bound = r.limiting_roof = None
            apply_roofs(c, run.roofs)
        fixed.append(c.key)
    if fixed:
        run.notes.append(f"read from schema version 1: {', '.join(fixed)} re-held against "
                         "the roof of the unit that runs them (derived metrics recomputed; "
                         "measured times unchanged)")
