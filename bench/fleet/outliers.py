"""The fleet report as data: each device against its datasheet and its same-name peers."""

from __future__ import annotations

import datetime as _dt
import re
import statistics
from dataclasses import asdict
from typing import Any

from roofbench.roofs.probes import links as ic

from roofbench.readers import read_roofset
from roofbench.roof_records import Roof

from .fleet_records import SCHEMA, FleetConfig, Place, RankResult


def _roof_key(r: Roof) -> str:
    # A rank bound to its own cores names its CPU roofs for them ("... (cores 1)"): the same
    # roof as its peers' on theirs.
    name = re.sub(r" \(cores [^)]*\)$", "", r.name)
    return f"{r.kind}:{r.level or r.precision}:{name}"


def comparison_rows(results: dict[int, RankResult], margin: float) -> list[dict[str, Any]]:
    """One row per measured roof of every device: datasheet ratio and peer comparison.

    Peers are the other devices with the same name; a device is an outlier on a roof when its
    value is more than ``margin`` below the median of its peers' values of that roof."""
    sets = {r: read_roofset(res.roofs) for r, res in results.items()
            if res.status == "ok" and res.roofs}
    groups: dict[tuple[str, str], dict[int, float]] = {}
    for r, rs in sets.items():
        for roof in rs.roofs:
            if roof.source == "measured":
                g = groups.setdefault((rs.device, _roof_key(roof)), {})
                g[r] = max(roof.value, g.get(r, 0.0))
    rows = []
    for r, rs in sorted(sets.items()):
        seen = set()
        for roof in rs.roofs:
            if roof.source != "measured" or _roof_key(roof) in seen:
                continue
            seen.add(_roof_key(roof))
            group = groups[(rs.device, _roof_key(roof))]
            value = group[r]
            others = [v for q, v in group.items() if q != r]
            med = statistics.median(others) if others else value
            ds = (rs.compute(roof.key, "datasheet") if roof.kind == "compute"
                  else rs.memory(roof.key, "datasheet") if roof.kind == "memory" else None)
            outlier = bool(others) and value < (1.0 - margin) * med
            rows.append({
                "rank": r, "host": results[r].host, "device": rs.device, "roof": roof.name,
                "kind": roof.kind, "key": roof.level or roof.precision, "unit": roof.unit,
                "measured": value, "datasheet": ds.value if ds else None,
                "ratio": value / ds.value if ds else None, "peers": len(others),
                "peer_median": med, "vs_peers": value / med if med else None,
                "outlier": outlier})
    return rows


def build_report(cfg: FleetConfig, places: dict[int, Place], results: dict[int, RankResult],
                 links: list[ic.LinkMeasurement], link_note: str) -> dict[str, Any]:
    rows = comparison_rows(results, cfg.margin)
    link_roofs = [r for r in (m.to_roof() for m in links) if r is not None]
    notes = [m.note for m in links if m.note]
    outliers = [{"rank": x["rank"], "host": x["host"], "device": x["device"], "roof": x["roof"],
                 "measured": x["measured"], "peer_median": x["peer_median"],
                 "vs_peers": x["vs_peers"]} for x in rows if x["outlier"]]
    return {
        "schema": SCHEMA,
        "created_utc": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
        "command": cfg.argv, "roofbench_version": places[0].version,
        "world_size": len(results), "launcher": places[0].launcher,
        "backend_requested": cfg.backend, "quick": cfg.quick, "margin": cfg.margin,
        "timeout_s": cfg.timeout,
        "places": [asdict(places[r]) for r in sorted(places)],
        "ranks": [asdict(results[r]) for r in sorted(results)],
        "interconnect": {"measurements": [m.to_dict() for m in links],
                         "roofs": [r.to_dict() for r in link_roofs],
                         "note": "; ".join(filter(None, [link_note, *notes]))},
        "comparison": rows, "outliers": outliers,
    }


def exit_code(rep: dict[str, Any]) -> int:
    """0 when every rank is ok, 2 when none is, 1 in between."""
    st = [r["status"] for r in rep["ranks"]]
    if all(s == "ok" for s in st):
        return 0
    return 2 if not any(s == "ok" for s in st) else 1
