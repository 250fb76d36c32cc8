"""The cache level each op's data comes from.

In the program: the bytes the program touches between two uses of a storage (its reuse
distance: every op's bytes summed since the storage was last touched, plus the reading op's
own; a storage the program found already there, a weight, was last touched one whole run
before, so its distance is the program's working set; never more than that). Distances
over-count data touched twice in between, so a level is never chosen faster than the
data's; an op's level is that of its largest read, its median call. Alone: the op's own
bytes, as ``measure()`` places a case (``roofline.place``).
"""

from __future__ import annotations

import statistics

from roofbench.bench.profile.recording import Recording


def storage_sizes(rec: Recording) -> dict[int, int]:
    """Bytes of each storage the program touched (the end of its furthest span)."""
    size: dict[int, int] = {}
    for c in rec.calls:
        for m in (*c.inputs, *c.outputs):
            size[m.storage] = max(size.get(m.storage, 0), m.span()[1])
    return size


def program_working_set(rec: Recording) -> int:
    """Bytes of every storage the program touches, each once."""
    return sum(storage_sizes(rec).values())


def reuse_distances(rec: Recording) -> dict[int, int]:
    """Per distinct op, the reuse distance of its largest read (median over its calls)."""
    whole = program_working_set(rec)
    cum = 0
    last: dict[int, int] = {}
    by_op: dict[int, list[int]] = {}
    for c in rec.calls:
        d = rec.distinct[c.distinct]
        reads = [m for m in c.inputs if m.storage in c.read]
        if reads:
            big = max(reads, key=lambda m: m.span()[1] - m.span()[0])
            gap = cum - last[big.storage] if big.storage in last else whole
            by_op.setdefault(c.distinct, []).append(min(whole, gap + d.bytes))
        cum += d.bytes
        for m in (*c.inputs, *c.outputs):
            last[m.storage] = cum
    return {k: int(statistics.median(v)) for k, v in by_op.items()}
