"""The roofs a trace is placed under, and where they came from (said in the report).

1. ``--roofs FILE``: as given (a calibration cache, a roofs file, a run's results.json).
2. A GPU trace: the device its ``deviceProperties`` names (or ``--device NAME``): that
   device's calibration cache when this user has one (measured), else the datasheet
   (``roofs/datasheet.py``, matched by name, SM count and memory; marked datasheet: peaks,
   not measurements). ROCm names every part "AMD Radeon Graphics": refused in one line
   asking for ``--device`` or ``--roofs``.
3. A CPU trace recorded on this machine (its ``host_name``): this machine's roofs as
   ``roofbench.profile`` finds them (the calibration cache, measured once when absent);
   from another machine: no roofs unless given (counted and timed, not placed).
"""

from __future__ import annotations

import socket
from pathlib import Path
from typing import Any

from roofbench.bench.errors import UserError

from roofbench.roof_records import RoofSet

GENERIC_NAMES = ("AMD Radeon Graphics",)


def trace_roofs(gpu: bool, device: dict[str, Any] | None, host: str | None,
                roofs: str | Path | RoofSet | None, device_name: str | None
                ) -> tuple[RoofSet | None, str, str]:
    """(roofs or None, where they came from, the device's name)."""
    from roofbench.roofs.datasheet import datasheet_roofs
    from roofbench.roofs.files import RoofsFileError, default_path, load_roofs

    name = device_name or (str(device.get("name", "")) if device else "")
    if isinstance(roofs, RoofSet):
        return roofs, "a RoofSet given", name or roofs.device
    if roofs is not None:
        try:
            rs = load_roofs(roofs)
        except RoofsFileError as e:
            raise UserError(f"--roofs: {e}") from None
        return rs, f"`{roofs}` (given)", name or rs.device
    if gpu:
        if not name.strip():
            raise UserError("the trace names no GPU (no deviceProperties): name it with "
                            "--device NAME or give --roofs FILE")
        if name.strip() in GENERIC_NAMES:
            raise UserError(f"the trace names its GPU {name.strip()!r}, which ROCm gives every "
                            "part: name it with --device NAME (e.g. 'MI250X') or give --roofs "
                            "FILE")
        cache = default_path(name)
        if cache.is_file():
            try:
                return load_roofs(cache, require_schema=True), \
                    f"this device's calibration cache ({cache})", name
            except RoofsFileError:
                pass  # a damaged cache: the datasheet, said
        sms = device.get("numSms") if device and not device_name else None
        mem = device.get("totalGlobalMem") if device and not device_name else None
        found, why = datasheet_roofs(name, sms if isinstance(sms, int) else None,
                                     mem if isinstance(mem, int) else None)
        if not found:
            return None, f"none: {why}; give --roofs FILE", name
        return RoofSet(device=name, roofs=found,
                       notes=["datasheet roofs: the vendor's peaks, not measured"]), \
            f"the datasheet ({why}): peaks, not measured", name
    if host and host != socket.gethostname():
        return None, (f"none: a CPU trace recorded on {host!r}, not this machine; give "
                      "--roofs FILE"), name or host
    from roofbench.bench.measure.callables import clock_for
    from roofbench.bench.measure.roof_source import device_roofs

    clock = clock_for([])
    here, _ = device_roofs(clock, None)
    return here, "this machine's calibration cache (roofs/<device>.json)", clock.device_name()
