"""Rank 0's handshake checks: local ranks, matching versions, CPU turns, the output folder."""

from __future__ import annotations

import json
import os
from pathlib import Path

from roofbench.paths import home

from ..errors import UserError
from .environment import gpu_backend, visible_gpus
from .fleet_records import Place
from .output import PROGRESS_FILE, PROGRESS_NOTES, PROGRESS_SCHEMA


def fill_local_ranks(places: dict[int, Place]) -> None:
    """Set each place's local rank and local size: launcher variables first; otherwise the
    order of ranks on each host."""
    by_host: dict[str, list[int]] = {}
    for r in sorted(places):
        by_host.setdefault(places[r].host, []).append(r)
    for ranks in by_host.values():
        for i, r in enumerate(ranks):
            p = places[r]
            p.local_size = len(ranks)
            if p.local_rank is None:
                p.local_rank, p.local_rank_source = i, "order of ranks on the host"


def version_problem(places: dict[int, Place]) -> str | None:
    """The stop message when the ranks run different roofbench versions, else None."""
    versions: dict[str, list[int]] = {}
    for r, p in sorted(places.items()):
        versions.setdefault(p.version, []).append(r)
    if len(versions) <= 1:
        return None
    parts = "; ".join(f"{v} on rank(s) {_ranges(rs)} (host(s) "
                      f"{', '.join(sorted({places[r].host for r in rs}))})"
                      for v, rs in versions.items())
    return (f"roofbench versions differ between ranks: {parts}. Install the same roofbench "
            "on every node and start again")


def _ranges(rs: list[int]) -> str:
    return ", ".join(map(str, rs)) if len(rs) <= 6 else f"{rs[0]}-{rs[-1]} ({len(rs)} ranks)"


def turn_order(places: dict[int, Place], backend: str) -> dict[int, list[int]]:
    """rank -> ranks on the same host that calibrate before it. CPU backends only: GPUs are
    separate devices, but two CPU calibrations on one host would share cores and memory."""
    if gpu_backend(backend) or (backend == "auto" and visible_gpus()):
        return {}
    by_host: dict[str, list[int]] = {}
    for r in sorted(places):
        by_host.setdefault(places[r].host, []).append(r)
    return {r: rs[:i] for rs in by_host.values() for i, r in enumerate(rs)}


def prepare_out(out: str | None) -> Path:
    """The report folder (default results/fleet/<UTC stamp>), made and proven writable."""
    from ..results import make_run_dir

    # The default is a folder of this job's own (exclusive mkdir: two jobs in one second get
    # two folders); a folder given is used as it is.
    d = Path(out) if out else make_run_dir(home() / "results", "fleet")
    try:
        d.mkdir(parents=True, exist_ok=True)
        probe = d / f".write-test-{os.getpid()}"
        probe.write_text("")
        probe.unlink()
    except OSError as e:
        raise UserError(f"cannot write the fleet report to {d}: {e.strerror or e}") from None
    claim(d)
    return d


def claim(d: Path) -> None:
    """Make ``d`` this job's: a folder that holds an earlier job's report is refused (it would
    be replaced), and of two jobs given one folder only the first starts (the progress record
    is created exclusively; the report replaces it at the end)."""
    if (d / "fleet.json").exists():
        raise UserError(f"{d} holds an earlier fleet report (fleet.json): give another --out, "
                        "or move that report away")
    try:
        with open(d / PROGRESS_FILE, "x") as f:
            json.dump({"schema": PROGRESS_SCHEMA, "state": "starting", "why": "",
                       "received": [], "pending": [], "lost": [],
                       "note": PROGRESS_NOTES["starting"], "ranks": []}, f, indent=1)
    except FileExistsError:
        raise UserError(f"{d} holds another fleet job's progress record ({PROGRESS_FILE}): a "
                        "job running there now, or one that ended before its report (what it "
                        "kept is there); give another --out, or move it away") from None
    except OSError as e:
        raise UserError(f"cannot write the fleet report to {d}: {e.strerror or e}") from None
