"""Roofs for a run: the calibrated file of a GPU (measured once, reused), or a fresh measurement.

``obtain_roofs`` is what `roofbench run/bench` call; ``calibrate`` is `roofbench calibrate`.
Showing them (tables of measured vs datasheet, the device's roofline) is bench/present/tables.py.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from pathlib import Path

from roofbench.roofs.files import RoofsFileError, default_path, load_roofs, save_calibrated

from roofbench.errors_text import first_line
from roofbench.records import RoofSet
from roofbench.roofline import device_slug

from ..backends import base as backends
from ..errors import UserError


def obtain_roofs(backend: backends.Backend, *, roofs_file: str | Path | None = None,
                 cache: str | Path | None = None, recalibrate: bool = False,
                 quick: bool = False, progress: Callable[[str], None] | None = None) -> RoofSet:
    """The roofs a run is placed under: one policy for `roofbench run` and `bench`.

    - ``roofs_file`` (``--roofs``): that file as given, on any backend, read by the one loader
      (a calibrated file, a bare roof set, a run's results.json); never measured, never
      written. It may be another device's (the machine a kernel is tuned for, a hand-written
      set): it is used, and the run records "roofs come from X, cases ran on Y" in its notes
      and report. A file that cannot be read is a one-line error naming it.
    - GPU without ``--roofs``: the calibration cache (``cache``, by default roofs/<slug>.json),
      reused when present, else measured and saved; ``recalibrate`` measures it again. A cache
      that is corrupt or holds another device's roofs (a file copied from another machine) is a
      one-line error with --recalibrate advice: a cache is never silently used, nor silently
      overwritten.
    - CPU without ``--roofs``: measured every run (seconds, and the load of the machine moves
      them), never cached.
    """
    if roofs_file:
        return _load(Path(roofs_file), require_schema=False)
    if backend.kind != "gpu":
        return backend.measure_roofs(quick=quick, progress=progress)
    return cached_roofs(backend, Path(cache) if cache else None, recalibrate=recalibrate,
                        quick=quick, progress=progress)


def cached_roofs(backend: backends.Backend, cache: Path | None = None, *,
                 recalibrate: bool = False, quick: bool = False,
                 progress: Callable[[str], None] | None = None) -> RoofSet:
    """The device's calibration cache (``cache``, by default roofs/<slug>.json): reused when
    present and of this device, else measured and saved there (see ``obtain_roofs``)."""
    path = cache or default_path(backend.device_name())
    if path.exists() and not recalibrate:
        rs = _load(path, require_schema=True)
        if device_slug(rs.device) != device_slug(backend.device_name()):
            raise UserError(f"{path} holds roofs of {rs.device!r}, this device is "
                            f"{backend.device_name()!r}; run `roofbench calibrate "
                            f"--recalibrate` or pass the right roofs file")
        return rs
    rs = backend.measure_roofs(quick=quick, progress=progress, checkpoint=_saver(path))
    try:
        save_calibrated(rs, path)
        rs.info["calibrated_file"] = str(path)
    except OSError as e:  # an unwritable package folder must not lose the measurement
        rs.info["calibrated_file_error"] = f"{path}: {e.strerror or e}"
    return rs


def stored_or_quick_roofs(backend: backends.Backend, cache: Path | None = None,
                          progress: Callable[[str], None] | None = None) -> RoofSet:
    """The roofs `roofbench.measure` places a callable under: this device's calibration cache
    (the same file as a GPU run's, roofs/<slug>.json), measured once by the quick calibration
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


def calibrate(device: int = 0, *, quick: bool = False, recalibrate: bool = False,
              out: str | Path | None = None,
              progress: Callable[[str], None] | None = None) -> tuple[RoofSet, Path, bool]:
    """`roofbench calibrate`: (roofs, file, measured now?)."""
    be = open_cuda(device)
    path = Path(out) if out else default_path(be.device_name())
    if path.exists() and not recalibrate:
        rs = _load(path, require_schema=True)
        return rs, path, False
    rs = be.measure_roofs(quick=quick, progress=progress, checkpoint=_saver(path))
    try:
        save_calibrated(rs, path)
    except OSError as e:
        raise UserError(f"cannot write {path}: {e.strerror or e}") from None
    return rs, path, True
