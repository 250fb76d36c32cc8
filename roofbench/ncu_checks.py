"""The model beside the hardware: Nsight Compute's counters checked against the counted FLOPs
and bytes, as pure functions of a stored case (its launches' counters and the model's bytes).

A report shows these checks; ``roofbench run --ncu`` (bench/counters/ncu.py) collects the
counters. A check without a hardware figure (its metric not on the device) is left unmeasured,
never computed from the rest.
"""

from __future__ import annotations

from dataclasses import dataclass

from .records import CaseResult, LaunchCounters


@dataclass(frozen=True)
class Tolerances:
    """Allowed hardware/model ratios. DRAM writes may read low: dirty lines still in L2 when a
    kernel ends are written back after it, so the read tolerance is the wider one."""

    flops: float = 0.02
    read: float = 0.05
    write_low: float = 0.10
    write_high: float = 0.05

    def text(self) -> str:
        return (f"FLOPs within {self.flops:.0%}; DRAM reads within {self.read:.0%}; DRAM writes "
                f"from {self.write_low:.0%} low to {self.write_high:.0%} high (dirty lines "
                "still in L2 when a kernel ends are written back after it)")


TOLERANCES = Tolerances()


@dataclass
class Check:
    """One quantity of one launch (or pipeline): the model's figure and the hardware's."""

    quantity: str  # "FLOPs", "DRAM read", "DRAM write"
    model: float
    measured: float | None
    low: float  # allowed ratio range
    high: float

    @property
    def ratio(self) -> float | None:
        if self.measured is None or not self.model:
            return None
        return self.measured / self.model

    @property
    def ok(self) -> bool | None:
        if self.measured is None:
            return None
        ratio = self.ratio
        if ratio is None:  # a model of 0: only 0 agrees
            return self.measured == 0
        return self.low <= ratio <= self.high

    def flag(self) -> str | None:
        if self.ok is not False:
            return None
        if not self.model:
            return f"{self.quantity}: model 0, hardware {whole(self.measured)}"
        return f"{self.quantity} x{self.ratio:.3f}"


def whole(v: float | None) -> str:
    """A count as the report writes it: thousands separated, '-' when unknown."""
    return "-" if v is None else f"{v:,.0f}"


def checks(model_flops: float, model_read: float, model_write: float,
           lc: LaunchCounters, tol: Tolerances = TOLERANCES) -> list[Check]:
    return [Check("FLOPs", model_flops, lc.flops_total, 1 - tol.flops, 1 + tol.flops),
            Check("DRAM read", model_read, lc.dram_read, 1 - tol.read, 1 + tol.read),
            Check("DRAM write", model_write, lc.dram_write, 1 - tol.write_low,
                  1 + tol.write_high)]


def _add(vals: list[float | None]) -> float | None:
    known = [v for v in vals if v is not None]
    return float(sum(known)) if len(known) == len(vals) else None


def sum_counters(items: list[LaunchCounters]) -> LaunchCounters:
    """The counters of a whole pipeline: every quantity summed (unknown if any is)."""
    precs = {p for lc in items for p in lc.flops}
    return LaunchCounters(
        kernel="pipeline", dram_read=_add([lc.dram_read for lc in items]),
        dram_write=_add([lc.dram_write for lc in items]),
        l2_bytes=_add([lc.l2_bytes for lc in items]),
        flops={p: sum(lc.flops.get(p, 0.0) for lc in items) for p in precs},
        duration_s=_add([lc.duration_s for lc in items]),
        kernels=sum(lc.kernels for lc in items))


def _counters(c: CaseResult) -> list[LaunchCounters] | None:
    lcs = [la.counters for la in c.measurement.launches]
    if not lcs or any(lc is None for lc in lcs):
        return None
    return [lc for lc in lcs if lc is not None]


def case_checks(c: CaseResult, tol: Tolerances = TOLERANCES
                ) -> list[tuple[str, LaunchCounters, list[Check]]]:
    """(label, counters, checks) per launch, then the pipeline total for multi-launch cases;
    [] when the case has no counters. The model's read/write split of a launch comes from the
    buffers it names (CaseResult.launch_split); without it all its bytes count as reads."""
    lcs = _counters(c)
    if lcs is None:
        return []
    split = c.launch_split()
    rows = []
    for i, (la, lc) in enumerate(zip(c.measurement.launches, lcs, strict=True)):
        r, w = split[i] if split else (la.bytes.get("dram", 0), 0)
        label = la.kernel + (f" ({la.note})" if la.note else "")
        rows.append((label, lc, checks(la.flops, r, w, lc, tol)))
    if len(lcs) > 1:
        tot = sum_counters(lcs)
        r = sum(s[0] for s in split) if split else c.declaration.bytes.get("dram", 0)
        w = sum(s[1] for s in split) if split else 0
        rows.append(("pipeline", tot, checks(c.declaration.flops, r, w, tot, tol)))
    return rows


def hw_dram_ai(c: CaseResult) -> float | None:
    """Model FLOPs / DRAM bytes the hardware moved (all launches): the plot's hollow marker."""
    lcs = _counters(c)
    totals = [lc.dram_total for lc in lcs] if lcs else []
    if not totals or any(t is None for t in totals):
        return None
    moved = sum(t for t in totals if t is not None)
    return c.declaration.flops / moved if moved > 0 else None
