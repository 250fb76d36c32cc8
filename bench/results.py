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
import stat
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from datetime import datetime, timezone
from importlib import metadata
from pathlib import Path
from typing import TYPE_CHECKING, Any

from roofbench.boundary import EXIT_OS
from roofbench.errors_text import first_line
from roofbench.fileio import atomic_write_text, is_results_file
from roofbench.pytest_benchmark import is_pytest_benchmark, read_pytest_benchmark
from roofbench.readers import BufferModel, SchemaError, read_run
from roofbench.records import BufferFacts, CaseResult, RunResult
from roofbench.roof_records import RoofSet
from roofbench.roofline import device_slug

from .errors import UserError

if TYPE_CHECKING:  # pandas (~1 s to import) only where a table is built: not for --help
    import pandas as pd

CODE_DIR = Path(__file__).resolve().parent  # read only: the commit of the code that ran


def utc_stamp() -> str:
    return datetime.now(timezone.utc).strftime("%Y%m%dT%H%M%SZ")


def process_command() -> list[str]:
    """This process's command line: `pytest ...` for `python -m pytest ...` too."""
    prog = Path(sys.argv[0]) if sys.argv and sys.argv[0] else Path("python")
    name = prog.parent.name if prog.name == "__main__.py" else prog.name
    return [name, *sys.argv[1:]]


def git_commit(where: Path = CODE_DIR) -> str | None:
    """The commit checked out at ``where`` (+dirty with uncommitted changes), or None."""
    try:
        out = subprocess.run(["git", "rev-parse", "HEAD"], cwd=where, capture_output=True,
                             text=True, timeout=5)
        if out.returncode != 0:
            return None
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"],
                               cwd=where, capture_output=True, text=True, timeout=5).stdout
    except (OSError, subprocess.SubprocessError):
        return None
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
        raise UserError(f"output folder {path} is not writable (Permission denied)",
                        code=EXIT_OS)
    try:
        path.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile(dir=path, prefix=".write-test."):
            pass
    except OSError as e:
        raise UserError(f"output folder {path} is not writable ({e.strerror})",
                        code=EXIT_OS) from None


def check_out_folder(path: Path) -> None:
    """An output folder that cannot be one, refused before any work, creating nothing: a
    file, under a file, or in a folder this user cannot write."""
    if path.exists() and not path.is_dir():
        raise UserError(f"output path {path} is a file, not a folder")
    p = path
    while not p.exists() and p != p.parent:
        p = p.parent
    if not p.is_dir():
        raise UserError(f"output path {path} is under a file ({p}), not a folder")
    if not os.access(p, os.W_OK | os.X_OK):
        raise UserError(f"output folder {p} is not writable (Permission denied)",
                        code=EXIT_OS)


# -- save / load ----------------------------------------------------------------------------

def make_run_dir(results_root: Path, device: str, stamp: str | None = None) -> Path:
    """A new, empty run folder ``<root>/<device-slug>/<UTC stamp>``, created here and now.

    Created with an exclusive ``mkdir``: two runs started in the same second (on one machine,
    or fleet ranks on a shared file system) never share one; the second gets ``<stamp>-2``,
    the next ``-3``, and so on. The path returned is the folder this run owns."""
    parent = results_root / device_slug(device)
    base = stamp or utc_stamp()
    try:
        parent.mkdir(parents=True, exist_ok=True)
    except FileExistsError:
        raise UserError(f"output path {parent} is a file, not a folder") from None
    for i in range(1, 10_000):
        d = parent / (base if i == 1 else f"{base}-{i}")
        try:
            d.mkdir()
        except FileExistsError:
            continue
        return d
    raise UserError(f"{parent} already holds 10000 runs stamped {base}")


# What a session writes into its folder: a folder holding any of these holds a run (or a
# user's file of that name), and a new session never writes over it.
SESSION_FILES = ("results.json", "results.csv", "report.md", "report.html", "roofline.png",
                 "roofline.svg", "occupancy.png", "occupancy.svg", "profile.md")
# An A/B job's folder (bench/gate/ab_session.py): its two runs and their comparison.
AB_FILES = (*SESSION_FILES, "a", "b", "compare")


# Made with O_EXCL in a folder a run is to write: the process that made it owns the folder,
# so two runs started at once into one folder never share it (the second takes a sibling).
CLAIM_FILE = ".roofbench-run"


def _take(d: Path, holds: Sequence[str]) -> bool:
    """Own ``d`` (an existing folder) when it holds none of ``holds`` and no claim."""
    if any((d / name).exists() for name in holds):
        return False
    try:
        fd = os.open(d / CLAIM_FILE, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)
    except FileExistsError:
        return False
    with os.fdopen(fd, "w") as f:
        f.write(f"{os.getpid()} {utc_stamp()}\n")
    return True


def claim_folder(out: Path, holds: Sequence[str] = SESSION_FILES) -> Path:
    """The folder a run (the measure API, the pytest plugin, a profile, an A/B job) writes:
    ``out`` itself when it holds none of ``holds`` (``SESSION_FILES``) and no other run
    claimed it (``CLAIM_FILE``, made exclusively), else the first free sibling ``out-2``,
    ``out-3``, ... claimed the same way: no run or input file is ever written over, and of
    two runs into one folder at once each keeps its own."""
    check_writable(out.parent if not out.exists() else out)
    try:
        out.mkdir(parents=True, exist_ok=True)
    except FileExistsError:
        raise UserError(f"output path {out} is a file, not a folder") from None
    if not out.is_dir():
        raise UserError(f"output path {out} is a file, not a folder")
    if _take(out, holds):
        return out
    for i in range(2, 10_000):
        d = out.with_name(f"{out.name}-{i}")
        try:
            d.mkdir()
        except FileExistsError:
            if not d.is_dir():
                continue
        if _take(d, holds):
            return d
    raise UserError(f"{out} and 10000 siblings already hold runs")


def cases_frame(run: RunResult) -> pd.DataFrame:
    import pandas as pd

    rows = []
    for c in run.cases:
        t = c.measurement.timing
        rows.append(
            {
                "workload": c.identity.workload,
                "variant": c.identity.variant,
                "backend": c.identity.backend,
                "dtype": c.identity.dtype,
                "size": "x".join(map(str, c.identity.size)),
                "precision": c.identity.precision,
                "cores": c.identity.cores,
                "status": c.outcome.status,
                "valid": c.valid,
                "checked": c.outcome.checked,
                "flops": c.declaration.flops,
                "bytes_dram": c.declaration.bytes.get("dram"),
                "ai_dram": c.declaration.ai.get("dram"),
                "launches": len(c.measurement.launches),
                "median_s": c.measurement.median_s,
                "p25_s": t.quantile(0.25) if t else None,
                "p75_s": t.quantile(0.75) if t else None,
                "cv": t.cv if t else None,
                "samples": t.n if t else None,
                "flop_per_s": c.roofline.flop_per_s,
                "bytes_per_s_dram": c.roofline.bytes_per_s.get("dram"),
                "attainable": c.roofline.attainable,
                "efficiency": c.roofline.efficiency,
                "bound": c.roofline.bound,
                "limiting_roof": c.roofline.limiting_roof,
                "rel_error": c.outcome.rel_error,
                "tolerance": c.declaration.tolerance,
                "flags": ";".join(t.flags if t else []),
                "error": c.outcome.error,
            }
        )
    return pd.DataFrame(rows)


def save_run(run: RunResult, out: Path) -> Path:
    """Write results.json and results.csv into ``out`` atomically; returns the json path."""
    check_writable(out)
    path = out / "results.json"
    atomic_write_text(path, json.dumps(run.to_dict(), indent=1, allow_nan=True) + "\n",
                      replace_results=True)
    atomic_write_text(out / "results.csv", cases_frame(run).to_csv(index=False))
    with contextlib.suppress(OSError):  # results.json holds the folder now: the claim goes
        (out / CLAIM_FILE).unlink()
    return path


def resolve_run(path: str | Path) -> Path:
    """A run folder or its results.json (or a pytest-benchmark JSON file) -> the file (a
    regular file)."""
    p = Path(path)
    if not str(path).strip():
        raise UserError("no results given (an empty path)")
    try:
        if p.is_dir():
            p = p / "results.json"
        st = p.stat()
    except FileNotFoundError:
        raise UserError(f"no results at {path} (expected a run folder or its results.json)") \
            from None
    except OSError as e:  # a folder without search permission, a loop of links
        raise UserError(f"cannot read {p}: {e.strerror or e}") from None
    if not stat.S_ISREG(st.st_mode):
        raise UserError(f"{p} is not a regular file (a results.json is)")
    if st.st_size > MAX_RESULTS_BYTES:
        raise UserError(f"{p} is {st.st_size >> 20} MiB, more than a results file can be "
                        f"({MAX_RESULTS_BYTES >> 20} MiB)")
    return p


# 20,000 cases are ~50 MB; ten times that is no results file roofbench wrote.
MAX_RESULTS_BYTES = 512 << 20


def load_run(path: str | Path) -> RunResult:
    p = resolve_run(path)
    try:
        d = json.loads(p.read_bytes())
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as e:
        raise UserError(f"{p}: not a readable results file ({first_line(e)})") from None
    except RecursionError:
        raise UserError(f"{p}: not a readable results file (nested too deeply)") from None
    try:
        if is_pytest_benchmark(d):  # a `pytest --benchmark-json` file: its counted entries
            return read_pytest_benchmark(d, stored_roofs)
        return read_run(d, declared_buffers)  # every version, migrated (roofbench/readers.py)
    except SchemaError as e:
        raise UserError(f"{p}: {e}") from None
    except (KeyError, TypeError, ValueError, AttributeError) as e:
        raise UserError(f"{p}: malformed results file ({type(e).__name__}: {e})") from None
    except RecursionError:
        raise UserError(f"{p}: malformed results file (nested too deeply)") from None


def stored_roofs(device: str) -> RoofSet | None:
    """The calibration cache of ``device`` (roofs/<slug>.json), when there is a usable one."""
    from roofbench.roofs.files import RoofsFileError, default_path, load_roofs

    path = default_path(device)
    try:
        return load_roofs(path, require_schema=True) if path.exists() else None
    except RoofsFileError:
        return None


def declared_buffers(c: CaseResult) -> BufferModel | None:
    """The buffers of a stored case as its workload declares them: what files before results
    version 3 did not store (the reader asks; the shared root never imports the workloads)."""
    from roofbench.kernels.registry import workloads
    from roofbench.kernels.spec import Case

    w = workloads().get(c.identity.workload)
    v = w.variants.get(c.identity.variant) if w is not None else None
    if w is None or v is None:
        return None
    case = Case(w, v, c.identity.dtype, tuple(c.identity.size))
    try:
        bufs, launches = case.buffers(), case.launches()
    except Exception:  # a size or dtype the declaration of today does not take
        return None
    stored = c.declaration.bytes.get("dram")
    # Today's launches only where they count the record's bytes: rownorm fused read x twice
    # until 2026-12-04. Its buffers are its size's either way.
    same = stored is None or stored == case.bytes().get("dram")
    return BufferModel({n: BufferFacts(b.role, b.nbytes) for n, b in bufs.items()},
                       [(list(la.reads), list(la.writes)) for la in launches] if same
                       else None)


def load_for_output(run_arg: str, out: str | None, default_name: str,
                    suffixes: tuple[str, ...] = ("",)) -> tuple[RunResult, Path]:
    """A stored run, and where to write what is rebuilt from it (``out``, else ``default_name``
    beside its results.json); the folder is checked writable, and no file written (``path``
    with each of ``suffixes``) may replace an input (``check_output_paths``), before any work
    is done."""
    run = load_run(run_arg)
    src = resolve_run(run_arg)
    if out is not None and not out.strip():
        raise UserError("--out is empty: give a path, or leave --out out for the default")
    path = Path(out) if out else src.parent / default_name
    check_output_paths([path.with_suffix(sx) if sx else path for sx in suffixes], inputs=[src])
    check_writable(path.parent)
    return run, path


# The files a run folder holds that only `roofbench run` writes: no other output replaces them.
RUN_OWN_FILES = ("results.json", "results.csv")


def check_output_paths(paths: Sequence[Path], inputs: Sequence[Path] = ()) -> None:
    """Refuse (one line, exit 2) an output path that would replace an input of the command,
    a run's own files (results.json, results.csv beside a results.json), a roofbench results
    file of any name, or that is a folder."""
    ins = {_same(p) for p in inputs}
    for p in paths:
        if p.is_dir():
            raise UserError(f"output path {p} is a folder: give a file name")
        if _same(p) in ins:
            raise UserError(f"output path {p} is an input of this command: it would be replaced")
        if p.name in RUN_OWN_FILES and (p.parent / "results.json").exists():
            raise UserError(f"output path {p} is a run's own file: write elsewhere")
        if p.is_file() and is_results_file(p):
            raise UserError(f"output path {p} is a roofbench results file: write elsewhere")


def _same(p: Path) -> Path:
    try:
        return p.resolve()
    except (OSError, RuntimeError):
        return p.absolute()
