"""Fusion opportunities in a recorded program: groups of memory-bound ops whose
intermediates feed only the next op of the group.

From the recorded data flow (which call wrote each storage, which calls read that version):
a call joins the group of the call that reads its result when every storage it writes is
read by that one call only (or by none: a dead result such as layer norm's saved mean), is
not what the program returns and did not exist before the program ran (a weight, a buffer
written in place must be written). Both calls must be memory-bound under the roofs (their
intensity left of the ridge, or 0 FLOPs) and of a family a fused kernel can absorb
(element-wise, normalisation, reductions, copies/layout); views are transparent.

A group's fused bytes are what one kernel must still move: the spans of the storages it
reads from outside the group, and of those it writes that escape (read outside, returned,
or pre-existing), each counted once. The eager bytes over the fused bytes is the most
fusion can gain while the ops stay memory-bound. Groups with the same ops (the layers of a
model) are one row, counted.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from roofbench.bench.present.amdahl import roof_time
from roofbench.bench.profile.common import compute_dtype, precision_of, ridge_of
from roofbench.bench.profile.op_counts import TensorMeta, union_bytes

from roofbench.roof_records import RoofSet

if TYPE_CHECKING:
    from roofbench.bench.profile.report import Profile

FUSIBLE = {"element-wise", "normalisation", "reductions", "copies/layout"}


@dataclass
class Group:
    """One fusion group (its first occurrence's calls) and how often it occurs."""

    distinct: tuple[int, ...]  # the member ops (distinct indices), in program order
    calls: list[int]  # the first occurrence's call indices
    names: list[str]
    flops: int
    eager_bytes: int
    fused_bytes: int
    eager_s: float  # the members' medians summed: one occurrence, timed in the program
    precision: str
    count: int = 1
    occurrences: list[list[int]] = field(default_factory=list)

    @property
    def ratio(self) -> float:
        return self.eager_bytes / self.fused_bytes if self.fused_bytes else float("inf")

    @property
    def ai_eager(self) -> float | None:
        return self.flops / self.eager_bytes if self.eager_bytes else None

    @property
    def ai_fused(self) -> float | None:
        return self.flops / self.fused_bytes if self.fused_bytes else None

    def fused_roof_s(self, roofs: RoofSet | None) -> float | None:
        """One occurrence's time at the roofs with the fused bytes."""
        return roof_time(self.flops, {"dram": self.fused_bytes}, self.precision, roofs)

    def predicted_speedup(self, roofs: RoofSet | None,
                          launch_s: float | None = None) -> float | None:
        """The eager group's measured time (in the program) over the fused kernel's: its
        time at the roof plus one launch (``launch_s``, measured on this machine: the
        dispatch a fused kernel still pays); the most one fused kernel can gain here."""
        t = self.fused_roof_s(roofs)
        if t is None:
            return None
        t += launch_s or 0.0
        return self.eager_s / t if t else None

    def explained_speedup(self, launch_s: float | None = None) -> float | None:
        """The most fusion itself can gain: the eager group's time (in the program) over
        the same work with the fused bytes moved at the eager ops' own rate and their launches
        made one: (w + k L) / (w f + L), a mediant of the bytes ratio 1/f and the k calls
        made one, so never beyond the larger of them. What more a roof-speed kernel would
        gain is the eager ops' rate, not fusion."""
        if not self.eager_s or not self.eager_bytes:
            return None
        launch = launch_s or 0.0
        calls = len(self.distinct)  # one occurrence's calls (a member may run twice)
        work = max(self.eager_s - calls * launch, 0.0)
        fused = work * self.fused_bytes / self.eager_bytes + launch
        return self.eager_s / fused if fused > 0 else None

    def bounded_speedup(self, roofs: RoofSet | None,
                        launch_s: float | None = None) -> float | None:
        """The prediction shown: what bytes and launches explain (``explained_speedup``), and
        never more than the fused kernel at the roof allows (``predicted_speedup``)."""
        got = [v for v in (self.explained_speedup(launch_s),
                           self.predicted_speedup(roofs, launch_s)) if v is not None]
        return min(got) if got else None

    def predicted_compiled_s(self, roofs: RoofSet | None, call_s: float | None) -> float | None:
        """One occurrence replayed alone under torch.compile, predicted: the fused bytes at
        the roof plus a compiled call's own cost (``call_s``, measured on this machine: guards,
        the generated wrapper, the kernel's launch)."""
        t = self.fused_roof_s(roofs)
        return None if t is None else t + (call_s or 0.0)


def _memory_bound(p_flops: int, p_bytes: int, ridge: float | None) -> bool:
    if p_bytes == 0:
        return False
    return p_flops == 0 or ridge is None or p_flops / p_bytes < ridge


def fusion_groups(prof: Profile) -> list[Group]:
    rec = prof.recording
    by_op = {p.op.index: p for p in prof.ops}
    ok: dict[int, bool] = {}
    for p in prof.ops:
        ridge = ridge_of(prof.roofs, p.case.identity.precision)
        ok[p.op.index] = p.op.family in FUSIBLE and _memory_bound(p.op.flops, p.op.bytes,
                                                                 ridge)
    # Which call wrote the version of each storage a call reads; the readers of each
    # (writer, storage) version.
    last: dict[int, int] = {}
    source: dict[tuple[int, int], int] = {}  # (reader call, storage) -> writer call
    readers: dict[tuple[int, int], set[int]] = {}
    for c in rec.calls:
        for s in c.read:
            if s in last:
                source[(c.index, s)] = last[s]
                readers.setdefault((last[s], s), set()).add(c.index)
        for s in c.written:
            last[s] = c.index
    parent = list(range(len(rec.calls)))

    def find(i: int) -> int:
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = parent[i]
        return i

    for c in rec.calls:
        if not c.written or not ok.get(c.distinct):
            continue
        targets: set[int] = set()
        private = True
        for s in c.written:
            rs = readers.get((c.index, s), set())
            if s in rec.outputs or s in rec.inputs or len(rs) > 1:
                private = False
                break
            targets |= rs
        if private and len(targets) == 1:
            (t,) = targets
            if ok.get(rec.calls[t].distinct):
                parent[find(c.index)] = find(t)
    members: dict[int, list[int]] = {}
    for c in rec.calls:
        if c.written and ok.get(c.distinct):
            members.setdefault(find(c.index), []).append(c.index)
    rows: dict[tuple[int, ...], Group] = {}
    for calls in members.values():
        if len(calls) < 2:
            continue
        key = tuple(rec.calls[i].distinct for i in calls)
        if key in rows:
            rows[key].count += 1
            rows[key].occurrences.append(calls)
            continue
        inside = set(calls)
        ext_reads: list[TensorMeta] = []
        escapes: list[TensorMeta] = []
        for i in calls:
            c = rec.calls[i]
            ext_reads += [m for m in c.inputs if m.storage in c.read
                          and source.get((i, m.storage)) not in inside]
            for m in (*c.outputs, *c.inputs):
                if m.storage not in c.written:
                    continue
                outside = readers.get((i, m.storage), set()) - inside
                later = last.get(m.storage) == i  # the final version of that storage
                if outside or (later and (m.storage in rec.outputs
                                          or m.storage in rec.inputs)):
                    escapes.append(m)
        ops = [by_op[d] for d in key]
        rows[key] = Group(key, calls, [p.op.packet for p in ops],
                          sum(p.op.flops for p in ops), sum(p.op.bytes for p in ops),
                          # at most the eager ops' bytes: an indexed op (embedding) reads
                          # a few rows of an input the union would count whole
                          min(union_bytes(ext_reads) + union_bytes(escapes),
                              sum(p.op.bytes for p in ops)),
                          sum(p.case.measurement.median_s or 0.0 for p in ops),
                          # the members' compute dtype, not the first op's (an int64 index)
                          precision_of(compute_dtype([p.op for p in ops]), "element-wise",
                                       False), occurrences=[calls])
    return sorted(rows.values(), key=lambda g: -(g.eager_s * g.count))
