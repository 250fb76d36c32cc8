"""The calibration cache's record (roofs/<slug>.json) and the fleet report's schema name.

Part of the shared root: it imports nothing from kernels/, roofs/ or bench/.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from roofbench.roof_records import RoofSet

CALIBRATED_SCHEMA = "roofbench.calibrated-roofs/1"
# `roofbench fleet`: every rank's roof set and the link roofs, in one report file
FLEET_SCHEMA = "roofbench.fleet/1"


@dataclass
class CalibratedRoofs:
    """A GPU's calibration cache (roofs/<slug>.json): the roof set plus when it was measured
    and the measured-vs-datasheet ``table`` (kept for a reader of the file; never read back).

    Written as a roof set dict with three more keys, so any roof-set reader takes it. Files
    written before the roof set carried a ``schema_version`` hold only ``device``/``info``/
    ``roofs`` (a version 1 roof set) and read as such.
    """

    roofs: RoofSet
    created_utc: str | None = None
    slug: str = ""
    table: list[dict[str, Any]] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        d = self.roofs.to_dict()
        return {"schema": CALIBRATED_SCHEMA, "created_utc": self.created_utc,
                "device": d["device"], "slug": self.slug, "table": self.table,
                **{k: d[k] for k in ("schema_version", "datasheet", "failed_probes", "notes",
                                     "elapsed_s", "info", "roofs", "context") if k in d}}
