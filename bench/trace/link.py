"""Who did what in a trace: the nesting of the ops on each thread, the *units* the time is
charged to, and each piece of device work charged to the unit that launched it.

A unit is an op ``profile`` counts (``counts.is_counted_level``) with no unit above it, or a
compiled region (``CompiledFunction``, ``Torch-Compiled Region``): every kernel launched
inside one is charged to it, the aten ops inside it counted into it.

A kernel (memcpy, memset) reaches its launch by ``correlation`` (else by its ``ac2g`` flow),
the launch its op by the launch's ``External id`` where that names an op on the launch's
thread that encloses it, else by the launch's nesting inside the innermost op on its thread
(traces where a kernel's ``External id`` is its correlation id: HTA's sampled ranks, ROCm),
and last by the kernel's own ``External id`` naming an op. What reaches no op is listed,
with its time, as unclaimed. A communication kernel (NCCL, RCCL) is charged to no op,
whatever launched it (``comm.py``).
"""

from __future__ import annotations

import bisect
from collections import defaultdict
from dataclasses import dataclass, field

from roofbench.bench.trace.comm import is_comm
from roofbench.bench.trace.counts import is_compiled, is_counted_level
from roofbench.bench.trace.reader import Op, Trace

NEST_TOLERANCE_US = 0.01  # a child's end rounded past its parent's
SKEW_TOLERANCE_US = 1.0  # a kernel that starts this much before its launch: clocks apart


@dataclass
class Links:
    parent: list[int]  # per op, the op that encloses it on its thread (-1: top level)
    unit: list[int]  # per op, the unit it is part of (-1: none)
    top: list[int]  # ops with no parent
    work_unit: list[int]  # per device work item, the unit charged (-1: unclaimed)
    work_op: list[int]  # per device work item, the innermost op that launched it (-1)
    how: dict[str, int] = field(default_factory=dict)  # how each work item was linked
    early: int = 0  # work that starts before its launch (clock skew)
    worst_early_us: float = 0.0


def _contains(outer: Op, inner: Op) -> bool:
    end = outer.ts + outer.dur
    return inner.ts < end and inner.ts + inner.dur <= end + NEST_TOLERANCE_US


def nest(tr: Trace) -> tuple[list[int], list[int], dict[tuple[object, object], list[int]]]:
    """Each op's parent on its thread (intervals nest: the profiler's record functions), the
    top-level ops, and each thread's ops in time order (parents before their children)."""
    parent = [-1] * len(tr.ops)
    by_thread: dict[tuple[object, object], list[int]] = defaultdict(list)
    for i, o in enumerate(tr.ops):
        by_thread[(o.pid, o.tid)].append(i)
    top = []
    for idx in by_thread.values():
        idx.sort(key=lambda i: (tr.ops[i].ts, -tr.ops[i].dur))
        stack: list[int] = []
        for i in idx:
            o = tr.ops[i]
            while stack and not _contains(tr.ops[stack[-1]], o):
                stack.pop()
            if stack:
                parent[i] = stack[-1]
            else:
                top.append(i)
            stack.append(i)
    return parent, top, by_thread


def units(tr: Trace, parent: list[int], order: list[int]) -> list[int]:
    """Each op's unit (module doc); ``order`` puts parents before their children."""
    unit = [-1] * len(tr.ops)
    level: dict[tuple[str, int], bool] = {}
    for i in order:
        o = tr.ops[i]
        up = unit[parent[i]] if parent[i] >= 0 else -1
        if up >= 0:
            unit[i] = up
            continue
        if is_compiled(o.name):
            unit[i] = i
            continue
        key = (o.name, o.inputs)
        if key not in level:
            level[key] = is_counted_level(o.name, tr.inputs[o.inputs] if o.inputs >= 0
                                          else None)
        if level[key]:
            unit[i] = i
    # a compiled region inside a unit's op (rare) stays the unit's; an aten op inside a
    # compiled region belongs to the region (set above: the region came first)
    return unit


class _Enclosing:
    """The innermost op on a thread that encloses a time."""

    def __init__(self, tr: Trace, parent: list[int],
                 by_thread: dict[tuple[object, object], list[int]]) -> None:
        self.tr, self.parent = tr, parent
        self.starts = {k: ([tr.ops[i].ts for i in idx], idx) for k, idx in by_thread.items()}

    def at(self, pid: object, tid: object, ts: float) -> int:
        got = self.starts.get((pid, tid))
        if got is None:
            return -1
        ts_list, idx = got
        k = bisect.bisect_right(ts_list, ts) - 1
        if k < 0:
            return -1
        i = idx[k]
        while i >= 0 and self.tr.ops[i].ts + self.tr.ops[i].dur < ts:
            i = self.parent[i]
        return i


def link(tr: Trace) -> Links:
    parent, top, by_thread = nest(tr)
    unit = units(tr, parent, [i for idx in by_thread.values() for i in idx])
    enc = _Enclosing(tr, parent, by_thread)
    by_corr = {la.corr: k for k, la in enumerate(tr.launches) if la.corr is not None}
    by_pos = {(la.pid, la.tid, la.ts): k for k, la in enumerate(tr.launches)}
    flow_of_kernel = {end: fid for fid, end in tr.flow_f.items()}
    by_ext: dict[int, int] = {}
    for i, o in enumerate(tr.ops):
        if o.ext is not None:
            by_ext.setdefault(o.ext, i)
    work_unit, work_op = [-1] * len(tr.work), [-1] * len(tr.work)
    how: dict[str, int] = defaultdict(int)
    early, worst = 0, 0.0
    for w, k in enumerate(tr.work):
        li = by_corr.get(k.corr) if k.corr is not None else None
        if li is None:  # by its ac2g flow: the kernel's end of the flow names the launch's
            fid = flow_of_kernel.get((k.device, k.stream, k.ts))
            s = tr.flow_s.get(fid) if fid is not None else None
            li = by_pos.get(s) if s is not None else None
        op = -1
        if li is not None:
            la = tr.launches[li]
            if la.ts - k.ts > SKEW_TOLERANCE_US:
                early += 1
                worst = max(worst, la.ts - k.ts)
            cand = by_ext.get(la.ext) if la.ext is not None else None
            if cand is not None and (tr.ops[cand].pid, tr.ops[cand].tid) == (la.pid, la.tid) \
                    and tr.ops[cand].ts <= la.ts <= tr.ops[cand].ts + tr.ops[cand].dur:
                op, h = cand, "External id"
            else:
                op, h = enc.at(la.pid, la.tid, la.ts), "nesting"
        elif k.ext is not None and k.ext in by_ext:
            op, h = by_ext[k.ext], "External id (kernel)"
        else:
            h = "missing"
        if op < 0 and h != "missing":
            h = "no op around the launch"
        how[h] += 1
        work_op[w] = op
        # communication is never an op's work (comm.py): it is placed on its own
        work_unit[w] = unit[op] if op >= 0 and not (k.comm or is_comm(k.name)) else -1
    return Links(parent, unit, top, work_unit, work_op, dict(how), early, worst)
