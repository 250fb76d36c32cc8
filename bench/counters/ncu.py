"""Nsight Compute counters beside the model: ``roofbench run --ncu``.

After the cases are validated and timed, each valid case runs once more, alone, in a child
process (``python -m roofbench.bench.suite.ncu_child``) under ``ncu``, which reads per launch: DRAM
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
ncu): the case keeps its timing and model numbers and the run goes on. This module drives the
tool; reading its CSV is ncu_csv.py, the checks roofbench/ncu_checks.py, the report's section
present/ncu_section.py.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from roofbench.bench.counters.ncu_csv import (
    CHECK_METRICS,
    DRAM_READ,
    DRAM_WRITE,
    OPTIONAL_FP32,
    SIMT_FLOPS,
    TENSOR_OPS,
    TENSOR_SRC,
    WANTED,
    NcuCaseError,
    assign,
    base_name,
    parse_csv,
)

from roofbench.paths import child_env
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

class NcuUnavailable(RuntimeError):
    """ncu cannot collect anything on this machine: one line, the reason and the fix."""



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
        if (
            check == "FLOPs"
            and c.identity.cores == "tensor"
            and not settings.tensor_ops.get(c.identity.dtype)
        ):
            absent.append(
                TENSOR_OPS.get(c.identity.dtype, ((f"{TENSOR_SRC}{c.identity.dtype}",),))[0][0]
                + ".sum"
            )
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

def case_command(c: CaseResult, seed: int | None) -> list[str]:
    cmd = [
        sys.executable,
        "-m",
        "roofbench.bench.suite.ncu_child",
        "--backend",
        c.identity.backend,
        "--workload",
        c.identity.workload,
        "--variant",
        c.identity.variant,
        "--dtype",
        c.identity.dtype,
        "--size",
        "x".join(map(str, c.identity.size)),
    ]
    if seed is not None:
        cmd += ["--seed", str(seed)]
    if (
        c.identity.occupancy_level is not None
    ):  # an occupancy scan's level, profiled as it was timed
        lv = c.identity.occupancy_level
        cmd += ["--occupancy-level", f"{lv.axis}:{lv.value}:{lv.of}"]
    if _backend_says(c.identity.backend, "range"):
        cmd.append("--profiler-range")
    return cmd


def _functions(c: CaseResult) -> list[str] | None:
    """The function of each launch, when every launch is one kernel of ours (no library call,
    which may launch several)."""
    names = [la.facts.function if la.facts else None for la in c.measurement.launches]
    return [n for n in names if n] if names and all(names) else None


def kernel_functions(c: CaseResult) -> list[str] | None:
    """The CUDA C names of the case's launches, when every launch is one such kernel."""
    return _functions(c) if _backend_says(c.identity.backend, "names") else None


def _backend_says(name: str, what: str) -> bool:
    """What a backend says of itself: its kernels carry their exact names ("names"), it
    brackets a pipeline with a profiler range ("range")."""
    from roofbench.bench.backends.base import BackendUnavailable, backend_class

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
    if _backend_says(c.identity.backend, "range"):
        cmd += ["--profile-from-start", "off"]
    names = kernel_functions(c)
    if names is not None:
        alt = "|".join(re.escape(n) for n in dict.fromkeys(names))
        cmd += ["--kernel-name", f"regex:^({alt})$", "--launch-count", str(len(names))]
    elif _functions(c) is not None:
        cmd += ["--launch-count", str(len(c.measurement.launches))]
    return cmd + case_command(c, seed)


def profile_case(settings: NcuSettings, c: CaseResult, seed: int | None = None,
                 timeout: float = TIMEOUT_S) -> list[LaunchCounters]:
    """Run ``c``'s launches once under ncu; one LaunchCounters per launch, in order."""
    with tempfile.TemporaryDirectory(prefix="roofbench-ncu-") as tmp:
        log = Path(tmp) / "ncu.csv"
        p = _run(ncu_command(settings, c, log, seed), timeout, env=child_env())
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
    tensor = settings.tensor_ops.get(c.identity.dtype, []) if c.identity.cores == "tensor" else []
    counters = assign(rows, len(c.measurement.launches), kernel_functions(c), tensor)
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
    todo = [c for c in cases if c.outcome.status == "ok"]
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
        for la, lc in zip(c.measurement.launches, counters, strict=True):
            la.counters = lc
        c.evidence.ncu = settings
    return notes
