"""The records of the CPU's cache levels: a cache roof's sweep (``Roof.cache``) and where a
case's bytes were placed (``CaseResult.placement``). Re-exported by records.py, read by
readers.py (``read_cache_sweep``, ``read_placement``); imports nothing of roofbench, so that
records.py and roofline.py can both use them.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

# Cache levels a CPU sweep measures, innermost first (roofline.LEVELS knows them all).
CACHE_LEVELS = ("l1", "l2", "l3")

PLACEMENT_RULE = ("working set (every buffer's bytes, once) < the level's capacity for the "
                  "cores used (the instances they touch x one instance's size, cut at the "
                  "smallest working set its sweep measured no faster than DRAM): the smallest "
                  "such level, else dram")


@dataclass(frozen=True)
class SweepPoint:
    """One working set of the sweep: where it was planned, how it was accessed, its rate."""

    level: str  # the level it was planned for ("l1", "l2", "l3")
    working_set_bytes: int  # over all threads
    access: str  # "read" or "read+write"
    bytes_per_s: float  # the roof's statistic: each thread's sustained burst rate, summed
    mean_bytes_per_s: float  # each thread's bursts on average, summed (a time average)
    # each thread's best and median burst, summed (None in files before they were stored,
    # whose bytes_per_s was the best burst)
    best_bytes_per_s: float | None = None
    median_bytes_per_s: float | None = None


@dataclass
class CacheSweep:
    """How a cache roof was measured: the level as the OS reports it, the cores that
    measured, the band of working sets planned for it and every point of that band."""

    level: str  # "l1", "l2", "l3"
    access: str  # "read" or "read+write"
    instance_bytes: int  # one instance (a core's L2, a CCX's L3)
    instances: int  # instances the measuring cores touch
    cpus_per_instance: int  # measuring cores per instance
    cores: int  # threads that measured (one per allowed core)
    topology_source: str  # "sysfs" or "lscpu"
    band: list[int] = field(default_factory=list)  # [smallest, largest] working set
    points: list[SweepPoint] = field(default_factory=list)

    @property
    def capacity_bytes(self) -> int:
        """Bytes of this level the measuring cores hold between them."""
        return self.instance_bytes * self.instances

    def capacity_for(self, cores: int | None, dram_bytes_per_s: float | None = None) -> int:
        """Bytes of this level ``cores`` cores hold (None: the measuring cores), packed
        onto as few instances as they fill; with the DRAM roof given, no more than the
        smallest working set of the sweep that ran no faster than it (a VM's L3 shared with
        other tenants: the OS reports the host's size, the sweep shows what is left)."""
        if cores is None or cores >= self.cores:
            cap = self.capacity_bytes
        else:
            per = max(1, self.cpus_per_instance)
            cap = self.instance_bytes * min(self.instances, max(1, -(-cores // per)))
        if dram_bytes_per_s:
            slow = [p.working_set_bytes for p in self.points
                    if p.access == self.access and p.bytes_per_s <= dram_bytes_per_s]
            cap = min([cap, *slow])
        return cap

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["capacity_bytes"] = self.capacity_bytes
        return d


@dataclass(frozen=True)
class Placement:
    """The memory level a case's modelled bytes are placed on, and why."""

    level: str  # "l1", "l2", "l3" or "dram"
    working_set_bytes: int
    capacity_bytes: int | None  # the level's capacity for ``cores`` (None: dram)
    cores: int | None  # cores the capacity is counted for (None: all that measured)
    rule: str = PLACEMENT_RULE

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def read_cache_sweep(d: dict[str, Any]) -> CacheSweep:
    known = set(CacheSweep.__dataclass_fields__) - {"points"}
    return CacheSweep(**{k: v for k, v in d.items() if k in known},
                      points=[SweepPoint(**p) for p in d.get("points") or []])


def read_placement(d: dict[str, Any]) -> Placement:
    known = set(Placement.__dataclass_fields__)
    return Placement(**{k: v for k, v in d.items() if k in known})
