"""``roofbench.trace(path, ...)`` and `roofbench trace`: PyTorch profiler traces (and JAX's
``.xplane.pb``, ``xplane.py``) read, counted, timed and placed on roofs (docs/trace.md).
Several paths, or a folder of traces, are the ranks (hosts) of one job."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from roofbench.bench.errors import UserError
from roofbench.bench.trace.reader import TraceError, read_trace
from roofbench.bench.trace.xplane import is_xplane

from roofbench.roof_records import RoofSet

if TYPE_CHECKING:
    from roofbench.bench.trace.placed import TraceProfile

SUFFIXES = (".json", ".json.gz", ".gz", ".xplane.pb")


def _in_folder(p: Path) -> list[Path]:
    """A folder's traces; a ``jax.profiler.trace`` log folder's newest session
    (``plugins/profile/<stamp>/*.xplane.pb``, one file per host)."""
    got = sorted(f for f in p.iterdir() if f.is_file() and f.name.endswith(SUFFIXES))
    if got:
        return got
    sessions = sorted(d for d in (p / "plugins" / "profile").glob("*") if d.is_dir())
    return sorted(sessions[-1].glob("*.xplane.pb")) if sessions else []


def trace_files(paths: list[str | Path]) -> list[Path]:
    """The trace files named: a folder stands for its ``*.json``/``*.json.gz``/
    ``*.xplane.pb`` files (``_in_folder``)."""
    out: list[Path] = []
    for p in map(Path, paths):
        if p.is_dir():
            got = _in_folder(p)
            if not got:
                raise TraceError(f"{p}: a folder with no .json, .json.gz or .xplane.pb trace")
            out += got
        elif not p.exists():
            raise TraceError(f"{p}: no such trace file")
        else:
            out.append(p)
    if not out:
        raise TraceError("no trace given")
    return out


def trace(*paths: str | Path, roofs: RoofSet | str | Path | None = None,
          device: str | None = None, out: str | Path | None = None,
          name: str | None = None) -> TraceProfile:  # noqa: F821 (imported below)
    """Read the traces at ``paths`` (one per rank), count every op by ``profile``'s rules
    from its recorded inputs, time it from the trace, place it on ``roofs`` (else the
    device's calibration cache, else its datasheet; docs/trace.md); ``out`` writes
    results.json, trace.md, roofline.png/.svg and trace.html there (a folder holding a run
    is never written over: its first free sibling is)."""
    from roofbench.bench.trace.analyse import analyse
    from roofbench.bench.trace.placed import place
    from roofbench.bench.trace.roofs import trace_roofs

    files = trace_files(list(paths))
    if out is not None:
        from roofbench.bench.results import check_out_folder

        check_out_folder(Path(out))
    jax = [is_xplane(f) for f in files]
    if any(jax) and not all(jax):
        raise TraceError("a JAX trace (.xplane.pb) and a PyTorch trace given together: "
                         "place them one at a time")
    if all(jax):
        from roofbench.bench.trace.xplane import analyse_xla, read_xplane

        xla = [read_xplane(f) for f in files]
        a = analyse_xla(xla)
        host: object = xla[0].host
    else:
        traces = [read_trace(f) for f in files]
        if not any(t.ops or t.work for t in traces):
            raise TraceError(f"{files[0]}: a trace with no ops and no device work (was the "
                             "profiler's schedule active? nothing was recorded)")
        a = analyse(traces)
        host = traces[0].head.get("host_name")
    rs, where, dev = trace_roofs(a.gpu, a.device, host if isinstance(host, str) else None,
                                 roofs, device)
    label = name or files[0].name.removesuffix(".gz").removesuffix(".json").removesuffix(
        ".xplane.pb")
    tp = place(a, rs, where, dev or ("cpu" if not a.gpu else "gpu"), label)
    if out is not None:
        tp.write(out)
    return tp


__all__ = ["trace", "trace_files", "UserError"]
