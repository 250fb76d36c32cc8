"""The reader of pytest-benchmark JSON files (``pytest --benchmark-json FILE``): the entries
that carry FLOPs, bytes and a dtype in their ``extra_info`` become the cases of a run, so
`roofbench report`, `plot` and `compare` read such a file like a results.json.

What an entry needs (the ``roofline`` fixture writes all of it; a hand-written
``benchmark.extra_info`` may too): ``flops`` (a positive whole number of one call), ``bytes``
(a byte count, taken as DRAM traffic, or {level: bytes}) and ``dtype`` (fp64, fp32, ...);
optional ``precision``, ``size``, ``workload``, ``variant``, ``backend``, ``device``,
``valid``, ``rel_error``, ``tolerance``. Times: the raw per-iteration samples when they
are in the file (``stats.data``: always in ``--benchmark-json`` files, in saved ones with
``--benchmark-save-data``), else the median alone: without samples there is no interval, so
the regression gate never finds such a case slower (`uncertain`). Load: the
``outside_load`` the plugin measured while pytest-benchmark timed the entry (the noise
probe's words), so the gate's load rule applies as to any run (roofbench/gate.py). Roofs:
those the plugin stored under the file's ``roofbench`` key, else the ones
``roofs_for(device)`` finds (the calibration cache), else none. Entries without the counts
are named in the run's notes.
Anything else malformed is a SchemaError naming the entry.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

from roofbench.records import CaseResult, Declaration, Evidence, Identity, Outcome, RunResult
from roofbench.roof_records import RoofSet

from .readers import SchemaError, read_roofset
from .roofline import apply_roofs
from .timing import Timing

EXTRA_SCHEMA = "roofbench.pytest-benchmark/1"
# The storage types a case may name: kernels/spec.DTYPES' keys (the shared root does not
# import the workloads; a test holds the two equal).
DTYPES = ("fp64", "fp32", "fp16", "bf16", "fp8")


def is_pytest_benchmark(d: Any) -> bool:
    """A pytest-benchmark JSON document (its own layout: no roofbench schema tag)."""
    return (isinstance(d, dict) and "schema" not in d and isinstance(d.get("benchmarks"), list)
            and isinstance(d.get("machine_info"), dict))


def _positive(x: Any) -> bool:
    return (isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x)
            and x > 0)


def _whole(x: Any, what: str, where: str, zero: bool = False) -> int:
    if not (isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x)
            and float(x).is_integer() and (x >= 0 if zero else x > 0)):
        raise SchemaError(f"{where}: {what} must be a {'non-negative' if zero else 'positive'} "
                          f"whole number, got {x!r}")
    return int(x)


def _bytes(raw: Any, where: str) -> dict[str, int]:
    if isinstance(raw, dict):
        out = {str(k): _whole(v, f"bytes[{k!r}]", where, zero=True) for k, v in raw.items()}
    else:
        out = {"dram": _whole(raw, "bytes", where)}
    if not any(out.values()):
        raise SchemaError(f"{where}: bytes are all zero")
    return out


def _text(x: Any, what: str, where: str) -> None:
    """A name (a device, a backend): a non-empty text where given; never a number made one."""
    if x is not None and not (isinstance(x, str) and x.strip()):
        raise SchemaError(f"{where}: {what} must be a name (a non-empty text), got {x!r}")


def _timing(stats: dict[str, Any], options: Any, load: Any, where: str) -> Timing | None:
    data = stats.get("data")
    if data is None:
        return None
    if not isinstance(data, list) or not data or not all(_positive(x) for x in data):
        raise SchemaError(f"{where}: stats.data must be a list of positive finite times")
    cfg = {"timer": "pytest-benchmark", "rounds": stats.get("rounds"),
           "iterations": stats.get("iterations")}
    if isinstance(options, dict):
        cfg["options"] = dict(options)
    if not isinstance(load, str):
        raise SchemaError(f"{where}: extra_info.outside_load must be a text, got {load!r}")
    return Timing(samples=[float(x) for x in data], warmup_runs=0,
                  stopped_by="pytest-benchmark", config=cfg, outside_load=load)


def _case(e: dict[str, Any], extra: dict[str, Any], device_backend: str,
          roofs: RoofSet | None, where: str) -> CaseResult:
    stats = e.get("stats")
    if not isinstance(stats, dict) or not _positive(stats.get("median")):
        raise SchemaError(f"{where}: stats.median must be a positive finite time")
    flops = _whole(extra["flops"], "flops", where, zero=True)  # 0: placed by bandwidth
    per_level = _bytes(extra["bytes"], where)
    dtype = extra["dtype"]
    if dtype not in DTYPES:
        raise SchemaError(f"{where}: unknown dtype {dtype!r}; one of {', '.join(DTYPES)}")
    precision = str(extra.get("precision") or (dtype if dtype in ("fp64", "fp32") else "fp32"))
    name = str(e.get("name", "?"))
    base, _, param = name.partition("[")
    size = extra.get("size") or []
    if not (isinstance(size, list) and all(isinstance(s, int) and s >= 0 for s in size)):
        raise SchemaError(f"{where}: size must be a list of whole numbers")
    timing = _timing(stats, e.get("options"), extra.get("outside_load", ""), where)
    median = timing.median if timing is not None else float(stats["median"])
    valid = extra.get("valid", True) is not False
    rec = CaseResult(
        Identity(workload=str(extra.get("workload") or base), variant=str(
            extra.get("variant") or param.rstrip("]") or "default"),
                 backend=str(extra.get("backend") or device_backend), dtype=dtype, size=list(size),
                 precision=precision, cores="tensor" if precision.endswith("_tc") else "simt"),
        Declaration(flops=flops, bytes=per_level,
                    ai={lvl: flops / b for lvl, b in per_level.items() if b > 0},
                    tolerance=extra.get("tolerance")),
        # Only roofbench's fixture says it compared outputs; any other entry was just timed.
        Outcome(status="ok" if valid else "invalid",
                checked=extra.get("checked") is True or extra.get("rel_error") is not None,
                rel_error=extra.get("rel_error")),
        evidence=Evidence(extra={"measured_by": "pytest-benchmark", "fullname": e.get("fullname"),
               "group": e.get("group")}))
    if valid:
        rec.measurement.timing, rec.measurement.median_s = timing, median
        rec.roofline.flop_per_s = flops / median
        rec.roofline.bytes_per_s = {lvl: b / median for lvl, b in per_level.items()}
        if roofs is not None:
            apply_roofs(rec, roofs)
    return rec


def read_pytest_benchmark(d: dict[str, Any],
                          roofs_for: Callable[[str], RoofSet | None] | None = None
                          ) -> RunResult:
    """A pytest-benchmark document as a run (see the module doc)."""
    if not is_pytest_benchmark(d):
        raise SchemaError("not a pytest-benchmark file (needs 'benchmarks' and "
                          "'machine_info')")
    ours = d.get("roofbench")
    if ours is not None and (not isinstance(ours, dict) or ours.get("schema") != EXTRA_SCHEMA):
        raise SchemaError(f"its 'roofbench' entry is not {EXTRA_SCHEMA!r}")
    ours = ours or {}
    cpu = (d["machine_info"].get("cpu") or {}) if isinstance(d["machine_info"].get("cpu"),
                                                             dict) else {}
    entries: list[tuple[str, dict[str, Any], dict[str, Any]]] = []
    for i, e in enumerate(d["benchmarks"]):
        if not isinstance(e, dict):
            raise SchemaError(f"benchmarks[{i}] is not an object")
        extra: dict[str, Any] = e["extra_info"] if isinstance(e.get("extra_info"), dict) else {}
        entries.append((f"benchmarks[{i}] ({e.get('name', '?')})", e, extra))
    counted = [x for x in entries if {"flops", "bytes", "dtype"} <= set(x[2])]
    _text(ours.get("device"), "roofbench.device", "the file")
    _text(ours.get("backend"), "roofbench.backend", "the file")
    for where, _, extra in counted:
        for key in ("device", "backend", "workload", "variant"):
            _text(extra.get(key), f"extra_info.{key}", where)
    devices = [str(ours.get("device") or x[2].get("device") or cpu.get("brand_raw")
                   or "unknown device") for x in counted]
    device = devices[0] if devices else str(ours.get("device") or cpu.get("brand_raw")
                                            or "unknown device")
    roofs = read_roofset(ours["roofs"]) if isinstance(ours.get("roofs"), dict) else None
    if roofs is None and roofs_for is not None:
        roofs = roofs_for(device)
    backend = str(ours.get("backend") or "cpu")
    notes = []
    cases = []
    for (where, e, extra), dev in zip(counted, devices, strict=True):
        if dev != device:
            notes.append(f"{where}: ran on {dev}, not {device}: left out")
            continue
        cases.append(_case(e, extra, backend, roofs, where))
    missing = [e.get("name", "?") for w, e, x in entries if (w, e, x) not in counted]
    if missing:
        notes.append(f"{len(missing)} benchmark(s) without flops, bytes and dtype in "
                     f"extra_info, not placed: {', '.join(map(str, missing))}")
    commit: dict[str, Any] = d["commit_info"] if isinstance(d.get("commit_info"), dict) else {}
    sha = commit.get("id")
    mi = d["machine_info"]
    platform = "-".join(str(mi[k]) for k in ("system", "release", "machine") if mi.get(k))
    environment = {"host": mi.get("node"), "platform": platform or None,
                   "python": mi.get("python_version"),
                   "device": {"kind": "cpu", "name": cpu.get("brand_raw"),
                              "cores": cpu.get("count")} if cpu else {},
                   "pytest_benchmark": {"version": d.get("version"), "machine_info": mi,
                                        "commit_info": commit}}
    return RunResult(
        backend=backend, device=device, roofs=roofs, cases=cases, environment=environment,
        command=["pytest --benchmark-json"], created=str(d.get("datetime") or ""),
        git_commit=(f"{sha}+dirty" if sha and commit.get("dirty") else sha),
        notes=notes)
