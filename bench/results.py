"""A run's results on disk: results/<device-slug>/<UTC timestamp>/results.json (+ csv).

results.json is the single source of truth: reports and plots are pure functions of it. Every
file is written atomically (temp file in the same folder, then rename), so an interrupted run
leaves no half-written file.
"""

from __future__ import annotations

import contextlib
import json
import os
import platform
import socket
import subprocess
import sys
import tempfile
from dataclasses import dataclass, field
from datetime import datetime, timezone
from importlib import metadata
from pathlib import Path
from typing import Any

import pandas as pd
from roofbench.roofs.model import RoofSet, device_slug

from roofbench import __version__
from roofbench.errors_text import first_line
from roofbench.fileio import atomic_write_bytes, atomic_write_text  # noqa: F401 (re-export)

from .errors import UserError
from .measure.runner import CaseResult

SCHEMA = "roofbench.results"
# 1: first release. 2: cases carry ``phases``, runs ``interrupted``, the roof set its typed
# fields (roofs/model.py); version 1 files are read and migrated.
SCHEMA_VERSION = 2
READS_VERSIONS = (1, 2)
REPO_ROOT = Path(__file__).resolve().parent.parent


@dataclass
class RunResult:
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
            "schema": SCHEMA, "schema_version": SCHEMA_VERSION,
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
        return cls(backend=d["backend"], device=d["device"],
                   roofs=RoofSet.from_dict(d["roofs"]) if d.get("roofs") else None,
                   cases=[CaseResult.from_dict(c) for c in d["cases"]],
                   environment=d.get("environment") or {}, command=d.get("command") or [],
                   created=d.get("created", ""), git_commit=d.get("git_commit"),
                   timer=d.get("timer") or {}, notes=d.get("notes") or [],
                   interrupted=bool(d.get("interrupted", False)))


def utc_stamp() -> str:
    return datetime.now(timezone.utc).strftime("%Y%m%dT%H%M%SZ")


def git_commit() -> str | None:
    try:
        out = subprocess.run(["git", "rev-parse", "HEAD"], cwd=REPO_ROOT, capture_output=True,
                             text=True, timeout=5)
    except (OSError, subprocess.SubprocessError):
        return None
    if out.returncode != 0:
        return None
    dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"],
                           cwd=REPO_ROOT, capture_output=True, text=True, timeout=5).stdout
    return out.stdout.strip() + ("+dirty" if dirty.strip() else "")


def library_versions() -> dict[str, str]:
    out = {"python": platform.python_version()}
    for pkg in ("numpy", "numba", "llvmlite", "pandas", "matplotlib", "ml_dtypes", "cupy",
                "cupy-cuda12x", "cupy-cuda13x", "numba-cuda", "pycuda", "nvidia-ml-py",
                "torch", "mpi4py"):
        with contextlib.suppress(metadata.PackageNotFoundError):
            out[pkg] = metadata.version(pkg)
    return out


def environment(device_info: dict[str, Any]) -> dict[str, Any]:
    return {"host": socket.gethostname(), "platform": platform.platform(),
            "python": sys.version.split()[0], "libraries": library_versions(),
            "device": device_info}


# -- atomic files ---------------------------------------------------------------------------

def check_writable(path: Path) -> None:
    """Fail early, with one line, when an output folder cannot be written."""
    p = path
    while not p.exists() and p != p.parent:
        p = p.parent
    if p.exists() and not p.is_dir():
        raise UserError(f"output path {path} is under a file ({p}), not a folder")
    if not os.access(p, os.W_OK | os.X_OK):
        raise UserError(f"output folder {path} is not writable")
    try:
        path.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile(dir=path, prefix=".write-test."):
            pass
    except OSError as e:
        raise UserError(f"output folder {path} is not writable ({e.strerror})") from None


# -- save / load ----------------------------------------------------------------------------

def run_dir(results_root: Path, device: str, stamp: str | None = None) -> Path:
    return results_root / device_slug(device) / (stamp or utc_stamp())


def cases_frame(run: RunResult) -> pd.DataFrame:
    rows = []
    for c in run.cases:
        t = c.timing or {}
        rows.append({
            "kernel": c.workload, "variant": c.variant, "backend": c.backend, "dtype": c.dtype,
            "size": "x".join(map(str, c.size)), "precision": c.precision, "unit": c.unit,
            "status": c.status, "valid": c.valid, "flops": c.flops,
            "bytes_dram": c.bytes.get("dram"), "ai_dram": c.ai.get("dram"),
            "launches": len(c.launches), "median_s": c.median_s,
            "p25_s": t.get("p25_s"), "p75_s": t.get("p75_s"), "cv": t.get("cv"),
            "samples": t.get("n"), "flop_per_s": c.flop_per_s,
            "bytes_per_s_dram": c.bytes_per_s.get("dram"), "attainable": c.attainable,
            "efficiency": c.efficiency, "bound": c.bound, "limiting_roof": c.limiting_roof,
            "rel_error": c.rel_error, "tolerance": c.tolerance,
            "flags": ";".join(t.get("flags") or []), "error": c.error,
        })
    return pd.DataFrame(rows)


def save_run(run: RunResult, out: Path) -> Path:
    """Write results.json and results.csv into ``out`` atomically; returns the json path."""
    check_writable(out)
    path = out / "results.json"
    atomic_write_text(path, json.dumps(run.to_dict(), indent=1, allow_nan=True) + "\n")
    atomic_write_text(out / "results.csv", cases_frame(run).to_csv(index=False))
    return path


def resolve_run(path: str | Path) -> Path:
    """A run folder or its results.json -> the results.json path."""
    p = Path(path)
    if p.is_dir():
        p = p / "results.json"
    if not p.exists():
        raise UserError(f"no results at {path} (expected a run folder or its results.json)")
    return p


def load_run(path: str | Path) -> RunResult:
    p = resolve_run(path)
    try:
        d = json.loads(p.read_text())
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as e:
        raise UserError(f"{p}: not a readable results file ({first_line(e)})") from None
    if not isinstance(d, dict) or d.get("schema") != SCHEMA:
        raise UserError(f"{p}: not a roofbench results file (schema missing or wrong)")
    if d.get("schema_version") not in READS_VERSIONS:
        raise UserError(f"{p}: results schema version {d.get('schema_version')!r}, this "
                        f"roofbench reads versions {', '.join(map(str, READS_VERSIONS))}")
    try:
        run = RunResult.from_dict(d)
    except (KeyError, TypeError, ValueError) as e:
        raise UserError(f"{p}: malformed results file ({type(e).__name__}: {e})") from None
    if d.get("schema_version") == 1:
        migrate_v1_units(run)
    return run


def migrate_v1_units(run: RunResult) -> None:
    """Version 1 held every case against the roof of its variant's declared unit, so a
    library GEMM on tensor cores (cuBLAS HGEMM) met the FP32 CUDA-core roof. Re-derive the
    unit from the workload declaration and the derived metrics (attainable, efficiency, bound)
    under the stored roofs; measured samples and times are untouched."""
    from roofbench.kernels.registry import workloads
    from roofbench.kernels.spec import Case

    from .measure.runner import apply_roofs

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


def load_roofs(path: str | Path) -> RoofSet:
    p = Path(path)
    try:
        d = json.loads(p.read_text())
        if isinstance(d, dict) and "roofs" in d and isinstance(d["roofs"], dict):
            d = d["roofs"]  # a results.json carries its roofs too
        return RoofSet.from_dict(d)
    except FileNotFoundError:
        raise UserError(f"roofs file {p} does not exist") from None
    except (OSError, UnicodeDecodeError, json.JSONDecodeError, KeyError, TypeError,
            ValueError) as e:
        raise UserError(f"{p}: not a valid roofs file ({first_line(e)})") from None


def save_roofs(roofs: RoofSet, path: Path) -> None:
    check_writable(path.parent)
    atomic_write_text(path, json.dumps(roofs.to_dict(), indent=1) + "\n")
