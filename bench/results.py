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
from datetime import datetime, timezone
from importlib import metadata
from pathlib import Path
from typing import Any

import pandas as pd

from roofbench.errors_text import first_line
from roofbench.fileio import atomic_write_text
from roofbench.readers import BufferModel, SchemaError, read_run
from roofbench.records import BufferFacts, CaseResult, RunResult
from roofbench.roofline import device_slug

from .errors import UserError

CODE_DIR = Path(__file__).resolve().parent  # read only: the commit of the code that ran


def utc_stamp() -> str:
    return datetime.now(timezone.utc).strftime("%Y%m%dT%H%M%SZ")


def git_commit() -> str | None:
    try:
        out = subprocess.run(["git", "rev-parse", "HEAD"], cwd=CODE_DIR, capture_output=True,
                             text=True, timeout=5)
    except (OSError, subprocess.SubprocessError):
        return None
    if out.returncode != 0:
        return None
    dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"],
                           cwd=CODE_DIR, capture_output=True, text=True, timeout=5).stdout
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
        t = c.timing
        rows.append({
            "workload": c.workload, "variant": c.variant, "backend": c.backend, "dtype": c.dtype,
            "size": "x".join(map(str, c.size)), "precision": c.precision, "cores": c.cores,
            "status": c.status, "valid": c.valid, "flops": c.flops,
            "bytes_dram": c.bytes.get("dram"), "ai_dram": c.ai.get("dram"),
            "launches": len(c.launches), "median_s": c.median_s,
            "p25_s": t.quantile(0.25) if t else None, "p75_s": t.quantile(0.75) if t else None,
            "cv": t.cv if t else None, "samples": t.n if t else None,
            "flop_per_s": c.flop_per_s,
            "bytes_per_s_dram": c.bytes_per_s.get("dram"), "attainable": c.attainable,
            "efficiency": c.efficiency, "bound": c.bound, "limiting_roof": c.limiting_roof,
            "rel_error": c.rel_error, "tolerance": c.tolerance,
            "flags": ";".join(t.flags if t else []), "error": c.error,
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
    try:
        return read_run(d, declared_buffers)  # every version, migrated (roofbench/readers.py)
    except SchemaError as e:
        raise UserError(f"{p}: {e}") from None
    except (KeyError, TypeError, ValueError) as e:
        raise UserError(f"{p}: malformed results file ({type(e).__name__}: {e})") from None


def declared_buffers(c: CaseResult) -> BufferModel | None:
    """The buffers of a stored case as its workload declares them: what files before results
    version 3 did not store (the reader asks; the shared root never imports the workloads)."""
    from roofbench.kernels.registry import workloads
    from roofbench.kernels.spec import Case

    w = workloads().get(c.workload)
    v = w.variants.get(c.variant) if w is not None else None
    if w is None or v is None:
        return None
    case = Case(w, v, c.dtype, tuple(c.size))
    try:
        bufs, launches = case.buffers(), case.launches()
    except Exception:  # a size or dtype the declaration of today does not take
        return None
    return BufferModel({n: BufferFacts(b.role, b.nbytes) for n, b in bufs.items()},
                       [(list(la.reads), list(la.writes)) for la in launches])


def load_for_output(run_arg: str, out: str | None, default_name: str) -> tuple[RunResult, Path]:
    """A stored run, and where to write what is rebuilt from it (``out``, else ``default_name``
    beside its results.json); the folder is checked writable before any work is done."""
    run = load_run(run_arg)
    path = Path(out) if out else resolve_run(run_arg).parent / default_name
    check_writable(path.parent)
    return run, path
