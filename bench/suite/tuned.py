"""Tuned configurations kept per device, beside the roofs: ``<cache>/tuned/<device>.json``
(``paths.cache_home()``: $ROOFBENCH_HOME, else platformdirs' per-user cache, as the
calibration cache). A `roofbench tune --workload` saves its chosen configuration there;
`roofbench run` / `bench` run it instead of the declared default (``tuned_cases``) and say so.

A file holds one device's entries, keyed ``workload/variant/family/dtype/size``, each the
configuration, the tune's folder and when it was chosen, plus the device's two roofs that
the nearest-device rule compares (``nearest``)."""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from roofbench.kernels.spec import Case, TuneSpace

from roofbench.fileio import atomic_write_text
from roofbench.paths import cache_home
from roofbench.roof_records import RoofSet
from roofbench.roofline import device_slug

from ..errors import UserError

FORMAT = "roofbench.tuned/1"


def store_dir(root: Path | None = None) -> Path:
    return (root or cache_home()) / "tuned"


def store_file(device: str, root: Path | None = None) -> Path:
    return store_dir(root) / f"{device_slug(device)}.json"


def entry_key(workload: str, variant: str, family: str, dtype: str,
              size: Sequence[int]) -> str:
    return f"{workload}/{variant}/{family}/{dtype}/{'x'.join(map(str, size))}"


@dataclass(frozen=True)
class Stored:
    """A configuration chosen on ``device`` for ``key``: ``tune`` its tune's folder."""

    device: str
    key: str
    config: Mapping[str, Any]
    label: str
    tune: str
    chosen: str  # UTC stamp


def _read(path: Path) -> dict[str, Any]:
    if not path.exists():
        return {}
    try:
        data = json.loads(path.read_text("utf-8"))
    except (OSError, ValueError) as e:
        raise UserError(f"{path}: not a tuned-configurations file ({e}); delete it to start "
                        "again") from None
    if not isinstance(data, dict) or data.get("format") != FORMAT or \
            not isinstance(data.get("entries"), dict):
        raise UserError(f"{path}: not a {FORMAT} file; delete it to start again")
    return data


def roof_pair(roofs: RoofSet | None, precision: str) -> dict[str, float] | None:
    """The two roofs the nearest-device rule compares: the compute roof of ``precision`` and
    the DRAM roof (None: either unknown)."""
    if roofs is None:
        return None
    c, m = roofs.compute(precision), roofs.memory("dram")
    if c is None or m is None or not (c.value > 0 and m.value > 0):
        return None
    return {"compute": float(c.value), "dram": float(m.value)}


def save(device: str, key: str, config: Mapping[str, Any], label: str, tune: str,
         chosen: str, *, kind: str, roofs: dict[str, float] | None,
         root: Path | None = None) -> Path:
    path = store_file(device, root)
    data = _read(path) or {"format": FORMAT, "device": device, "kind": kind, "entries": {}}
    data["kind"] = kind
    if roofs is not None:
        data["roofs"] = roofs
    data["entries"][key] = {"config": dict(config), "label": label, "tune": tune,
                            "chosen": chosen}
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_text(path, json.dumps(data, indent=1, sort_keys=True) + "\n")
    return path


def lookup(device: str, key: str, root: Path | None = None) -> Stored | None:
    e = _read(store_file(device, root)).get("entries", {}).get(key)
    if not isinstance(e, dict) or not isinstance(e.get("config"), dict):
        return None
    return Stored(device, key, e["config"], str(e.get("label", "")), str(e.get("tune", "")),
                  str(e.get("chosen", "")))


def nearest(device: str, kind: str, key: str, roofs: dict[str, float] | None,
            root: Path | None = None) -> tuple[Stored, str] | None:
    """The configuration another device chose for ``key``, from the nearest such device, and
    the rule's reason in words. The rule: devices of the same kind (cpu/gpu) holding ``key``;
    nearest is the least |ln(compute ratio)| + |ln(DRAM ratio)| of their stored roofs to
    ``roofs`` (this device's); without roofs on either side, the most recently chosen."""
    found: list[tuple[float, str, Stored, str]] = []
    folder = store_dir(root)
    if not folder.is_dir():
        return None
    for path in sorted(folder.glob("*.json")):
        try:
            data = _read(path)
        except UserError:
            continue  # another device's broken file does not stop this tune
        other = str(data.get("device", ""))
        e = data.get("entries", {}).get(key)
        if other == device or data.get("kind") != kind or not isinstance(e, dict):
            continue
        got = Stored(other, key, e.get("config", {}), str(e.get("label", "")),
                     str(e.get("tune", "")), str(e.get("chosen", "")))
        theirs = data.get("roofs")
        if roofs and isinstance(theirs, dict) and theirs.get("compute") and \
                theirs.get("dram"):
            d = abs(math.log(roofs["compute"] / theirs["compute"])) + \
                abs(math.log(roofs["dram"] / theirs["dram"]))
            found.append((d, "", got, f"nearest by roofs (distance {d:.3g})"))
        else:
            found.append((math.inf, got.chosen, got, "no roofs to compare: the most recent"))
    if not found:
        return None
    finite = [f for f in found if math.isfinite(f[0])]
    best = min(finite, key=lambda f: f[0]) if finite else max(found, key=lambda f: f[1])
    return best[2], best[3]


def usable(space: TuneSpace, case: Case, config: Mapping[str, Any]) -> str | None:
    """Why a stored configuration cannot run this case (None: it can): not the space's (older
    code), or excluded at this size and dtype."""
    return space.unknown(config) or space.why_excluded(config, case.size, case.dtype)


def tuned_cases(cases: list[Case], device: str, family: str,
                root: Path | None = None) -> tuple[list[Case], list[str]]:
    """``cases`` with each one that has a stored tuned configuration for this device running
    it, and one note per case saying which (or why a stored one was not used)."""
    out, notes = [], []
    for case in cases:
        space = case.variant.tune.get(family)
        if space is None or case.occupancy_level is not None:
            out.append(case)
            continue
        key = entry_key(case.workload.name, case.variant.name, family, case.dtype, case.size)
        got = lookup(device, key, root)
        if got is None:
            out.append(case)
            continue
        why = usable(space, case, got.config)
        if why is not None:
            notes.append(f"{case.key}: the stored tuned configuration {got.label} is not used "
                         f"({why}); the default runs")
            out.append(case)
            continue
        said = got.label or ",".join(f"{k}={v}" for k, v in got.config.items())
        out.append(Case(case.workload, case.variant.configured(family, got.config, said),
                        case.dtype, case.size, case.occupancy_level))
        notes.append(f"{case.key}: runs the tuned configuration {said} (chosen {got.chosen}, "
                     f"{store_file(device, root)})")
    return out, notes
