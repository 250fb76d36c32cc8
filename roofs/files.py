"""Roofs files: the one loader of every roofs file roofbench writes, and the calibration cache.

The calibration cache ``roofs/<device-slug>.json`` under the cache home (``$ROOFBENCH_HOME``,
else the per-user cache directory; ``CalibratedRoofs`` in roofbench/calibrated.py)
is a RoofSet dict (any RoofSet reader can use it) plus a ``schema`` tag, a creation time and a
``table`` of measured vs datasheet figures. It is written atomically (temp file + os.replace):
an interrupted calibration never leaves a half-written file. ``load_roofs`` reads it, a bare
roof set, or a run's results.json (its roofs); a file it cannot use raises RoofsFileError, one
line naming the file and the way out; it is never silently used.
"""

from __future__ import annotations

import json
import os
import stat
import time
from pathlib import Path
from typing import Any

from roofbench.calibrated import CALIBRATED_SCHEMA, FLEET_SCHEMA, CalibratedRoofs
from roofbench.errors_text import first_line
from roofbench.fileio import atomic_write_text
from roofbench.paths import cache_home
from roofbench.readers import SchemaError, read_calibrated, read_roof, read_roofset
from roofbench.records import RESULTS_SCHEMA
from roofbench.roof_records import RoofSet
from roofbench.roofline import device_slug, side_by_side

ADVICE = "run `roofbench calibrate --recalibrate` to measure it again"
OTHER_ADVICE = ("pass a roofs file roofbench wrote (roofs/<device>.json, a bare roof set, a "
                "run's results.json, a fleet file) or none to measure")


class RoofsFileError(ValueError):
    """A calibrated roofs file that cannot be used; the message names the file."""


def _fleet_roofs(d: dict[str, Any]) -> RoofSet:
    """fleet.json: the first rank that measured its roofs, with every link roof added."""
    ok = [r for r in d["ranks"] if r.get("status") == "ok" and r.get("roofs")]
    rs = read_roofset(ok[0]["roofs"]) if ok else RoofSet(device="fleet")
    for r in d["interconnect"]["roofs"]:
        rs.add(read_roof(r))
    return rs


def default_path(device_name: str, directory: Path | None = None, tag: str = "") -> Path:
    """The calibration cache of a device: roofs/<slug>.json under the cache home
    ($ROOFBENCH_HOME, else the per-user cache directory: roofbench/paths.py), or under
    ``directory``; ``tag`` names a variant of it (``cores-0-3``: roofs of some cores only)."""
    name = device_slug(device_name) + (f"@{tag}" if tag else "")
    return (directory or cache_home() / "roofs") / f"{name}.json"


def to_payload(rs: RoofSet) -> dict[str, Any]:
    return CalibratedRoofs(rs, created_utc=time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                           slug=device_slug(rs.device), table=side_by_side(rs)).to_dict()


def save_calibrated(rs: RoofSet, path: Path) -> Path:
    """Write atomically: a temp file in the same folder, then os.replace."""
    path = Path(path)
    text = json.dumps(to_payload(rs), indent=1, default=jsonable) + "\n"
    atomic_write_text(path, text)
    return path


def jsonable(o: Any) -> Any:
    """numpy scalars and other number-likes in evidence become plain numbers."""
    for cast in (int, float):
        try:
            v = cast(o)
            if v == o:
                return v
        except (TypeError, ValueError):
            pass
    return str(o)


# A run's results.json is a roofs file too: the bound of a results file (bench/results.py).
MAX_ROOFS_BYTES = 512 << 20


def read_bounded(path: Path, what: str = "roofs", limit: int = MAX_ROOFS_BYTES) -> bytes:
    """A file's bytes, only when it is a regular file of at most ``limit`` bytes: a device
    (/dev/zero) or a pipe, which never ends, is refused before a byte is read (opened without
    blocking, so a FIFO with no writer does not hang), and the read stops at the limit."""
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    st = os.fstat(fd)
    if not stat.S_ISREG(st.st_mode):
        os.close(fd)
        kind = "a folder" if stat.S_ISDIR(st.st_mode) else "not a regular file"
        raise RoofsFileError(f"{path}: {kind} (a {what} file is a regular file)")
    with os.fdopen(fd, "rb") as f:
        data = f.read(limit + 1)
    if st.st_size > limit or len(data) > limit:
        raise RoofsFileError(f"{path}: more than {limit >> 20} MiB, no {what} file")
    return data


def load_roofs(path: str | Path, *, require_schema: bool = False) -> RoofSet:
    """The one reader of roofs files: a calibrated file, a bare RoofSet dict (version 1 or 2,
    hand-written or `save_roofs`; a fleet rank file or links.json), a run's results.json (the
    roof set it was placed under), or a fleet.json (its first measured rank plus the links).
    ``require_schema``: only a calibrated file will do (the calibration cache must carry its
    tag, and hold roofs). Anything else raises RoofsFileError, one line naming the file."""
    path = Path(path)
    what, advice = ("calibrated roofs", ADVICE) if require_schema else ("roofs", OTHER_ADVICE)
    try:
        d = json.loads(read_bounded(path, what).decode())
    except FileNotFoundError:
        raise RoofsFileError(f"{path}: no such {what} file") from None
    except RecursionError:
        raise RoofsFileError(f"{path}: corrupt {what} file (nested too deeply)") from None
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as e:
        raise RoofsFileError(f"{path}: corrupt {what} file ({first_line(e)}); "
                               f"{advice}") from None
    if not isinstance(d, dict):
        raise RoofsFileError(f"{path}: not a {what} file (top level is "
                               f"{type(d).__name__}); {advice}")
    schema, created = d.get("schema"), None
    try:
        if schema == CALIBRATED_SCHEMA:
            cal = read_calibrated(d)
            rs, created = cal.roofs, cal.created_utc
        elif not require_schema and schema == FLEET_SCHEMA:
            rs = _fleet_roofs(d)
        elif (not require_schema and str(schema).startswith(RESULTS_SCHEMA)
              and not isinstance(d.get("roofs"), dict)):
            raise SchemaError("a results file of a run placed under no roofs")
        elif require_schema or (schema is not None and not isinstance(d.get("roofs"), dict)):
            raise SchemaError(f"wrong schema {schema!r} (expected {CALIBRATED_SCHEMA!r}"
                              + ("" if require_schema else f", a roof set or {RESULTS_SCHEMA!r}")
                              + ")")
        elif isinstance(d.get("roofs"), dict):
            rs = read_roofset(d["roofs"])  # a run's results.json: the roofs it was under
        else:
            rs = read_roofset(d)
    except SchemaError as e:
        raise RoofsFileError(f"{path}: {e}; {advice}") from None
    except (KeyError, TypeError, ValueError, IndexError) as e:
        raise RoofsFileError(f"{path}: invalid roofs ({first_line(e)}); {advice}") from None
    if require_schema and not rs.roofs:
        raise RoofsFileError(f"{path}: holds no roofs; {advice}")
    if schema == CALIBRATED_SCHEMA:  # a calibration: which file, and when it was measured
        rs.info.setdefault("calibrated_file", str(path))
        if created:
            rs.info.setdefault("calibrated_utc", created)
    return rs


