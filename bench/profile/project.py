"""A profile's counts projected onto another device's roofs (``Profile.project(roofs)``,
``roofbench model ... --on ROOFS``): each op's FLOPs and bytes, as recorded here, placed on
those roofs; its lower-bound time there (the slower of its FLOPs over the compute roof of its
precision and its bytes over the memory roof of the level its data would come from) and the
roof that limits it. A projection, not a measurement: no op ran there, launch and dispatch
cost are not in it, and the program's bound is its ops' bounds summed.

The level there: an op's in-program working set (its reuse distance, kept in its placement)
placed on the target's cache sweeps (``roofline.place``); DRAM (HBM) where the target has no
sweep (a GPU's roofs) or the op was not placed here. A program recorded whole (JAX) is
projected as one op.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from roofbench.bench.profile.common import precision_of

from roofbench.roof_records import RoofSet
from roofbench.roofline import place, roof_precision

MARK = "projection (lower bounds at the target's roofs, not measured there)"


@dataclass
class ProjectedOp:
    """One distinct op on the target's roofs."""

    name: str
    calls: int
    flops: int
    bytes: int
    precision: str
    level: str
    bound_s: float | None  # per call, at the target's roofs
    limiting_roof: str | None
    here_s: float | None  # per call, measured here (in the program)

    @property
    def total_s(self) -> float:
        return (self.bound_s or 0.0) * self.calls


@dataclass
class Projection:
    """The profile's ops projected onto ``device``'s roofs."""

    device: str
    source: str
    ops: list[ProjectedOp] = field(default_factory=list)
    unplaced: list[str] = field(default_factory=list)  # ops no roof of the target bounds
    mark: str = MARK

    @property
    def program_s(self) -> float:
        """The program's lower bound there: its ops' bounds, each x its calls, summed."""
        return sum(p.total_s for p in self.ops)

    def rows(self) -> list[dict[str, Any]]:
        return [{"op": p.name, "calls": p.calls, "precision": p.precision, "level": p.level,
                 "bound/call s": p.bound_s, "limiting roof": p.limiting_roof,
                 "here/call s": p.here_s} for p in sorted(self.ops, key=lambda p: -p.total_s)]

    def to_dict(self) -> dict[str, Any]:
        return {"mark": self.mark, "device": self.device, "roofs_from": self.source,
                "program_bound_s": self.program_s, "unplaced": self.unplaced,
                "ops": self.rows()}


def _bound(flops: int, nbytes: int, precision: str, level: str, roofs: RoofSet
           ) -> tuple[float | None, str | None]:
    """(seconds, limiting roof) of one call at ``roofs``; (None, None) if nothing bounds it."""
    terms: list[tuple[float, str]] = []
    try:
        c = roofs.compute(roof_precision(precision, roofs))
    except KeyError:
        c = None
    if c is not None and flops:
        terms.append((flops / c.value, c.name))
    m = roofs.memory(level) or roofs.memory("dram")
    if m is not None and nbytes:
        terms.append((nbytes / m.value, m.name))
    if not terms:
        return None, None
    t, name = max(terms)
    return t, name


def project(prof: Any, roofs: RoofSet, source: str = "a RoofSet given") -> Projection:
    """``prof``'s recorded counts placed on ``roofs`` (the module doc); ``prof`` is a
    ``report.Profile`` (not imported: Profile.project imports this module)."""
    tensor_cores = any((r.precision or "").endswith("_tc") for r in roofs.roofs)
    out = Projection(roofs.device, source)
    for p in prof.ops:
        op = p.op
        if not op.bytes and not op.flops:
            continue  # a view: nothing to place
        prec = precision_of(op.dtype, op.family, tensor_cores)
        pl = p.case.roofline.placement
        there = place(pl.working_set_bytes, roofs) if pl is not None else None
        level = there.level if there is not None else "dram"
        t, roof = _bound(op.flops, op.bytes, prec, level, roofs)
        if t is None:
            out.unplaced.append(op.name)
        out.ops.append(ProjectedOp(op.name, op.calls, op.flops, op.bytes, prec, level, t,
                                   roof, p.case.measurement.median_s))
    if not prof.ops and prof.program is not None:
        out.ops.append(whole_program(prof.program, roofs))
    return out


def whole_program(case: Any, roofs: RoofSet) -> ProjectedOp:
    """A program recorded whole (a jitted JAX function: XLA compiled it into one program,
    with its cost analysis' FLOPs and fused bytes) projected as one op, its bytes from DRAM
    (HBM): no op-by-op reuse distance is known."""
    d, ident = case.declaration, case.identity
    nbytes = int(sum(d.bytes.values()))
    t, roof = _bound(int(d.flops), nbytes, ident.precision, "dram", roofs)
    name = f"{ident.workload} ({ident.variant}, whole)"
    return ProjectedOp(name, 1, int(d.flops), nbytes, ident.precision, "dram", t, roof,
                       case.measurement.median_s)


def load_target(path: str | Path) -> RoofSet:
    """A roofs file (a calibration, a stored results.json, a datasheet entry) by the one
    loader; its error as ``RoofsFileError``."""
    from roofbench.roofs.files import load_roofs

    return load_roofs(path)
