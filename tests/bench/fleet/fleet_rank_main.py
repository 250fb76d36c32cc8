"""Rank entry point for the fleet tests: `mpirun -n 2 python tests/bench/fleet/fleet_rank_main.py
fleet ...`.

Runs the real `roofbench` CLI after registering a test-only backend "fake" whose roofs are
fixed test fixtures (not measurements), and after applying per-rank faults chosen through the
environment, so that the tests can exercise the MPI protocol in a second:

- FLEET_FAKE_VERSION_RANK=r  rank r reports another roofbench version
- FLEET_FAKE_SLOW_RANK=r     rank r's fake roofs are 60% of the others' (a sick card)
- FLEET_FAKE_FAIL_RANK=r     rank r's measure_roofs raises
- FLEET_FAKE_HANG_RANK=r     rank r's measure_roofs sleeps far beyond any test timeout
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Callable
from typing import Any

from roofbench.bench.backends import base as be

import roofbench
from roofbench.roof_records import Roof, RoofSet


def _rank() -> str:
    for var in ("OMPI_COMM_WORLD_RANK", "PMI_RANK", "SLURM_PROCID"):
        if var in os.environ:
            return os.environ[var]
    return "0"


def _is(var: str) -> bool:
    return os.environ.get(var) == _rank()


class FakeBackend(be.Backend):
    name = "fake"
    family = "cpu"

    def info(self) -> dict[str, Any]:
        return {"name": self.device_name()}

    def device_name(self) -> str:
        return "Fake Device"

    def memory_budget(self) -> int:
        return 1 << 20

    def last_level_cache(self) -> int:
        return 1 << 20

    def prepare(self, case, inputs):  # noqa: ANN001
        raise NotImplementedError

    def time(self, fn: Callable[[], None], cfg):  # noqa: ANN001
        raise NotImplementedError

    def measure_roofs(self, quick: bool = False, progress=None,  # noqa: ANN001
                      checkpoint=None) -> RoofSet:
        if _is("FLEET_FAKE_FAIL_RANK"):
            raise RuntimeError("planted probe failure on this rank")
        if _is("FLEET_FAKE_HANG_RANK"):
            time.sleep(3600)
        s = 0.6 if _is("FLEET_FAKE_SLOW_RANK") else 1.0
        rs = RoofSet(device="Fake Device")
        rs.add(Roof("triad", "memory", 10e9 * s, "measured", level="dram",
                    evidence={"fixture": True}))
        rs.add(Roof("fma fp64", "compute", 50e9, "measured", precision="fp64",
                    evidence={"fixture": True}))
        rs.add(Roof("datasheet fp64", "compute", 100e9, "datasheet", precision="fp64"))
        return rs


be.REGISTRY["fake"] = "__main__:FakeBackend"
if _is("FLEET_FAKE_VERSION_RANK"):
    roofbench.__version__ = "0.0.0+other"

if __name__ == "__main__":
    from roofbench.bench.cli import main

    sys.exit(main(sys.argv[1:]))
