"""A trace's ops counted and timed: one ``OpStat`` per distinct unit (op name and recorded
inputs; a compiled region by name), merged over ranks, with every call's time.

Times (microseconds in the trace, seconds here):

- CPU trace (no device work): a unit's call takes its event's duration. The trace's op time
  is the top-level ops' durations summed over threads (ops on one thread nest, so nothing is
  counted twice); what no unit claims is the composite ops' own time around the units they
  call (``aten::matmul`` around ``aten::mm``), autograd's nodes, ops no rule counts.
- GPU trace: a unit's call takes the device time of the work charged to it. Work on
  several streams at once is not counted twice: each instant a device is busy is shared
  equally among the calls (and the unclaimed work) running then, so the calls' times and
  the unclaimed time sum to the device's busy time. Communication kernels are unclaimed
  ("communication: ..."), and listed apart with their own durations (``comm.py``).
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any

from roofbench.bench.profile.recording import Distinct
from roofbench.bench.trace.comm import CommStat, comm_stat_key, is_comm, new_stat
from roofbench.bench.trace.counts import Counted, count, is_compiled, is_counted_level
from roofbench.bench.trace.link import Links, link
from roofbench.bench.trace.reader import Inputs, Trace

US = 1e-6


@dataclass
class OpStat:
    """One distinct unit of the trace(s): its counts (one call) and each call's seconds."""

    name: str
    inputs: Inputs | None
    counted: Counted
    times_s: list[float] = field(default_factory=list)
    kernels: int = 0  # device work items charged, over all calls
    kernel_names: dict[str, float] = field(default_factory=dict)  # name -> seconds
    compiled: bool = False

    @property
    def calls(self) -> int:
        return len(self.times_s)

    @property
    def total_s(self) -> float:
        return sum(self.times_s)


@dataclass
class Analysis:
    files: list[str]
    gpu: bool
    device: dict[str, Any] | None  # the first rank's deviceProperties[0]
    ops: list[OpStat]
    trace_s: float  # CPU: the top-level ops' time; GPU: the devices' busy time
    unclaimed: dict[str, float]  # what no unit claims, by name, seconds
    steps: list[dict[str, Any]]
    ranks: list[dict[str, Any]]
    links: dict[str, int]
    notes: list[str] = field(default_factory=list)
    has_shapes: bool = True
    uncounted_kernels: dict[str, float] = field(default_factory=dict)
    comm: list[CommStat] = field(default_factory=list)  # NCCL/RCCL kernels (comm.py)

    @property
    def ops_s(self) -> float:
        return sum(o.total_s for o in self.ops)

    @property
    def unclaimed_s(self) -> float:
        return sum(self.unclaimed.values())


def device_shares(tr: Trace, owner: list[int]) -> dict[int, float]:
    """Seconds of device time per owner (a unit's call; -(w+1) for unclaimed work ``w``):
    each busy instant split equally among the owners running then (module doc)."""
    out: dict[int, float] = defaultdict(float)
    by_dev: dict[Any, list[tuple[float, int, int]]] = defaultdict(list)
    for w, k in enumerate(tr.work):
        if k.dur <= 0:
            continue
        o = owner[w] if owner[w] >= 0 else -(w + 1)
        by_dev[k.device].append((k.ts, 1, o))
        by_dev[k.device].append((k.ts + k.dur, -1, o))
    for evs in by_dev.values():
        evs.sort(key=lambda e: (e[0], e[1]))  # ends before starts at one instant
        active: dict[int, int] = {}
        last = evs[0][0]
        for t, d, o in evs:
            if active and t > last:
                part = (t - last) * US / len(active)
                for a in active:
                    out[a] += part
            last = t
            if d > 0:
                active[o] = active.get(o, 0) + 1
            else:
                n = active[o] - 1
                if n:
                    active[o] = n
                else:
                    del active[o]
    return out


def analyse(traces: list[Trace]) -> Analysis:
    stats: dict[tuple[str, Inputs | None], OpStat] = {}
    unclaimed: dict[str, float] = defaultdict(float)
    steps: list[dict[str, Any]] = []
    ranks: list[dict[str, Any]] = []
    how: dict[str, int] = defaultdict(int)
    notes: list[str] = []
    gpu = any(tr.work for tr in traces)
    trace_s = 0.0
    comm: dict[tuple[Any, ...], CommStat] = {}
    default_dtype = "float32"
    for r, tr in enumerate(traces):
        ln = link(tr)
        for h, n in ln.how.items():
            how[h] += n
        if ln.early:
            notes.append(f"{tr.path.name}: {ln.early} piece(s) of device work start before "
                         f"their launch (by up to {ln.worst_early_us:.0f} us): the CPU and "
                         "GPU clocks of this trace disagree; links by correlation and times "
                         "on the device are unaffected, steps are taken from the launches")
        _comm_calls(tr, ln, comm)
        unit_s, lost = _unit_times(tr, ln, gpu)
        for what, secs in lost.items():
            unclaimed[what] += secs
        rank_s = sum(unit_s.values())
        busy = rank_s + sum(lost.values()) if gpu else _top_time(tr, ln)
        trace_s += busy
        kernels_by_unit: dict[int, list[int]] = defaultdict(list)
        for w, u in enumerate(ln.work_unit):
            if u >= 0:
                kernels_by_unit[u].append(w)
        step_s: dict[str, float] = defaultdict(float)
        starts = sorted((s.ts, s.ts + s.dur, s.name) for s in tr.steps)
        for u, secs in unit_s.items():
            o = tr.ops[u]
            rec = tr.inputs[o.inputs] if o.inputs >= 0 else None
            key = (o.name, rec)
            st = stats.get(key)
            if st is None:
                st = stats[key] = OpStat(o.name, rec, _count(tr, ln, u, rec, default_dtype),
                                         compiled=is_compiled(o.name))
            st.times_s.append(secs)
            for w in kernels_by_unit.get(u, []):
                st.kernels += 1
                kw = tr.work[w]
                st.kernel_names[kw.name] = st.kernel_names.get(kw.name, 0.0) + kw.dur * US
            for a, b, name in starts:
                if a <= o.ts <= b:
                    step_s[name] += secs
                    break
        for name, secs in step_s.items():
            steps.append({"rank": tr.rank if tr.rank is not None else r, "step": name,
                          "ops_s": secs})
        ranks.append({"file": str(tr.path), "rank": tr.rank if tr.rank is not None else r,
                      "events": tr.events, "ops": len(tr.ops), "device_work": len(tr.work),
                      "ops_s": rank_s, "trace_s": busy})
    _fill_compiled(stats)
    ops = sorted(stats.values(), key=lambda s: -s.total_s)
    first = next((tr.devices[0] for tr in traces if tr.devices), None)
    uncounted_k: dict[str, float] = defaultdict(float)
    for st in ops:
        if st.counted.distinct is None and st.kernel_names:
            for kname, secs in st.kernel_names.items():
                uncounted_k[kname] += secs
    return Analysis([str(tr.path) for tr in traces], gpu, first, ops, trace_s,
                    dict(unclaimed), steps, ranks, dict(how), notes,
                    any(tr.has_shapes for tr in traces), dict(uncounted_k),
                    sorted(comm.values(), key=lambda c: -c.total_s))


def _comm_calls(tr: Trace, ln: Links, out: dict[tuple[Any, ...], CommStat]) -> None:
    """Each communication kernel's call, with the collective torch recorded for it: on the
    kernel, else on the op that launched it or one around that op."""
    for w, k in enumerate(tr.work):
        if k.kind != "kernel" or not (k.comm or is_comm(k.name)):
            continue
        c, i = k.comm, ln.work_op[w]
        while c is None and i >= 0:
            c, i = tr.ops[i].comm, ln.parent[i]
        key = comm_stat_key(k.name, c)
        st = out.get(key)
        if st is None:
            st = out[key] = new_stat(k.name, c)
        st.times_s.append(k.dur * US)


def _unit_times(tr: Trace, ln: Links, gpu: bool) -> tuple[dict[int, float],
                                                         dict[str, float]]:
    """Seconds of each unit call (by the op index of the call) of one trace, and the time
    no unit claims, by name."""
    unclaimed: dict[str, float] = defaultdict(float)
    if not gpu:
        out = {i: tr.ops[i].dur * US for i, u in enumerate(ln.unit) if u == i}
        inside: dict[int, float] = defaultdict(float)
        for i in out:  # the top-level op each unit sits in
            t = i
            while ln.parent[t] >= 0:
                t = ln.parent[t]
            inside[t] += out[i]
        for t in ln.top:
            rest = tr.ops[t].dur * US - inside.get(t, 0.0)
            if rest > 0:
                name = f"{tr.ops[t].name} (outside the counted ops)"
                unclaimed[name] += rest
        return out, unclaimed
    shares = device_shares(tr, ln.work_unit)
    out = {o: s for o, s in shares.items() if o >= 0}
    for o, s in shares.items():
        if o < 0:
            k = tr.work[-o - 1]
            if k.comm or is_comm(k.name):
                unclaimed[f"communication: {k.name[:60]}"] += s
                continue
            name = f"{k.kind}: {k.name[:60]}" + (" (its op is missing)"
                                                 if ln.work_op[-o - 1] < 0 else "")
            unclaimed[name] += s
    return out, unclaimed


def _top_time(tr: Trace, ln: Links) -> float:
    return sum(tr.ops[t].dur for t in ln.top) * US


def _count(tr: Trace, ln: Links, u: int, rec: Inputs | None, default_dtype: str) -> Counted:
    """A unit's counts: an aten op's by ``counts.count``; a compiled region's from the aten
    ops inside it and Inductor's ``kernel_flop``/``kernel_num_gb`` (``_fill_compiled``)."""
    o = tr.ops[u]
    if not is_compiled(o.name):
        return count(o.name, rec, default_dtype)
    return Counted(None, "compiled region: " + _region_counts(tr, ln, u))


def _region_counts(tr: Trace, ln: Links, u: int) -> str:
    """The counts of a compiled region's call, encoded for ``_fill_compiled``: the aten ops
    inside it, and the Inductor counts of its kernels (or how many kernels had none)."""
    flops, nbytes, missing = 0.0, 0.0, 0
    for i, un in enumerate(ln.unit):
        if un != u or i == u:
            continue
        o = tr.ops[i]
        if o.inductor is not None:
            flops += o.inductor[0]
            nbytes += o.inductor[1] * 1e9
        elif not _under_aten(tr, ln, i, u) and is_counted_level(
                o.name, rec := tr.inputs[o.inputs] if o.inputs >= 0 else None):
            c = count(o.name, rec)
            if c.distinct is not None:
                flops += c.distinct.flops
                nbytes += c.distinct.bytes
    for w, un in enumerate(ln.work_unit):
        if un != u or tr.work[w].kind != "kernel":
            continue
        k = tr.work[w]
        if k.inductor is not None:
            flops += k.inductor[0]
            nbytes += k.inductor[1] * 1e9
        elif not _aten_launched(tr, ln, w, u):
            missing += 1
    return f"{flops:.0f} {nbytes:.0f} {missing}"


def _under_aten(tr: Trace, ln: Links, i: int, region: int) -> bool:
    p = ln.parent[i]
    while p >= 0 and p != region:
        if tr.ops[p].name.startswith("aten::"):
            return True
        p = ln.parent[p]
    return False


def _aten_launched(tr: Trace, ln: Links, w: int, region: int) -> bool:
    i = ln.work_op[w]
    while i >= 0 and i != region:
        if tr.ops[i].name.startswith("aten::") or tr.ops[i].inductor is not None:
            return True
        i = ln.parent[i]
    return False


def _fill_compiled(stats: dict[tuple[str, Inputs | None], OpStat]) -> None:
    """A compiled region counted when every kernel it ran is: else uncounted, said why."""
    for st in stats.values():
        why = st.counted.why
        if not st.compiled or not why.startswith("compiled region: "):
            continue
        fl, nb, missing = why.removeprefix("compiled region: ").split()
        if int(missing) or (float(fl) == 0 and float(nb) == 0):
            st.counted = Counted(None, f"compiled region: {missing} generated kernel(s) carry "
                                       "no kernel_flop/kernel_num_gb (not counted)")
            continue
        d = Distinct(0, st.name, st.name, "compiled region", int(float(fl)),
                     "Inductor's kernel_flop + the aten ops inside", int(float(nb)), 0,
                     "-", dtype="float32", device="cuda")
        st.counted = Counted(d)
