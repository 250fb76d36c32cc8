"""What each rank measures: its device's roofs, then (all ranks together) the MPI links."""

from __future__ import annotations

import contextlib
import os
import time
import traceback
from collections.abc import Callable
from typing import Any

from roofbench.roofs.probes import links as ic
from roofbench.roofs.probes import mpi_links

from roofbench.errors_text import first_line
from roofbench.roof_records import RoofSet

from ..errors import UserError
from .environment import assign_gpu, gpu_backend, visible_gpus
from .fleet_records import FleetConfig, Place, RankResult
from .messaging import watchdog


def measure_rank(place: Place, cfg: FleetConfig,
                 opener: Callable[[str], Any] | None = None) -> RankResult:
    """Open this rank's backend and measure its roofs; any failure becomes the result's error."""
    res = RankResult(rank=place.rank, host=place.host, status="error",
                     local_rank=place.local_rank)
    t0 = time.monotonic()
    try:
        name = cfg.backend
        lr = place.local_rank or 0
        if gpu_backend(name):
            res.gpu, why = assign_gpu(lr, place.host, place.rank)
            if why:
                raise UserError(why)
        elif name == "auto" and visible_gpus():
            res.gpu, why = assign_gpu(lr, place.host, place.rank)
            if why:  # more ranks than GPUs on this host: this one calibrates nothing
                raise UserError(why)
        if opener is None:
            from ..backends.base import open_backend

            opener = open_backend
        be = opener(name)
        res.backend = getattr(be, "name", name)
        res.device = be.device_name()
        rs: RoofSet = be.measure_roofs(quick=cfg.quick)
        rs.info.setdefault("host", place.host)
        res.roofs = rs.to_dict()
        res.device = rs.device or res.device
        res.status = "ok"
        with contextlib.suppress(Exception):
            be.close()
    except Exception as e:  # a failing rank must not take the fleet down
        res.error = first_line(e, typed=not isinstance(e, UserError))
        if not isinstance(e, UserError) and os.environ.get("ROOFBENCH_DEBUG"):
            traceback.print_exc()
    res.elapsed_s = time.monotonic() - t0
    return res


def measure_links(comm: Any, cfg: FleetConfig) -> list[ic.LinkMeasurement]:
    """MPI p2p and all-reduce bandwidth; blocking collectives, each under the watchdog."""
    sizes = ic.QUICK_MPI_SIZES if cfg.quick else ic.DEFAULT_MPI_SIZES
    if cfg.link_max_bytes:
        sizes = tuple(s for s in sizes if s <= cfg.link_max_bytes) or (sizes[0],)
    target = 16 * ic.MiB if cfg.quick else 64 * ic.MiB
    samples = 3 if cfg.quick else 5
    out = []
    with watchdog(comm, cfg.timeout, "MPI point-to-point probe"):
        out.append(mpi_links.mpi_pingpong(comm, sizes, samples=samples,
                                          target_bytes=target, budget_s=cfg.timeout))
    with watchdog(comm, cfg.timeout, "MPI all-reduce probe"):
        out.append(mpi_links.mpi_allreduce(comm, sizes, samples=samples,
                                           target_bytes=target, budget_s=cfg.timeout))
    return out
