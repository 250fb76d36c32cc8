"""Nsight Compute counters beside the model: ``roofbench run --ncu``.

After the cases are validated and timed, each valid case runs once more, alone, in a child
process (``python -m roofbench.bench.measure.ncu_case``) under ``ncu``, which reads per launch: DRAM
bytes read and written, L2 bytes, FLOPs per precision as Nsight Compute's roofline counts them
(FMA = 2, a half-precision instruction = 2 lanes, so HADD/HMUL = 2 and HFMA = 4), tensor-core
ops, duration and achieved occupancy. The model (FLOPs and bytes declared by the workload) and
the hardware are then compared per launch and per pipeline within stated tolerances.

Why the CSV page and not a library: ``nsight-python`` (PyPI) profiles by re-running the calling
script under ncu (a whole ``roofbench run``), its 1.x needs Nsight Compute >= 2026.2.1 and
cuda-core/cuda-bindings; ``ncu_report`` (shipped with Nsight Compute, or the 17 MB
``ncu-report`` wheel) reads binary ``.ncu-rep`` files that nothing but a real ncu on a GPU can
write, so its path could not be tested without a GPU. ``ncu --csv --page raw --print-units
base`` is plain text any ncu release writes, one row per kernel, and the stand-in in the tests
writes the same format (from the real H200 outputs).

Failures are one line each (no ncu, too old, counters not permitted, a case that fails under
ncu): the case keeps its timing and model numbers and the run goes on.
"""

from __future__ import annotations

import csv
import os
import re
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from roofbench.records import LaunchCounters, NcuSettings

if TYPE_CHECKING:
    from roofbench.records import CaseResult

NCU_ENV = "ROOFBENCH_NCU"  # path of the ncu executable, when it is not on PATH
FALLBACK_PATHS = ("/usr/local/cuda/bin/ncu",)  # where the CUDA toolkit puts it
# The oldest Nsight Compute tried: 2022.3 (CUDA 11.8) is the first release that profiles Hopper.
MIN_VERSION = (2022, 3)
# Clocks as the device runs them (METHOD.md: leave the clocks alone): ncu's default "base"
# locks them to base clocks, and its durations would not compare with the timed medians.
CLOCK_CONTROL = "none"
CACHE_CONTROL = "all"  # flush caches before each launch: every launch starts from DRAM
TIMEOUT_S = 600

DRAM_READ = "dram__bytes_read.sum"
DRAM_WRITE = "dram__bytes_write.sum"
L2_BYTES = "lts__t_bytes.sum"
DURATION = "gpu__time_duration.sum"
OCCUPANCY = "sm__warps_active.avg.pct_of_peak_sustained_active"  # "Achieved Occupancy"


def _op(name: str) -> str:
    return f"sm__sass_thread_inst_executed_op_{name}_pred_on.sum"


# FLOPs per thread instruction, as Nsight Compute's roofline weighs them.
FLOP_WEIGHTS: dict[str, dict[str, int]] = {
    "fp64": {_op("dadd"): 1, _op("dmul"): 1, _op("dfma"): 2},
    "fp32": {_op("fadd"): 1, _op("fmul"): 1, _op("ffma"): 2},
    "fp16": {_op("hadd"): 2, _op("hmul"): 2, _op("hfma"): 4},  # half2: 2 lanes a thread
}
# Packed fp32x2 instructions exist on newer GPUs only: collected where the device has them.
OPTIONAL_FP32 = {_op("fadd2"): 2, _op("fmul2"): 2, _op("ffma2"): 4}
# Tensor-core math ops (1 op = 1 FLOP: 2 per multiply-add) by input type. The device lists
# aggregates and their splits side by side (on sm_90: sm__ops_path_tensor_src_fp16, its
# _dst_fp16 / _dst_fp32 parts, each again _sparsity_on / _off, and per instruction family
# sm__ops_path_tensor_op_hmma_* / _hgmma_*), so summing every name of the family would count
# the same ops several times: per input type, the first of these non-overlapping sets the
# device lists entirely is collected.
_T = "sm__ops_path_tensor_src_"
TENSOR_OPS: dict[str, tuple[tuple[str, ...], ...]] = {
    "fp16": ((f"{_T}fp16",), (f"{_T}fp16_dst_fp16", f"{_T}fp16_dst_fp32")),
    "bf16": ((f"{_T}bf16",), (f"{_T}bf16_dst_fp32",),
             (f"{_T}bf16_dst_fp32_sparsity_off", f"{_T}bf16_dst_fp32_sparsity_on")),
    "fp8": ((f"{_T}fp8",), (f"{_T}fp8_dst_fp16", f"{_T}fp8_dst_fp32"),
            (f"{_T}fp8_sparsity_off", f"{_T}fp8_sparsity_on")),
    "fp32": ((f"{_T}tf32_dst_fp32",), (f"{_T}tf32",)),
    "fp64": ((f"{_T}fp64",),),
}
SIMT_FLOPS = tuple(m for w in FLOP_WEIGHTS.values() for m in w)
# What each check needs (its FLOPs also the tensor set of a tensor case's dtype).
CHECK_METRICS = {"FLOPs": SIMT_FLOPS, "DRAM read": (DRAM_READ,), "DRAM write": (DRAM_WRITE,)}
WANTED = (DURATION, L2_BYTES, OCCUPANCY)


class NcuUnavailable(RuntimeError):
    """ncu cannot collect anything on this machine: one line, the reason and the fix."""


class NcuCaseError(RuntimeError):
    """One case could not be profiled (the others still are)."""


def base_name(metric: str) -> str:
    """'dram__bytes_read.sum' -> 'dram__bytes_read' (what --query-metrics lists)."""
    return metric.split(".", 1)[0]


# -- the CSV --------------------------------------------------------------------------------

@dataclass
class KernelRow:
    """One profiled kernel of an ncu CSV: metric -> value in base units (bytes, seconds, %)."""

    id: int
    kernel: str
    values: dict[str, float | None]


_SCALE = {"": 1.0, "K": 1e3, "M": 1e6, "G": 1e9, "T": 1e12, "P": 1e15}
# Time units -> divisor to seconds (a division keeps 207424 ns exactly 0.000207424 s).
_TIME = {"ns": 1e9, "nsecond": 1e9, "us": 1e6, "usecond": 1e6, "ms": 1e3, "msecond": 1e3,
         "s": 1.0, "second": 1.0}
_COUNT_UNIT = re.compile(r"^([KMGTP]?)(byte|B|inst|warp|cycle|op|sector|request|thread)s?$")


def unit_factor(unit: str) -> float:
    """Multiplier from a value in ``unit`` to base units (bytes, counts, percent)."""
    u = unit.strip()
    if u in ("%", ""):
        return 1.0
    m = _COUNT_UNIT.match(u)
    if m:
        return _SCALE[m.group(1)]
    raise ValueError(f"unknown ncu unit {unit!r}")


def parse_value(text: str, unit: str = "") -> float | None:
    """'536,912,896' -> 536912896.0; times in seconds; 'n/a' or '' -> None."""
    t = text.strip().replace(",", "")
    if t.lower() in ("", "n/a", "no data", "nan"):
        return None
    if unit.strip() in _TIME:
        return float(t) / _TIME[unit.strip()]
    return float(t) * unit_factor(unit)


def parse_csv(text: str) -> list[KernelRow]:
    """Kernels of an ncu ``--csv`` output, in profiling order. Reads the raw page (one row per
    kernel, a metric per column, a units row under the header) and the details page (one row
    per metric: 'Metric Name', 'Metric Unit', 'Metric Value'). Lines that are not CSV records
    (==PROF== messages, program output) are skipped."""
    lines = [ln for ln in text.splitlines() if ln.startswith('"')]
    rows = list(csv.reader(lines))
    if not rows:
        return []
    header = rows[0]
    if "ID" not in header or "Kernel Name" not in header:
        raise ValueError("not an ncu CSV (no 'ID' and 'Kernel Name' columns)")
    col = {name: i for i, name in enumerate(header)}
    out: dict[int, KernelRow] = {}
    if "Metric Name" in col and "Metric Value" in col:
        for r in rows[1:]:
            if len(r) != len(header) or r[col["ID"]] == "ID":
                continue
            kid = int(r[col["ID"]])
            kr = out.setdefault(kid, KernelRow(kid, r[col["Kernel Name"]], {}))
            unit = r[col["Metric Unit"]] if "Metric Unit" in col else ""
            kr.values[r[col["Metric Name"]]] = parse_value(r[col["Metric Value"]], unit)
        return [out[k] for k in sorted(out)]
    first_metric = max(col[c] for c in ("ID", "Kernel Name")) + 1
    fixed = {"Process ID", "Process Name", "Host Name", "Context", "Stream", "Block Size",
             "Grid Size", "Device", "CC", "Kernel Time", "Section Name"}
    metric_cols = [i for i in range(first_metric, len(header)) if header[i] not in fixed]
    units = [""] * len(header)
    body = rows[1:]
    if body and body[0][col["ID"]] == "":  # the units row (--print-units)
        units, body = body[0], body[1:]
    for r in body:
        if len(r) != len(header) or r[col["ID"]] == "ID":
            continue
        kid = int(r[col["ID"]])
        out[kid] = KernelRow(kid, r[col["Kernel Name"]],
                             {header[i]: parse_value(r[i], units[i]) for i in metric_cols})
    return [out[k] for k in sorted(out)]


def counters_from_rows(rows: list[KernelRow], tensor_ops: Iterable[str] = ()) -> LaunchCounters:
    """One launch's counters from the kernel(s) it ran (several are summed; occupancy is the
    duration-weighted mean). ``tensor_ops``: the non-overlapping tensor-op metrics of the
    case's input type (TENSOR_OPS), counted as its tensor FLOPs."""
    def total(metric: str) -> float | None:
        vals = [r.values.get(metric) for r in rows]
        return None if any(v is None for v in vals) else float(sum(vals))  # type: ignore[arg-type]

    metrics = sorted({m for r in rows for m in r.values})
    flops: dict[str, float] = {}
    groups = {p: dict(w) for p, w in FLOP_WEIGHTS.items()}
    groups["fp32"].update(OPTIONAL_FP32)
    for prec, weights in groups.items():
        got = [(total(m), w) for m, w in weights.items() if m in metrics]
        got = [(v, w) for v, w in got if v is not None]
        if got:
            flops[prec] = float(sum(v * w for v, w in got))
    tensor = [total(m) for m in tensor_ops if m in metrics]
    tensor = [v for v in tensor if v is not None]
    if tensor:
        flops["tensor"] = float(sum(tensor))
    dur = total(DURATION)
    occ = None
    occs = [(r.values.get(OCCUPANCY), r.values.get(DURATION)) for r in rows]
    if all(o is not None for o, _ in occs):
        weights = [d if d else 1.0 for _, d in occs]
        occ = sum(o * w for (o, _), w in zip(occs, weights, strict=True)) / sum(weights) / 100
    return LaunchCounters(
        kernel="+".join(r.kernel for r in rows), dram_read=total(DRAM_READ),
        dram_write=total(DRAM_WRITE), l2_bytes=total(L2_BYTES), flops=flops,
        duration_s=dur, achieved_occupancy=occ, kernels=len(rows),
        metrics={m: total(m) for m in metrics})


def assign(rows: list[KernelRow], n_launches: int, expected: list[str] | None = None,
           tensor_ops: Iterable[str] = ()) -> list[LaunchCounters]:
    """Profiled kernels -> one LaunchCounters per launch of the pipeline, in order.

    One kernel per launch maps in order (names checked when ``expected`` gives them); a
    single-launch case (a library call) takes every kernel it ran, summed."""
    if not rows:
        raise NcuCaseError("ncu profiled no kernel (check the kernel-name filter)")
    if len(rows) == n_launches:
        if expected is not None:
            got = [r.kernel for r in rows]
            if got != expected:
                raise NcuCaseError(f"ncu profiled kernels {got}, expected {expected}")
        return [counters_from_rows([r], tensor_ops) for r in rows]
    if n_launches == 1:
        return [counters_from_rows(rows, tensor_ops)]
    raise NcuCaseError(f"ncu profiled {len(rows)} kernels for a pipeline of {n_launches} "
                       "launches; cannot tell which is which")


# -- the tool -------------------------------------------------------------------------------

def find_ncu(explicit: str | None = None) -> str:
    """The ncu executable: ``explicit``, $ROOFBENCH_NCU, PATH, then /usr/local/cuda/bin."""
    cand = explicit or os.environ.get(NCU_ENV)
    if cand:
        if Path(cand).is_file() and os.access(cand, os.X_OK):
            return cand
        raise NcuUnavailable(f"ncu not found at {cand} ({NCU_ENV}): point {NCU_ENV} at the "
                             "Nsight Compute CLI executable")
    found = shutil.which("ncu")
    if found:
        return found
    for p in FALLBACK_PATHS:
        if os.access(p, os.X_OK):
            return p
    raise NcuUnavailable("ncu (Nsight Compute CLI) not found: install Nsight Compute (it ships "
                         "with the CUDA toolkit) and put ncu on PATH, or set "
                         f"{NCU_ENV}=/path/to/ncu")


def _run(cmd: list[str], timeout: float, **kw: Any) -> subprocess.CompletedProcess[str]:
    try:
        return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, **kw)
    except subprocess.TimeoutExpired:
        raise NcuCaseError(f"{Path(cmd[0]).name} {cmd[1]} timed out after {timeout:.0f} s") \
            from None
    except OSError as e:
        raise NcuUnavailable(f"cannot run {cmd[0]} ({e.strerror})") from None


def ncu_version(path: str) -> str:
    """'2025.3.1.0' from ``ncu --version``."""
    p = _run([path, "--version"], 60)
    m = re.search(r"Version\s+(\d+\.\d+(?:\.\d+)*)", p.stdout + p.stderr)
    if p.returncode != 0 or not m:
        raise NcuUnavailable(f"{path} --version did not give a version: is it Nsight Compute?")
    return m.group(1)


def check_version(version: str) -> None:
    have = tuple(int(x) for x in version.split(".")[:2])
    if have < MIN_VERSION:
        raise NcuUnavailable(
            f"ncu {version} is too old (needs Nsight Compute {MIN_VERSION[0]}.{MIN_VERSION[1]} "
            "or newer): install a current Nsight Compute and put its ncu first on PATH")


_METRIC_NAME = re.compile(r"^([a-z][a-z0-9]*__[a-z0-9_]+)\b")


def parse_query(text: str) -> set[str]:
    """Base metric names listed by ``ncu --query-metrics`` (first column of its table)."""
    names = set()
    for ln in text.splitlines():
        m = _METRIC_NAME.match(ln.strip().strip('"'))
        if m:
            names.add(m.group(1))
    return names


def permission_error(text: str) -> bool:
    return "ERR_NVGPUCTRPERM" in text


PERMISSION_FIX = ("ncu may not read the GPU performance counters (ERR_NVGPUCTRPERM): run as "
                  "root, or allow all users with the nvidia module option "
                  "NVreg_RestrictProfilingToAdminUsers=0 and reload the driver (see "
                  "developer.nvidia.com/ERR_NVGPUCTRPERM)")


def choose_metrics(available: set[str]) -> tuple[list[str], list[str], dict[str, list[str]]]:
    """(metrics to collect, wanted ones this device lacks, tensor-op metrics per input type).
    Only what the device lists is collected; a check whose metrics are missing is skipped
    (``check_skips``), never computed from the rest. NcuUnavailable when no check can run."""
    if not any(base_name(m) in available for need in CHECK_METRICS.values() for m in need):
        raise NcuUnavailable("this device's ncu lists none of the metrics the checks need "
                             f"({', '.join(base_name(m) for m in (DRAM_READ, DRAM_WRITE))}, "
                             "the FLOP instruction counts)")
    metrics: list[str] = []
    missing: list[str] = []
    for m in (*WANTED, DRAM_READ, DRAM_WRITE, *SIMT_FLOPS):
        (metrics if base_name(m) in available else missing).append(m)
    metrics += [m for m in OPTIONAL_FP32 if base_name(m) in available]
    tensor: dict[str, list[str]] = {}
    for dtype, choices in TENSOR_OPS.items():
        pick = next((c for c in choices if all(n in available for n in c)), ())
        tensor[dtype] = [f"{n}.sum" for n in pick]
        if not pick:
            missing.append(f"{choices[0][0]}.sum")
    metrics += sorted({m for ms in tensor.values() for m in ms})
    return metrics, missing, tensor


def check_skips(settings: NcuSettings, c: CaseResult) -> dict[str, str]:
    """Checks of case ``c`` that cannot run with the metrics collected: check -> the metrics
    this device does not list."""
    have = set(settings.metrics)
    out: dict[str, str] = {}
    for check, need in CHECK_METRICS.items():
        absent = [m for m in need if m not in have]
        if check == "FLOPs" and c.unit == "tensor" and not settings.tensor_ops.get(c.dtype):
            absent.append(TENSOR_OPS.get(c.dtype, ((f"{_T}{c.dtype}",),))[0][0] + ".sum")
        if absent:
            out[check] = ", ".join(absent)
    return out


def settings_for(path: str) -> NcuSettings:
    """Version check and the metric list checked against this device's ``--query-metrics``."""
    version = ncu_version(path)
    check_version(version)
    p = _run([path, "--query-metrics"], 120)
    text = p.stdout + p.stderr
    if permission_error(text):
        raise NcuUnavailable(PERMISSION_FIX)
    available = parse_query(p.stdout)
    if p.returncode != 0 or not available:
        raise NcuUnavailable(f"ncu --query-metrics failed: {_last_error(text)}")
    metrics, missing, tensor = choose_metrics(available)
    return NcuSettings(path=path, version=version, metrics=metrics, missing=missing,
                       tensor_ops=tensor)


def _last_error(text: str) -> str:
    errs = [ln.strip() for ln in text.splitlines() if "==ERROR==" in ln]
    lines = errs or [ln.strip() for ln in text.splitlines() if ln.strip()]
    return lines[-1][:300] if lines else "no output"


# -- one case -------------------------------------------------------------------------------

def _package_parent() -> Path:
    """The folder from which ``python -m roofbench...`` finds this package (a checkout root or
    site-packages)."""
    import roofbench

    return Path(roofbench.__file__).resolve().parent.parent


def case_command(c: CaseResult, seed: int | None) -> list[str]:
    cmd = [sys.executable, "-m", "roofbench.bench.measure.ncu_case", "--backend", c.backend,
           "--kernel", c.workload, "--variant", c.variant, "--dtype", c.dtype,
           "--size", "x".join(map(str, c.size))]
    if seed is not None:
        cmd += ["--seed", str(seed)]
    if _backend_says(c.backend, "range"):
        cmd.append("--profiler-range")
    return cmd


def _functions(c: CaseResult) -> list[str] | None:
    """The function of each launch, when every launch is one kernel of ours (no library call,
    which may launch several)."""
    names = [la.facts.function if la.facts else None for la in c.launches]
    return [n for n in names if n] if names and all(names) else None


def kernel_functions(c: CaseResult) -> list[str] | None:
    """The CUDA C names of the case's launches, when every launch is one such kernel."""
    return _functions(c) if _backend_says(c.backend, "names") else None


def _backend_says(name: str, what: str) -> bool:
    """What a backend says of itself: its kernels carry their exact names ("names"), it
    brackets a pipeline with a profiler range ("range")."""
    from ..backends.base import BackendUnavailable, backend_class

    try:
        cls = backend_class(name)
    except (KeyError, BackendUnavailable):
        return False
    return cls.exact_kernel_names if what == "names" else cls.has_profiler_range()


def ncu_command(settings: NcuSettings, c: CaseResult, log: Path,
                seed: int | None) -> list[str]:
    cmd = [settings.path, "--csv", "--page", "raw", "--print-units", "base",
           "--log-file", str(log), "--metrics", ",".join(settings.metrics),
           "--clock-control", settings.clock_control, "--cache-control", settings.cache_control]
    if _backend_says(c.backend, "range"):
        cmd += ["--profile-from-start", "off"]
    names = kernel_functions(c)
    if names is not None:
        alt = "|".join(re.escape(n) for n in dict.fromkeys(names))
        cmd += ["--kernel-name", f"regex:^({alt})$", "--launch-count", str(len(names))]
    elif _functions(c) is not None:
        cmd += ["--launch-count", str(len(c.launches))]
    return cmd + case_command(c, seed)


def profile_case(settings: NcuSettings, c: CaseResult, seed: int | None = None,
                 timeout: float = TIMEOUT_S) -> list[LaunchCounters]:
    """Run ``c``'s launches once under ncu; one LaunchCounters per launch, in order."""
    with tempfile.TemporaryDirectory(prefix="roofbench-ncu-") as tmp:
        log = Path(tmp) / "ncu.csv"
        p = _run(ncu_command(settings, c, log, seed), timeout, cwd=_package_parent())
        text = log.read_text() if log.exists() else ""
    everything = text + "\n" + p.stdout + "\n" + p.stderr
    if permission_error(everything):
        raise NcuUnavailable(PERMISSION_FIX)
    if p.returncode != 0:
        raise NcuCaseError(f"exit {p.returncode}: {_last_error(everything)}")
    try:
        rows = parse_csv(text)
    except ValueError as e:
        raise NcuCaseError(f"unreadable ncu output: {e}") from None
    tensor = settings.tensor_ops.get(c.dtype, []) if c.unit == "tensor" else []
    counters = assign(rows, len(c.launches), kernel_functions(c), tensor)
    skips = check_skips(settings, c)
    for lc in counters:  # a check without its metrics is left unmeasured, never partial
        if "FLOPs" in skips:
            lc.flops = {}
        if "DRAM read" in skips:
            lc.dram_read = None
        if "DRAM write" in skips:
            lc.dram_write = None
    return counters


def collect(cases: Iterable[CaseResult], *, seed: int | None = None,
            ncu_path: str | None = None, timeout: float = TIMEOUT_S,
            progress: Callable[[str], None] | None = None) -> list[str]:
    """The ``--ncu`` hook: counters for every valid case, attached to its launches
    (``LaunchResult.counters``) and the settings to ``CaseResult.ncu``. Returns one-line notes
    for the run (why nothing or something was not collected)."""
    todo = [c for c in cases if c.status == "ok"]
    if not todo:
        return []
    try:
        settings = settings_for(find_ncu(ncu_path))
    except (NcuUnavailable, NcuCaseError) as e:
        return [f"ncu: {e}; timings and model numbers are kept"]
    notes = []
    if settings.missing:
        notes.append(f"ncu {settings.version}: not on this device, not collected: "
                     f"{', '.join(settings.missing)}")
    said: set[tuple[str, str]] = set()
    for c in todo:
        for check, absent in check_skips(settings, c).items():
            if (check, absent) not in said:
                said.add((check, absent))
                notes.append(f"ncu {settings.version}: {check} not checked for {c.key} and "
                             f"cases like it: this device does not list {absent}")
        if progress is not None:
            progress(f"ncu {c.key}")
        try:
            counters = profile_case(settings, c, seed, timeout)
        except NcuUnavailable as e:
            notes.append(f"ncu: {e}; timings and model numbers are kept")
            break
        except NcuCaseError as e:
            notes.append(f"ncu {c.key}: {e}")
            continue
        for la, lc in zip(c.launches, counters, strict=True):
            la.counters = lc
        c.ncu = settings
    return notes
