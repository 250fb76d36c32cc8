"""The distributed roofline: a tensor-parallel GEMM bounded by compute, HBM and the link.

attainable = min(P_peak, B_hbm x AI_hbm, B_link x AI_link), AI_link = FLOPs / bytes communicated.

GEMM C = A B with A (M x K) and B (K x N), B being the weight split over p GPUs (Megatron's
names for the two ways of splitting a linear layer):

- ``column`` split: B split by columns, N/p per GPU. Each GPU computes C[:, N/p] = A B_j from the
  whole A; the output shards are all-gathered. Per GPU: 2MNK/p FLOPs, HBM (MK + KN/p + MN/p)
  elements, link (p-1)/p x MN elements (the ring all-gather's bus bytes).
- ``row`` split: K split, A by columns and B by rows, K/p per GPU. Each GPU computes a partial
  C_j = A_j B_j of the whole output; the partials are all-reduced. Per GPU: 2MNK/p FLOPs, HBM
  (MK/p + KN/p + MN) elements, link 2(p-1)/p x MN elements (the ring all-reduce's bus bytes).

The link bytes are exactly what nccl-tests' bus bandwidth counts, so a measured busbw roof
(interconnect.py) divides them into a time without another factor. HBM bytes are the minimum
traffic (each operand read once, the output written once), as everywhere in roofbench. The min()
assumes perfect overlap of compute, memory and communication: it is a ceiling, not a forecast.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from typing import Any, Literal, TypedDict

from roofbench.roof_records import Roof, RoofSet
from roofbench.units import si

Split = Literal["single", "column", "row"]

ITEMSIZE = {"fp64": 8, "fp32": 4, "tf32": 4, "bf16": 2, "fp16": 2, "fp8": 1}

# Which measured interconnect roof stands for the link, per split, best match first: the
# collective the split really runs, then the others (a p2p figure is one direction of a link).
LINK_PREFERENCE: dict[str, tuple[str, ...]] = {
    "row": ("nccl_allreduce", "mpi_allreduce", "nccl_reducescatter", "nccl_allgather",
            "gpu_p2p", "mpi_p2p", "link"),
    "column": ("nccl_allgather", "nccl_allreduce", "mpi_allreduce", "nccl_reducescatter",
               "gpu_p2p", "mpi_p2p", "link"),
}


class BookCase(TypedDict):
    """The book's worked example (BOOK below)."""

    peak: float  # FLOP/s
    hbm: float  # B/s
    link: float  # B/s
    precision: str
    dtype: str
    m: int
    n: int
    k: int
    peak_source: str


# The book's example (実践的パフォーマンスエンジニアリングによるAI高速化 §2.3.5 case B) gives
# the two bandwidths: link 0.6 TB/s in place of HBM 2 TB/s. It names no compute peak; we
# take the A100 SXM's dense BF16 tensor figure (datasheet.SPECS: NVIDIA A100 Tensor Core GPU
# Datasheet, 2021; 624 with sparsity, 312 dense), the GPU those
# two figures describe (HBM2e ~2 TB/s, NVLink3 600 GB/s both directions). The GEMM is our
# choice: square n = 1024 in BF16, intensity 1024/3 = 341.3 FLOP/byte, between the two
# ridges (156 and 520).
BOOK: BookCase = {
    "peak": 312e12, "hbm": 2.0e12, "link": 0.6e12, "precision": "bf16_tc", "dtype": "bf16",
    "m": 1024, "n": 1024, "k": 1024,
    "peak_source": "assumed: A100 SXM dense BF16 tensor 312 TFLOP/s (datasheet); "
                   "the book gives only the bandwidths"}


@dataclass
class TPPoint:
    """One GEMM on one split over p GPUs, with its per-GPU accounting and its bound."""

    split: Split
    p: int
    m: int
    n: int
    k: int
    dtype: str
    collective: str | None  # "allgather", "allreduce" or None on one GPU
    flops_per_gpu: float
    hbm_bytes_per_gpu: float
    link_bytes_per_gpu: float  # bus bytes one GPU sends (and receives) per step
    ai_hbm: float
    ai_link: float  # inf on one GPU
    attainable_per_gpu: float = 0.0  # FLOP/s
    bound: str = ""  # "compute", "memory" or "interconnect"
    roof: str = ""  # name of the limiting roof

    @property
    def attainable_total(self) -> float:
        return self.attainable_per_gpu * self.p

    @property
    def step_time_s(self) -> float:
        """Lower bound on one GEMM's time at the attainable rate."""
        return self.flops_per_gpu / self.attainable_per_gpu if self.attainable_per_gpu else math.inf

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["attainable_total"] = self.attainable_total
        d["step_time_s"] = self.step_time_s
        return d


def tp_gemm_counts(m: int, n: int, k: int, p: int, split: Split, dtype: str = "bf16"
                   ) -> TPPoint:
    """FLOPs and bytes per GPU for one tensor-parallel GEMM (no bound yet)."""
    if min(m, n, k, p) < 1:
        raise ValueError("m, n, k and p must be >= 1")
    if dtype not in ITEMSIZE:
        raise ValueError(f"unknown dtype {dtype!r}; choose from {', '.join(ITEMSIZE)}")
    b = ITEMSIZE[dtype]
    flops = 2.0 * m * n * k / p
    hbm: float
    if split == "single" or p == 1:
        split, p, coll = "single", 1, None
        hbm = (m * k + k * n + m * n) * b
        link = 0.0
        flops = 2.0 * m * n * k
    elif split == "column":
        coll = "allgather"
        hbm = (m * k + k * n / p + m * n / p) * b
        link = (p - 1) / p * m * n * b
    elif split == "row":
        coll = "allreduce"
        hbm = (m * k / p + k * n / p + m * n) * b
        link = 2.0 * (p - 1) / p * m * n * b
    else:
        raise ValueError(f"unknown split {split!r}; choose from single, column, row")
    return TPPoint(split=split, p=p, m=m, n=n, k=k, dtype=dtype, collective=coll,
                   flops_per_gpu=flops, hbm_bytes_per_gpu=hbm, link_bytes_per_gpu=link,
                   ai_hbm=flops / hbm, ai_link=flops / link if link > 0 else math.inf)


@dataclass
class TPRoofs:
    """The three roofs the model uses, with where each came from."""

    roofs: RoofSet
    precision: str
    provenance: dict[str, str] = field(default_factory=dict)  # compute/hbm/link -> sentence

    @property
    def peak(self) -> float:
        c = self.roofs.compute(self.precision)
        return c.value if c else math.nan

    @property
    def hbm(self) -> float:
        m = self.roofs.memory("dram")
        return m.value if m else math.nan

    @property
    def link(self) -> float:
        r = self.roofs.interconnect("link")
        return r.value if r else math.nan

    def ridges(self) -> dict[str, float]:
        """Ridge points (FLOP/byte): the HBM roof's and the link roof's."""
        return {"hbm": self.peak / self.hbm, "link": self.peak / self.link}


def _describe(r: Roof, origin: str) -> str:
    return f"{r.source} {r.name!r} {si(r.value, r.unit)}" + (f" from {origin}" if origin else "")


def _pick(out: RoofSet, prov: dict[str, str], ignored: list[str], what: str, flag: str, *,
          found: tuple[Roof, str] | None, given: Roof | None, missing: str,
          given_note: str = "") -> None:
    """One of the three roofs: the measured one (with how it is described) when there is one,
    else the user-given figure; a user figure beside a measured roof is noted as ignored."""
    if found is not None:
        out.add(found[0])
        prov[what] = found[1]
        if given is not None:
            ignored.append(flag)
    elif given is not None:
        out.add(given)
        prov[what] = f"user-given {flag} {si(given.value, given.unit)}{given_note}"
    else:
        raise KeyError(missing)


def resolve_roofs(precision: str, split: str = "row", measured: RoofSet | None = None,
                  origin: str = "", peak: float | None = None, hbm: float | None = None,
                  link: float | None = None) -> TPRoofs:
    """Pick the compute, HBM and link roofs: measured ones from ``measured`` when present,
    else the user-given figures. Raises KeyError naming what is missing."""
    out = RoofSet(device=measured.device if measured else "model")
    prov: dict[str, str] = {}
    ignored: list[str] = []

    c = measured.compute(precision) if measured else None
    _pick(out, prov, ignored, "compute", "--peak",
          found=None if c is None else (Roof(c.name, "compute", c.value, c.source,
                                             precision=precision, evidence=c.evidence),
                                        _describe(c, origin)),
          given=None if peak is None else Roof("peak (user)", "compute", peak, "user",
                                               precision=precision),
          missing=f"no {precision} compute roof: pass --peak or --roofs with one")

    m = measured.memory("dram") if measured else None
    _pick(out, prov, ignored, "hbm", "--hbm-bw",
          found=None if m is None else (Roof(m.name, "memory", m.value, m.source, level="dram",
                                             evidence=m.evidence), _describe(m, origin)),
          given=None if hbm is None else Roof("HBM (user)", "memory", hbm, "user", level="dram"),
          missing="no HBM/DRAM roof: pass --hbm-bw or --roofs with one")

    lk = None
    if measured is not None:
        for level in LINK_PREFERENCE.get(split, LINK_PREFERENCE["row"]):
            lk = measured.interconnect(level, source="measured")
            if lk is not None:
                break
    _pick(out, prov, ignored, "link", "--link-bw",
          found=None if lk is None else (
              Roof(lk.name, "interconnect", lk.value, lk.source, level="link",
                   evidence={**lk.evidence, "measured_level": lk.level}),
              f"measured {lk.level} roof {si(lk.value, 'B/s')}"
              + (f" from {origin}" if origin else "")),
          given=None if link is None else Roof("link (user)", "interconnect", link, "user",
                                               level="link"),
          given_note=" (no measured link roof)",
          missing="no link bandwidth: pass --link-bw, or --roofs with a measured "
                  "interconnect roof (mpirun -n 2 roofbench fleet links --out DIR)")
    if ignored:
        prov["note"] = f"{', '.join(ignored)} ignored: measured roofs take precedence"
    return TPRoofs(roofs=out, precision=precision, provenance=prov)


def bound_point(pt: TPPoint, roofs: TPRoofs) -> TPPoint:
    """Fill in the attainable rate and the limiting roof (RoofSet.bound does the min)."""
    b = roofs.roofs.bound({"dram": pt.ai_hbm}, roofs.precision,
                          link_intensities={"link": pt.ai_link})
    pt.attainable_per_gpu, pt.bound, pt.roof = b.attainable, b.limiter, b.roof
    return pt


def tp_table(m: int, n: int, k: int, ps: list[int], splits: list[Split], dtype: str,
             roofs: TPRoofs) -> list[TPPoint]:
    """The single-GPU GEMM first, then every (split, p > 1)."""
    rows = [bound_point(tp_gemm_counts(m, n, k, 1, "single", dtype), roofs)]
    for split in splits:
        for p in ps:
            if p > 1:
                rows.append(bound_point(tp_gemm_counts(m, n, k, p, split, dtype), roofs))
    return rows


@dataclass
class RidgeShift:
    """The book's point: the same intensity against the HBM roof and against the link roof."""

    peak: float
    hbm: float
    link: float
    ai: float
    ridge_hbm: float
    ridge_link: float
    attainable_hbm: float
    attainable_link: float
    bound_hbm: str
    bound_link: str


def ridge_shift(peak: float, hbm: float, link: float, ai: float) -> RidgeShift:
    """When the bytes must cross the link instead of HBM, the ridge moves from peak/hbm to
    peak/link, and a point between the two turns from compute- to bandwidth-bound."""
    a_h, a_l = min(peak, hbm * ai), min(peak, link * ai)
    return RidgeShift(peak=peak, hbm=hbm, link=link, ai=ai, ridge_hbm=peak / hbm,
                      ridge_link=peak / link, attainable_hbm=a_h, attainable_link=a_l,
                      bound_hbm="compute" if a_h >= peak else "bandwidth",
                      bound_link="compute" if a_l >= peak else "bandwidth")


def book_example() -> tuple[RidgeShift, TPRoofs, list[TPPoint]]:
    """The book's case B: ridge 156 -> 520 FLOP/byte; a 1024^3 BF16 GEMM (341 FLOP/byte)
    compute-bound on one GPU becomes link-bound, and so does its row split over 2 GPUs."""
    bk = BOOK
    pt = tp_gemm_counts(bk["m"], bk["n"], bk["k"], 1, "single", bk["dtype"])
    shift = ridge_shift(bk["peak"], bk["hbm"], bk["link"], pt.ai_hbm)
    roofs = resolve_roofs(bk["precision"], peak=bk["peak"], hbm=bk["hbm"], link=bk["link"])
    roofs.provenance["compute"] = bk["peak_source"]
    roofs.provenance["hbm"] = "book: HBM 2 TB/s"
    roofs.provenance["link"] = "book: intra-node link 0.6 TB/s"
    rows = tp_table(bk["m"], bk["n"], bk["k"], [2, 4], ["row", "column"], bk["dtype"], roofs)
    return shift, roofs, rows
