"""A faked reading of the machine's load while roofs are calibrated
(bench/measure/roof_source.py ``_load_probe``): tests that fake the probes fake the load
too, so that a test machine busy with other work neither hides nor decides what they test."""

from __future__ import annotations

from roofbench.roofs.probes.cpu_noise import NoiseReport


def reading(other_busy: float, cores: int = 2) -> NoiseReport:
    """Other processes used ``other_busy`` of the ``cores`` while the probes ran."""
    return NoiseReport(wall_s=1.0, cores=cores, other_busy=other_busy, steal=0.0,
                       minor_faults=0, major_faults=0, involuntary_switches=0,
                       load_avg_1m=other_busy * cores * 2)


class Quiet:
    """A load probe that reads a quiet machine."""

    def report(self) -> NoiseReport:
        return reading(0.0)
