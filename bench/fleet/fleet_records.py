"""The fleet's records: where each rank runs, what it measured, and how the run is configured.

They travel between ranks as pickles and are written into fleet.json with ``asdict``."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from roofbench.calibrated import FLEET_SCHEMA

SCHEMA = FLEET_SCHEMA


@dataclass
class Place:
    rank: int
    size: int
    host: str
    pid: int
    version: str
    python: str
    launcher: str
    local_rank: int | None = None
    local_rank_source: str = ""
    local_size: int = 1


@dataclass
class RankResult:
    rank: int
    host: str
    status: str  # "ok", "error", "timeout"
    backend: str = ""
    device: str = ""
    gpu: str | None = None  # CUDA_VISIBLE_DEVICES id this rank was pinned to
    local_rank: int | None = None
    elapsed_s: float = 0.0
    error: str = ""
    roofs: dict[str, Any] | None = None  # RoofSet.to_dict()
    notes: list[str] = field(default_factory=list)


@dataclass
class FleetConfig:
    backend: str = "auto"
    quick: bool = False
    out: str | None = None
    margin: float = 0.1
    timeout: float = 600.0
    calibrate: bool = True
    links: bool = True
    link_max_bytes: int | None = None  # cap on MPI probe message size (small test runs)
    argv: list[str] = field(default_factory=list)
