"""Roofs for a run: the calibrated file of a GPU (measured once, reused), or a fresh measurement.

``obtain_roofs`` is what `roofbench run/bench` call; ``calibrate`` is `roofbench calibrate`.
Showing them (tables of measured vs datasheet, the device's roofline) is bench/present/tables.py.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from roofbench.roofs.calibrated import (
    CalibrationError,
    default_path,
    load_calibrated,
    save_calibrated,
)
from roofbench.roofs.model import RoofSet, device_slug

from roofbench.errors_text import first_line

from ..backends import base as backends
from ..errors import UserError


def obtain_roofs(backend: backends.Backend, *, roofs_file: str | Path | None = None,
                 recalibrate: bool = False, quick: bool = False,
                 progress: Callable[[str], None] | None = None) -> RoofSet:
    """GPU: the calibrated file (``roofs_file`` or roofs/<slug>.json) when present and valid,
    else measure and save it. CPU: measure every time, unless ``roofs_file`` is given.
    A corrupt file is an error with --recalibrate advice, never silently replaced or used."""
    if backend.kind != "gpu":
        if roofs_file and not recalibrate:
            return _load(Path(roofs_file), require_schema=False)
        return backend.measure_roofs(quick=quick, progress=progress)
    path = Path(roofs_file) if roofs_file else default_path(backend.device_name())
    if path.exists() and not recalibrate:
        rs = _load(path, require_schema=roofs_file is None)
        if device_slug(rs.device) != device_slug(backend.device_name()):
            raise UserError(f"{path} holds roofs of {rs.device!r}, this GPU is "
                            f"{backend.device_name()!r}; run `roofbench calibrate "
                            f"--recalibrate` or pass the right --roofs file")
        return rs
    rs = backend.measure_roofs(quick=quick, progress=progress)
    try:
        save_calibrated(rs, path)
        rs.info["calibrated_file"] = str(path)
    except OSError as e:  # an unwritable package folder must not lose the measurement
        rs.info["calibrated_file_error"] = f"{path}: {e.strerror or e}"
    return rs


def _load(path: Path, require_schema: bool) -> RoofSet:
    try:
        return load_calibrated(path, require_schema=require_schema)
    except CalibrationError as e:
        raise UserError(str(e)) from None


def open_cuda(device: int = 0) -> backends.Backend:
    """The CUDA backend on one device, or a one-line UserError saying why there is none."""
    why = backends.unavailable_reason("cuda")
    if why is not None:
        line = first_line(why) or "unknown reason"
        raise UserError(f"no CUDA GPU here: {line}")
    cls = backends.backend_class("cuda")
    try:
        return cls(device=device)  # type: ignore[call-arg]
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
    rs = be.measure_roofs(quick=quick, progress=progress)
    try:
        save_calibrated(rs, path)
    except OSError as e:
        raise UserError(f"cannot write {path}: {e.strerror or e}") from None
    return rs, path, True
