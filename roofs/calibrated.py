"""Calibrated roof files: ``roofs/<device-slug>.json``, measured and datasheet roofs side by side.

A calibrated file is a RoofSet dict (``device``, ``info``, ``roofs``: any RoofSet reader can use
it) plus a ``schema`` tag, a creation time and a ``table`` of measured vs datasheet figures.
It is written atomically (temp file + os.replace): an interrupted calibration never leaves a
half-written file. A corrupt or wrong-schema file raises CalibrationError naming the file and
the way out (``--recalibrate``); it is never silently used.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

from roofbench.errors_text import first_line
from roofbench.fileio import atomic_write_text

from .model import LEVELS, PRECISIONS, Roof, RoofSet, device_slug

SCHEMA = "roofbench.calibrated-roofs/1"
ROOFS_DIR = Path(__file__).resolve().parent
ADVICE = "run `roofbench calibrate --recalibrate` to measure it again"


class CalibrationError(ValueError):
    """A calibrated roofs file that cannot be used; the message names the file."""


def default_path(device_name: str, directory: Path | None = None) -> Path:
    return (directory or ROOFS_DIR) / f"{device_slug(device_name)}.json"


def side_by_side(rs: RoofSet) -> list[dict[str, Any]]:
    """One row per memory level / precision: best measured, datasheet, theoretical, ratio."""
    keys = [("memory", lv) for lv in LEVELS] + [("compute", p) for p in PRECISIONS]
    seen = {(r.kind, r.level if r.kind == "memory" else r.precision) for r in rs.roofs}
    keys += sorted(k for k in seen if k not in keys and k[0] in ("memory", "compute"))
    rows = []
    for kind, key in keys:
        pick = rs.memory if kind == "memory" else rs.compute
        m, d, t = pick(key, "measured"), pick(key, "datasheet"), pick(key, "theoretical")
        if not (m or d or t):
            continue
        ceiling = (m.evidence.get("ceiling") if m else None) or ""
        # The hand-written mma.sync ceiling, kept beside the library one (max of the two wins).
        mma = [r.value for r in rs.roofs if r.kind == "compute" and r.precision == key
               and r.source == "measured" and r.evidence.get("ceiling") == "mma.sync"]
        rows.append({
            "kind": kind, "key": key, "unit": "B/s" if kind == "memory" else "FLOP/s",
            "measured": m.value if m else None, "measured_by": m.name if m else None,
            "ceiling": ceiling, "mma_sync": max(mma) if mma else None,
            "datasheet": d.value if d else None,
            "theoretical": t.value if t else None,
            "measured_over_datasheet": (m.value / d.value) if (m and d) else None,
            "measured_over_theoretical": (m.value / t.value) if (m and t) else None,
        })
    return rows


def to_payload(rs: RoofSet) -> dict[str, Any]:
    d = rs.to_dict()
    return {"schema": SCHEMA, "created_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            "device": d["device"], "slug": device_slug(rs.device), "table": side_by_side(rs),
            "info": d["info"], "roofs": d["roofs"]}


def save_calibrated(rs: RoofSet, path: Path) -> Path:
    """Write atomically: a temp file in the same folder, then os.replace."""
    path = Path(path)
    text = json.dumps(to_payload(rs), indent=1, default=_jsonable) + "\n"
    atomic_write_text(path, text)
    return path


def _jsonable(o: Any) -> Any:
    """numpy scalars and other number-likes in evidence become plain numbers."""
    for cast in (int, float):
        try:
            v = cast(o)
            if v == o:
                return v
        except (TypeError, ValueError):
            pass
    return str(o)


def load_calibrated(path: Path, *, require_schema: bool = True) -> RoofSet:
    """Read a calibrated file. With ``require_schema=False`` a bare RoofSet dict (a
    hand-written file) or a run's results.json (its ``roofs``) is accepted too; a different
    schema tag on the roof set itself is always refused."""
    path = Path(path)
    try:
        d = json.loads(path.read_text())
    except FileNotFoundError:
        raise CalibrationError(f"{path}: no such calibrated roofs file") from None
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as e:
        raise CalibrationError(f"{path}: corrupt calibrated roofs file "
                               f"({first_line(e)}); {ADVICE}") from None
    if not isinstance(d, dict):
        raise CalibrationError(f"{path}: not a calibrated roofs file (top level is "
                               f"{type(d).__name__}); {ADVICE}")
    if not require_schema and isinstance(d.get("roofs"), dict):
        d = d["roofs"]  # a run's results.json carries the roof set it was placed under
    schema = d.get("schema")
    if schema != SCHEMA and (require_schema or schema is not None):
        raise CalibrationError(f"{path}: wrong schema {schema!r} (expected {SCHEMA!r}); {ADVICE}")
    try:
        rs = RoofSet.from_dict(d)
        for r in rs.roofs:
            if not isinstance(r, Roof):  # pragma: no cover - from_dict builds Roofs
                raise ValueError("bad roof")
    except (KeyError, TypeError, ValueError) as e:
        raise CalibrationError(f"{path}: invalid roofs ({first_line(e)}); "
                               f"{ADVICE}") from None
    if not rs.roofs:
        raise CalibrationError(f"{path}: holds no roofs; {ADVICE}")
    rs.info.setdefault("calibrated_file", str(path))
    if "created_utc" in d:
        rs.info.setdefault("calibrated_utc", d["created_utc"])
    return rs
