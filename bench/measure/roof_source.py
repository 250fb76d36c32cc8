"""Roofs for a run: the calibrated file of a device (measured once, reused), or a fresh
measurement — one policy, ``source`` (its table below), for every command and the API.

Entry points, each one call of ``source``: `roofbench run/bench/occupancy` (``obtain_roofs``,
purpose "run"), `roofbench.measure` (``stored_or_quick_roofs``, "cached"), `roofbench calibrate`
(``calibrate``, "calibrate"), `roofbench roofs` ("measure"). Showing them (tables of measured vs
datasheet, the device's roofline) is bench/present/tables.py.
"""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, cast

from roofbench.roofs.files import RoofsFileError, default_path, load_roofs, save_calibrated

from roofbench.boundary import Refusal
from roofbench.errors_text import first_line
from roofbench.roof_context import ProbeEnvironment, RoofContext, cpu_list
from roofbench.roof_records import RoofSet
from roofbench.roofline import device_slug

from ..backends import base as backends
from ..errors import UserError
from .callables import Clock
from .door import MeasureError

Purpose = Literal["run", "cached", "calibrate", "measure"]


@dataclass(frozen=True)
class Sourced:
    """Roofs and where they came from: ``path`` the file read or written (None: measured and
    not saved), ``measured`` whether probes ran now."""

    roofs: RoofSet
    path: Path | None
    measured: bool


def roofs_file(backend: backends.Backend, purpose: Purpose,
               file: str | Path | None = None) -> Path | None:
    """The file ``source`` reads or writes for ``purpose`` without a given roofs file: ``file``
    when named (``--out``, ``cache=``), else the device's calibration cache — except where a
    CPU's roofs are measured every time and kept nowhere ("run", whatever ``file`` says, and
    "measure" without ``--out``). None: not saved."""
    gpu = getattr(backend, "kind", None) == "gpu"
    if purpose == "run" and not gpu:
        return None
    if file is not None:
        return Path(file)
    return None if purpose == "measure" and not gpu else cache_path(backend)


def source(backend: backends.Backend, purpose: Purpose, *, given: str | Path | None = None,
           file: str | Path | None = None, recalibrate: bool = False, quick: bool = False,
           progress: Callable[[str], None] | None = None) -> Sourced:
    """The one policy of where roofs come from.

    - ``given`` (``--roofs``, ``roofs=``): that file as given, on any backend, read by the one
      loader (a calibrated file, a bare roof set, a run's results.json); never measured, never
      written. It may be another device's (the machine a kernel is tuned for, a hand-written
      set): it is used, and the run records "roofs come from X, cases ran on Y" in its notes
      and report. A file that cannot be read is a one-line error naming it.
    - otherwise the file ``roofs_file(backend, purpose, file)`` (by default the device's
      calibration cache, one per user and device): reused when present and of this device
      and machine, else measured (checkpointed into it after every probe) and saved;
      ``recalibrate`` measures it again, and purpose "measure" (`roofbench roofs`) always
      does. A cache that is corrupt or holds another device's roofs (a file copied from
      another machine) is a one-line error with --recalibrate advice: a cache is never
      silently used, nor silently overwritten.
    - a CPU for "run" (and "measure" without ``file``): measured every time, never read from
      nor written to a cache (the load of the machine moves its roofs; a run also tracks
      them between its cases: bench/suite/drift.py). "cached" (`roofbench.measure`) and
      "calibrate" use the CPU's cache, keyed by the machine's fingerprint.
    - a file that cannot be written costs the cache, never the roofs (a note on them says
      why) — unless the user named it: `calibrate --out` and `roofs` (its ``--out``, or a GPU's
      cache) make that a one-line error.
    """
    if given:
        return Sourced(_load(Path(given), require_schema=False), Path(given), False)
    path = roofs_file(backend, purpose, file)
    if path is None:
        return Sourced(backend.measure_roofs(quick=quick, progress=progress), None, True)
    why = None
    if not recalibrate and purpose != "measure":
        rs_cached, why = lookup(backend, path)
        if rs_cached is not None:
            return Sourced(rs_cached, path, False)
    kept = _previous(path)
    probe = _load_probe()
    rs = backend.measure_roofs(quick=quick, progress=progress, checkpoint=_saver(path))
    loaded = record_load(backend, rs, probe)
    named = purpose == "measure" or (purpose == "calibrate" and file is not None)
    if loaded and not named:  # never cached in secret: kept for this process only
        _put_back(path, kept)
        note = (f"calibrated under load ({loaded}): these roofs hold for this process "
                f"only, {path} not written; the next quiet calibration is")
        rs.info["calibrated_file_error"] = f"{path}: measured under load"
        rs.notes.append(note)
        _say(note)
    elif save_cache(backend, rs, path) and named:
        reason = rs.info["calibrated_file_error"].removeprefix(f"{path}: ")
        raise UserError(f"cannot write {path}: {reason}")
    if why:  # this time only: not kept in the file
        rs.notes.append(why)
    return Sourced(rs, path, True)


# Other processes using more than this share of the cores while the probes ran make a
# calibration one taken under load (a 2-core VM with one busy neighbour: 50%): its roofs
# are low by up to that share, and a cache must not keep them for every later run.
UNDER_LOAD = 0.25


def _load_probe() -> Any:
    """What else used the machine while the probes ran (the probes' own processes are this
    one's children: their time is not counted as the others')."""
    from roofbench.roofs.probes.cpu_noise import NoiseProbe

    return NoiseProbe(children=True)


def record_load(backend: backends.Backend, rs: RoofSet, probe: Any) -> str:
    """The load while the roofs were measured, recorded in them (``info["calibration_load"]``:
    load average, cores and the others' busy cores, the hypervisor's steal, each roof's
    spread: 1 - median/best over its probe's samples); the cause when it was taken under
    load (a CPU's, others over ``UNDER_LOAD`` of the cores), else ""."""
    r = probe.report()
    spread = {x.name: round(1.0 - x.median / x.value, 4) for x in rs.roofs
              if x.median is not None and x.value > 0}
    cpu = getattr(backend, "kind", None) == "cpu"
    under = cpu and r.other_busy > UNDER_LOAD
    rs.info["calibration_load"] = {
        "load_avg_1m": r.load_avg_1m, "cores": r.cores,
        "busy_cores_others": round(r.other_busy * r.cores, 3),
        "other_busy": round(r.other_busy, 4), "steal": round(r.steal, 4),
        "under_load": under, "probe_spread": spread}
    if not under:
        return ""
    return (f"other processes kept {r.other_busy * r.cores:.2g} of the {r.cores} cores busy, "
            f"load average {r.load_avg_1m:.1f}")


def loaded_reason(rs: RoofSet) -> str | None:
    """Why a cached roof set taken under load is measured again now: the machine is quiet
    (None: it was quiet when measured, or it is still loaded)."""
    got = rs.info.get("calibration_load")
    if not (isinstance(got, dict) and got.get("under_load")):
        return None
    probe = _load_probe()
    import time

    time.sleep(0.2)  # a short look at the machine now
    r = probe.report()
    if r.other_busy > UNDER_LOAD:
        return None
    return ("it was measured under load; the machine is quiet now "
            f"(others {r.other_busy:.0%} of the cores)")


def _previous(path: Path) -> bytes | None:
    """The cache file's bytes before a calibration checkpoints into it (None: none)."""
    try:
        return path.read_bytes()
    except OSError:
        return None


def _put_back(path: Path, before: bytes | None) -> None:
    """The cache as it was before the checkpoints of a calibration it must not keep."""
    from roofbench.fileio import atomic_write_bytes

    with contextlib.suppress(OSError):
        if before is None:
            path.unlink(missing_ok=True)
        else:
            atomic_write_bytes(path, before)


def obtain_roofs(backend: backends.Backend, *, roofs_file: str | Path | None = None,
                 cache: str | Path | None = None, recalibrate: bool = False,
                 quick: bool = False, progress: Callable[[str], None] | None = None) -> RoofSet:
    """The roofs a run (`roofbench run/bench/occupancy`) is placed under: ``source`` for
    "run" (``roofs_file``: its --roofs; ``cache``: the GPU's cache file, by default
    ``cache_path``)."""
    return source(backend, "run", given=roofs_file, file=cache, recalibrate=recalibrate,
                  quick=quick, progress=progress).roofs


def cache_path(backend: backends.Backend, cache: Path | None = None) -> Path:
    """The calibration cache of ``backend``'s device (``cache`` when given): one per user and
    device (roofs/files.default_path); a CPU's roofs of some cores only (taskset, a cgroup of
    its own, --cores) are another file, named for them (``<slug>@cores-0-3.json``)."""
    if cache is not None:
        return cache
    tag = ""
    if getattr(backend, "kind", None) == "cpu":
        from roofbench.roofs.probes.cpu_env import probe_cores

        cores, how = probe_cores()
        tag = "" if how == "machine" else f"cores-{cpu_list(cores)}"
    return default_path(backend.device_name(), tag=tag)


def cache_key(backend: backends.Backend) -> dict[str, str] | None:
    """What a CPU's cache is keyed by (CPU model, cores, memory, numpy/numba/llvmlite
    versions, the probes' code: ``cpu_env.fingerprint``); None on a GPU (its cache is
    checked by device)."""
    if getattr(backend, "kind", None) != "cpu":  # (a device known by name only: no kind)
        return None
    from roofbench.roofs.probes.cpu_env import current_fingerprint

    return current_fingerprint()


def stale_reason(rs: RoofSet, key: dict[str, str] | None) -> str | None:
    """Why a cached roof set no longer holds for this machine (None: it holds)."""
    if key is None:
        return None
    env = rs.context.environment if rs.context else None
    stored = env.fingerprint if env else {}
    if not stored:
        return "it records no machine fingerprint (written by an older roofbench)"
    changed = [f"{k} {stored.get(k, '-')} -> {v}" for k, v in key.items() if stored.get(k) != v]
    return ("the machine or roofbench's probes changed since it was measured: "
            + "; ".join(changed)) if changed else None


def lookup(backend: backends.Backend, path: Path) -> tuple[RoofSet | None, str | None]:
    """The cached roofs at ``path`` when they hold for this device and machine; else None and
    why (None when there is no file). A corrupt file or another device's is a one-line
    UserError with --recalibrate advice: a cache is never silently used, nor overwritten."""
    try:
        if not path.exists():
            return None, None
    except OSError as e:  # an unreadable cache folder: measured, said once
        return None, f"roofs cache {path} cannot be read ({e.strerror or e})"
    rs = _load(path, require_schema=True)
    if device_slug(rs.device) != device_slug(backend.device_name()):
        raise UserError(f"{path} holds roofs of {rs.device!r}, this device is "
                        f"{backend.device_name()!r}; run `roofbench calibrate "
                        f"--recalibrate` or pass the right roofs file")
    why = stale_reason(rs, cache_key(backend)) or loaded_reason(rs)
    return (None, f"roofs cache {path} measured again: {why}") if why else (rs, None)


def save_cache(backend: backends.Backend, rs: RoofSet, path: Path) -> str | None:
    """Write ``rs`` to the cache at ``path``, keyed by this machine; a folder that cannot be
    written (a read-only home) costs the cache, never the roofs: the reason, in one line, is
    returned and noted on the roof set (None when written)."""
    key = cache_key(backend)
    if key is not None and not (rs.context and rs.context.environment):
        from roofbench.roofs.probes.cpu_env import machine_cores, probe_cores

        cores = probe_cores()[0]
        ctx = rs.context or RoofContext()
        ctx.environment = ProbeEnvironment(cores=cores, machine_cores=machine_cores(),
                                           fingerprint=key)
        rs.context = ctx
    try:
        save_calibrated(rs, path)
    except (OSError, Refusal) as e:
        why = e.strerror if isinstance(e, OSError) and e.strerror else first_line(e)
        rs.info["calibrated_file_error"] = f"{path}: {why}"
        note = f"roofs cache {path} not written ({why}): these roofs hold for this process only"
        rs.notes.append(note)
        return note
    rs.info["calibrated_file"] = str(path)
    return None


def cached_roofs(backend: backends.Backend, cache: Path | None = None, *,
                 recalibrate: bool = False, quick: bool = False,
                 progress: Callable[[str], None] | None = None) -> RoofSet:
    """The device's calibration cache (``cache``, by default ``cache_path``), on any device:
    ``source`` for "cached"."""
    return source(backend, "cached", file=cache, recalibrate=recalibrate, quick=quick,
                  progress=progress).roofs


def stored_or_quick_roofs(backend: backends.Backend, cache: Path | None = None,
                          progress: Callable[[str], None] | None = None) -> RoofSet:
    """The roofs `roofbench.measure` places a callable under: this device's calibration cache
    (the same file as a GPU run's and `calibrate`'s, one per user and device; on a CPU keyed
    by the machine's fingerprint), measured once by the quick calibration
    when there is none. On a CPU too: unlike `roofbench run` there (which measures every
    run), one measured function must not cost the probes' seconds each time."""
    return cached_roofs(backend, cache, quick=True, progress=progress)


def _saver(path: Path) -> Callable[[RoofSet], None]:
    """The checkpoint of a calibration: the roofs so far, written atomically after every
    probe (a killed calibration leaves a usable file marked partial). A write that fails is
    left to the final save to report."""
    def save(rs: RoofSet) -> None:
        with contextlib.suppress(OSError):
            save_calibrated(rs, path)
    return save


def _load(path: Path, require_schema: bool) -> RoofSet:
    try:
        return load_roofs(path, require_schema=require_schema)
    except RoofsFileError as e:
        raise UserError(str(e)) from None


def open_cuda(device: int = 0) -> backends.Backend:
    """The CUDA backend on one device, or a one-line UserError saying why there is none."""
    why = backends.unavailable_reason("cuda")
    if why is not None:
        line = first_line(why) or "unknown reason"
        raise UserError(f"no CUDA GPU here: {line}")
    # Its constructor's parameters are the backend's own (not Backend's): a TypeError says
    # this one takes no device.
    cls: Callable[..., backends.Backend] = backends.backend_class("cuda")
    try:
        return cls(device=device)
    except TypeError:
        if device:
            raise UserError(f"the cuda backend cannot select --device {device}") from None
        return cls()


def open_for_calibration(device: int = 0, backend: str = "auto") -> backends.Backend:
    """The device `roofbench calibrate` measures: ``backend`` "cuda", "cpu", or "auto" (the
    GPU when there is one, else the CPU)."""
    if backend == "cuda" or (backend == "auto" and backends.unavailable_reason("cuda") is None):
        return open_cuda(device)
    if backend not in ("auto", "cpu"):
        raise UserError(f"calibrate measures a cuda GPU or the cpu, not {backend!r}")
    return backends.open_for_user("cpu")


def calibrate(device: int = 0, *, quick: bool = False, recalibrate: bool = False,
              out: str | Path | None = None,
              progress: Callable[[str], None] | None = None,
              backend: str = "auto") -> tuple[RoofSet, Path, bool]:
    """`roofbench calibrate`: (roofs, file, measured now?). The default file is the device's
    calibration cache: when it cannot be written the roofs are still shown, and a note on
    them says why; an ``out`` that cannot be written is a one-line error."""
    be = open_for_calibration(device, backend)
    got = source(be, "calibrate", file=out, recalibrate=recalibrate, quick=quick,
                 progress=progress)
    assert got.path is not None  # "calibrate" always has a file
    return got.roofs, got.path, got.measured


# -- the API's roofs: roofbench.measure, Session, ab, profile -----------------------------

# Roofs found per (device, cache file) in this process: the calibration cache is read once.
_ROOFS: dict[tuple[str, str], tuple[RoofSet | None, str | None]] = {}


def _say(line: str) -> None:
    print(f"roofbench: {line}", file=sys.stderr, flush=True)


def device_roofs(clock: Clock, roofs: RoofSet | str | Path | None = None,
                 cache: str | Path | None = None) -> tuple[RoofSet | None, str | None]:
    """The roofs a callable on ``clock``'s device is placed under, and a note (or None)."""
    device = clock.device_name()
    rs: RoofSet
    if isinstance(roofs, RoofSet):
        rs = roofs
    elif roofs is not None:
        try:
            rs = load_roofs(roofs)
        except RoofsFileError as e:
            raise MeasureError(f"roofs=: {e}") from None
    else:
        key = (device, str(cache or ""))
        if key not in _ROOFS:
            _ROOFS[key] = _calibrated(clock, Path(cache) if cache else None)
        return _ROOFS[key]
    note = f"roofs come from {rs.device}, cases ran on {device}" if rs.device != device \
        else None
    return rs, note


def _calibrated(clock: Clock, cache: Path | None) -> tuple[RoofSet | None, str | None]:
    be = clock.roofs_backend()
    path = cache or (cache_path(be) if be is not None else default_path(clock.device_name()))
    if be is None:
        if path.exists():
            return stored_or_quick_roofs(cast(backends.Backend, _Named(clock)), path), None
        return None, (f"no roofs: {path} does not exist and nothing here can calibrate "
                      f"{clock.device_name()} (the GPU probes need CuPy)")
    if not path.exists():
        _say(f"no stored roofs for {clock.device_name()}: the quick calibration runs once "
             f"and saves them to {path}")
    rs = stored_or_quick_roofs(be, path)
    for note in rs.notes:  # the cache measured again, or not written: said once
        if note.startswith("roofs cache "):
            _say(note)
    return rs, None


class _Named:
    """A device known by name only: its stored roofs can be read, never measured."""

    def __init__(self, clock: Clock) -> None:
        self.clock = clock

    def device_name(self) -> str:
        return self.clock.device_name()

    def measure_roofs(self, **_: Any) -> RoofSet:  # pragma: no cover - the file exists
        raise UserError(f"cannot calibrate {self.device_name()} here")
