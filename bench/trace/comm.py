"""Communication kernels (NCCL's ``ncclKernel_*``/``ncclDevKernel_*``, RCCL's) in a trace:
never charged to an op nor held against a memory roof (they move bytes over a link, not
through DRAM); placed on the interconnect roof where one is *measured*, else listed as
communication time with no roof named.

Bytes: torch records each collective (``reader.Comm``: on the kernel, else on the
``record_param_comms`` op that launched it). A call's bus bytes are nccl-tests' (its
PERFORMANCE.md): the message (the larger of its elements in and out, times the dtype's size)
times the collective's bus factor for its group of n (all-reduce 2(n-1)/n; all-gather,
reduce-scatter, all-to-all, gather, scatter (n-1)/n; broadcast, reduce, send, recv 1), so
bus bytes over the kernel's own duration is the bus bandwidth the interconnect roofs
(``roofs/probes/gpu_links.py``: nccl-tests' busbw) are measured in. The roof is the measured
one of the same collective, else the next that ``roofs/distributed.py`` would take for the
link (``LINK_PREFERENCE``); which one is named in the row.
"""

from __future__ import annotations

import re
import statistics
from dataclasses import dataclass, field
from typing import Any

from roofbench.bench.measure.above_roof import ABOVE
from roofbench.bench.trace.reader import Comm
from roofbench.roofs.distributed import LINK_PREFERENCE

from roofbench.roof_records import Roof, RoofSet

PREFIXES = ("nccl", "rccl")
# c10's ScalarType names, as torch writes a collective's dtype
ITEMSIZE = {"Byte": 1, "Char": 1, "Short": 2, "Int": 4, "Long": 8, "Half": 2, "Float": 4,
            "Double": 8, "ComplexHalf": 4, "ComplexFloat": 8, "ComplexDouble": 16, "Bool": 1,
            "BFloat16": 2, "Float8_e5m2": 1, "Float8_e4m3fn": 1, "Float8_e5m2fnuz": 1,
            "Float8_e4m3fnuz": 1, "UInt16": 2, "UInt32": 4, "UInt64": 8}
# the collective a name says (torch's "Collective name", or the kernel's), and its bus factor
KINDS = (("allreduce", lambda n: 2 * (n - 1) / n), ("allgather", lambda n: (n - 1) / n),
         ("reducescatter", lambda n: (n - 1) / n), ("alltoall", lambda n: (n - 1) / n),
         ("broadcast", lambda n: 1.0), ("reduce", lambda n: 1.0),
         ("gather", lambda n: (n - 1) / n), ("scatter", lambda n: (n - 1) / n),
         ("sendrecv", lambda n: 1.0), ("send", lambda n: 1.0), ("recv", lambda n: 1.0))
P2P = ("gpu_p2p", "mpi_p2p", "link")
ROOF_FOR = {"allreduce": LINK_PREFERENCE["row"], "allgather": LINK_PREFERENCE["column"],
            "reducescatter": ("nccl_reducescatter", *LINK_PREFERENCE["row"])}


def is_comm(name: str) -> bool:
    return name.lower().startswith(PREFIXES)


def collective(name: str) -> str | None:
    """"allreduce", "allgather", ... from a collective's or a kernel's name; None: unknown
    (a barrier moves no data: None too)."""
    key = re.sub(r"[^a-z]", "", name.lower().split("(")[0])
    if "barrier" in key:
        return None
    for kind, _ in KINDS:
        if kind in key:
            return kind
    return None


def bus_bytes(c: Comm, kind: str | None) -> tuple[int | None, str]:
    """A call's bus bytes, or None and why not."""
    if kind is None:
        return None, f"collective {c.name!r}: no bus bytes (a barrier, or not known)"
    size = ITEMSIZE.get(c.dtype or "")
    elems = max(x for x in (c.in_nelems, c.out_nelems, 0) if x is not None)
    if size is None or not elems or not c.group:
        return None, "its message size, dtype or group size is not in the trace"
    factor = dict(KINDS)[kind](c.group) if c.group > 1 else 1.0
    return int(elems * size * factor), ""


def link_roof(rs: RoofSet | None, kind: str | None) -> Roof | None:
    """The measured interconnect roof a collective of ``kind`` meets (module doc)."""
    if rs is None:
        return None
    order = ROOF_FOR.get(kind or "", (*P2P, *LINK_PREFERENCE["row"]))
    for level in dict.fromkeys(order):
        r = rs.interconnect(level, source="measured")
        if r is not None:
            return r
    return None


@dataclass
class CommStat:
    """One kind of communication call: kernel, collective, bus bytes per call, group."""

    kernel: str
    collective: str | None
    bus_bytes: int | None
    group: int | None
    dtype: str | None
    why: str = ""  # why no bytes
    times_s: list[float] = field(default_factory=list)  # each call's kernel duration

    @property
    def total_s(self) -> float:
        return sum(self.times_s)


def comm_stat_key(kernel: str, c: Comm | None) -> tuple[Any, ...]:
    return (kernel.split("(")[0], c)


def new_stat(kernel: str, c: Comm | None) -> CommStat:
    short = kernel.split("(")[0]
    if c is None:
        return CommStat(short, collective(short), None, None, None,
                        "torch recorded no collective for it (no message size)")
    kind = collective(c.name) or collective(short)
    nbytes, why = bus_bytes(c, kind)
    return CommStat(short, kind, nbytes, c.group, c.dtype, why)


def placed_row(st: CommStat, rs: RoofSet | None) -> dict[str, Any]:
    """A row of the report and of results.json: the calls' time, their median bus bandwidth
    and its share of the measured interconnect roof, or why none is named."""
    row: dict[str, Any] = {"kernel": st.kernel, "collective": st.collective,
                           "calls": len(st.times_s), "time_s": st.total_s,
                           "bus_bytes_per_call": st.bus_bytes, "group": st.group,
                           "dtype": st.dtype, "bus_bytes_per_s": None, "roof": None,
                           "efficiency": None, "status": "not placed"}
    if st.bus_bytes is None:
        row["why"] = st.why
        return row
    med = statistics.median(st.times_s) if st.times_s else 0.0
    if med <= 0:
        row["why"] = "no time in the trace"
        return row
    row["bus_bytes_per_s"] = st.bus_bytes / med
    roof = link_roof(rs, st.collective)
    if roof is None:
        row["why"] = "no interconnect roof measured: communication time, no roof named"
        return row
    eff = row["bus_bytes_per_s"] / roof.value
    row.update(roof=roof.name, roof_level=roof.level, roof_bytes_per_s=roof.value,
               efficiency=eff, status="ok")
    if eff > ABOVE:
        row["status"] = "invalid"
        row["why"] = (f"{eff:.0%} of {roof.name}, above its roof: likely cause: the roof was "
                      "measured on another link or group, or the message sizes are not the "
                      "kernel's")
    return row
