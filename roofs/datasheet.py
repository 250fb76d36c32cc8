"""Datasheet peaks of known GPUs (dense figures, each entry citing the vendor document it comes
from) and theoretical peaks derived from a device's own facts.

Datasheet figures are leads, not measurements. Matching a device to an entry uses name tokens
plus SM count and memory size, never an exact marketing string: "NVIDIA H100 80GB HBM3" with
132 SMs is the SXM part, "NVIDIA H100 PCIe" (114 SMs) the PCIe part, and a part whose figures
differ from every entry (H100 NVL, A100 40GB, GH200...) matches nothing rather than the wrong one.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from roofbench.roof_records import Roof

TB = 1e12
GB = 1e9
# Written into the evidence of every datasheet roof (beside the entry's own ``source``). A stored
# run keeps the label it was written with: its figures are the table of its commit.
TABLE_SOURCE = "roofbench datasheet table (roofs/datasheet.py), vendor peaks (dense)"

# (precision, field name, label) of the compute columns.
_COMPUTE_FIELDS = (
    ("fp64", "fp64", "FP64"),
    ("fp64_tc", "fp64_tc", "FP64 tensor"),
    ("fp32", "fp32", "FP32"),
    ("bf16_tc", "bf16_tc", "BF16 tensor"),
    ("fp16_tc", "fp16_tc", "FP16 tensor"),
    ("fp8_tc", "fp8_tc", "FP8 tensor"),
)


@dataclass(frozen=True)
class GpuSpec:
    """One row of the datasheet table. Compute figures in TFLOP/s, HBM in TB/s, None = not given."""

    key: str
    label: str
    model: str  # the name token that identifies the chip ("h100", "4090", "mi300x")
    hbm_tbs: float
    fp64: float | None
    fp64_tc: float | None
    fp32: float | None
    bf16_tc: float | None
    fp16_tc: float | None
    fp8_tc: float | None
    sms: int | None  # SMs (CUs on AMD)
    l2_mb: float | None
    memory_gb: float | None = None  # used to tell memory variants apart
    vendor: str = "nvidia"
    notes: tuple[str, ...] = field(default_factory=tuple)
    # The public document(s) the figures come from: title and year (a sparse headline halved
    # where the document gives only that, as the notes say).
    source: str = ""

    def roofs(self) -> list[Roof]:
        ev = {"table": TABLE_SOURCE, "entry": self.label, "source": self.source, "dense": True}
        if self.notes:
            ev["notes"] = list(self.notes)
        out = [Roof(name=f"HBM ({self.label} datasheet)", kind="memory", level="dram",
                    value=self.hbm_tbs * TB, source="datasheet", evidence=dict(ev))]
        for prec, attr, label in _COMPUTE_FIELDS:
            v = getattr(self, attr)
            if v is not None:
                out.append(Roof(name=f"{label} ({self.label} datasheet)", kind="compute",
                                precision=prec, value=v * TB, source="datasheet",
                                evidence=dict(ev)))
        return out

    def row(self) -> dict[str, Any]:
        """The entry as a flat row for printing."""
        return {"key": self.key, "gpu": self.label, "hbm_tbs": self.hbm_tbs, "fp64": self.fp64,
                "fp64_tc": self.fp64_tc, "fp32": self.fp32, "bf16_tc": self.bf16_tc,
                "fp16_tc": self.fp16_tc, "fp8_tc": self.fp8_tc, "sms": self.sms,
                "l2_mb": self.l2_mb, "notes": "; ".join(self.notes), "source": self.source}


_HOPPER = ("tensor peaks at 1.83 GHz, FP32/FP64 at 1.98 GHz",
           "vendor headline 1979 BF16 / 3958 FP8 are sparse (2x dense)")

# Dense figures of the vendors' public documents, each entry's ``source`` naming them. The
# datasheets give the 16-bit and FP8 tensor peaks with 2:4 sparsity (2x dense): the dense half
# is what stands here. "BF16/FP16 tensor" is one figure there, so bf16_tc and fp16_tc agree.
_H100_DOCS = ("NVIDIA H100 Tensor Core GPU Datasheet (2023); the unrounded dense figures "
              "(33.5, 66.9, 989, 1979 at 1.98 / 1.83 GHz) as the NVIDIA H100 Tensor Core GPU "
              "Architecture whitepaper (2022) derives them")
SPECS: dict[str, GpuSpec] = {s.key: s for s in (
    GpuSpec("a100-sxm-80gb", "A100 SXM 80GB", "a100", 2.039, 9.7, 19.5, 19.5, 312, 312, None,
            108, 40, memory_gb=80,
            source="NVIDIA A100 Tensor Core GPU Datasheet (2021, the 80GB SXM column); SMs and "
                   "L2 from the NVIDIA A100 Tensor Core GPU Architecture whitepaper (2020)"),
    GpuSpec("h100-sxm", "H100 SXM", "h100", 3.35, 33.5, 66.9, 66.9, 989, 989, 1979, 132, 50,
            notes=_HOPPER, source=_H100_DOCS),
    GpuSpec("h100-pcie", "H100 PCIe", "h100", 2.0, 25.6, None, 51, 756, 756, 1513, 114, None,
            notes=("FP64 ~25.6 (the datasheet rounds it to 26)",),
            source="NVIDIA H100 Tensor Core GPU Datasheet (2023, the PCIe column)"),
    GpuSpec("h200-sxm", "H200 SXM", "h200", 4.8, 33.5, 66.9, 66.9, 989, 989, 1979, 132, 50,
            notes=_HOPPER,
            source="NVIDIA H200 Tensor Core GPU Datasheet (2024, the SXM column; the H100's "
                   "compute, unrounded as for the H100 SXM)"),
    GpuSpec("b200", "B200", "b200", 8.0, 37, None, 80, 2250, 2250, 4500, 148, 126,
            notes=("FP64 ~37 (approximate)",),
            source="NVIDIA HGX B200 Datasheet (2024), per GPU (its 8-GPU totals / 8); FP64 37 "
                   "and the 126 MB L2 not confirmed against it"),
    GpuSpec("l4", "L4", "l4", 0.300, None, None, 30.3, 121, 121, 242.5, 58, 48,
            source="NVIDIA L4 Tensor Core GPU Datasheet (2023); SMs and L2 from the NVIDIA Ada "
                   "GPU Architecture whitepaper (2023, v2.01)"),
    GpuSpec("l40s", "L40S", "l40s", 0.864, None, None, 91.6, 362, 362, 733, 142, None,
            source="NVIDIA L40S GPU Datasheet (2023)"),
    GpuSpec("rtx-4090", "RTX 4090", "4090", 1.008, None, None, 82.6, 165.2, 165.2, 330.3, 128, 72,
            notes=("BF16/FP16 tensor figure is with FP32 accumulation",),
            source="NVIDIA Ada GPU Architecture whitepaper (2022), GeForce RTX 4090 column"),
    GpuSpec("mi300x", "MI300X", "mi300x", 5.3, 81.7, 163.4, 163.4, 1307, 1307, 2615, 304, 256,
            vendor="amd",
            notes=("304 CUs, not SMs", "256 MB is Infinity Cache, not L2"),
            source="AMD Instinct MI300X Accelerator Datasheet (2023)"),
)}


def known_names() -> list[str]:
    return [s.label for s in SPECS.values()]


def _tokens(name: str) -> list[str]:
    return [t for t in re.split(r"[^a-z0-9]+", name.lower()) if t]


@dataclass(frozen=True)
class Match:
    spec: GpuSpec | None
    reason: str  # why this entry (or why none)

    @property
    def known(self) -> list[str]:
        return known_names()


def match(name: str, sm_count: int | None = None, memory_bytes: int | None = None) -> Match:
    """Find the datasheet entry of a device from its name, SM count and memory size."""
    toks = _tokens(name or "")
    tokset = set(toks)
    cands = [s for s in SPECS.values() if s.model in tokset]
    if not cands:
        return Match(None, f"no datasheet entry for {name!r}; known: {', '.join(known_names())}")
    # Variants whose figures differ from every entry in the table: refuse rather than guess.
    if "nvl" in tokset:
        return Match(None, f"{name!r} is an NVL part; the table has no NVL figures")
    mem_gb = memory_bytes / 2**30 if memory_bytes else None
    model = cands[0].model
    if model == "h100":
        pcie_name = "pcie" in tokset or "hbm2e" in tokset
        sxm_name = "sxm" in tokset or "sxm5" in tokset or "hbm3" in tokset
        if sm_count is not None:
            if sm_count == 114 and not sxm_name:
                return Match(SPECS["h100-pcie"], "name H100, 114 SMs")
            if sm_count == 132 and not pcie_name:
                return Match(SPECS["h100-sxm"], "name H100, 132 SMs")
            return Match(None, f"{name!r} with {sm_count} SMs fits neither H100 SXM (132) nor "
                               "PCIe (114)")
        if pcie_name:
            return Match(SPECS["h100-pcie"], "name H100 with PCIe/HBM2e token")
        if sxm_name:
            return Match(SPECS["h100-sxm"], "name H100 with SXM/HBM3 token")
        return Match(None, f"{name!r}: H100 SXM or PCIe? give the SM count")
    spec = cands[0]
    if "pcie" in tokset:
        return Match(None, f"{name!r} is a PCIe part; the table has only {spec.label}")
    if spec.sms is not None and sm_count is not None and spec.vendor == "nvidia" \
            and sm_count != spec.sms:
        return Match(None, f"{name!r} has {sm_count} SMs, {spec.label} has {spec.sms}")
    if model == "a100":
        # Only the 80GB SXM part is in the table; the 40GB part has other HBM figures.
        has80 = "80gb" in tokset or (mem_gb is not None and mem_gb > 60)
        if not has80:
            return Match(None, f"{name!r}: the table has only the A100 SXM 80GB")
    why = f"name token {model!r}" + (f", {sm_count} SMs" if sm_count else "")
    return Match(spec, why)


def lookup(name: str, sm_count: int | None = None, memory_bytes: int | None = None
           ) -> GpuSpec | None:
    return match(name, sm_count, memory_bytes).spec


def find_spec(query: str) -> GpuSpec | None:
    """For `roofbench specs NAME`: a key ("h100-pcie"), a label ("H100 PCIe") or a device name."""
    q = query.strip().lower()
    for s in SPECS.values():
        if q in (s.key, s.label.lower()):
            return s
    qt = _tokens(q)
    for s in SPECS.values():  # every token of the label given, e.g. "h100 sxm", "4090"
        lt = set(_tokens(s.label))
        if qt and set(qt) >= lt - {"rtx"} and s.model in qt:
            return s
    return lookup(query)


def datasheet_roofs(name: str, sm_count: int | None = None, memory_bytes: int | None = None
                    ) -> tuple[list[Roof], str]:
    """Datasheet roofs of a device (empty when unknown) and the reason of the match."""
    m = match(name, sm_count, memory_bytes)
    return (m.spec.roofs() if m.spec else []), m.reason


# ---- theoretical peaks from the device's own facts ------------------------------------------

# FMA lanes per SM per clock by compute capability, from NVIDIA's architecture whitepapers
# (Volta 2017, Turing 2018, A100 2020, GA102 2020, Ada 2022, H100 2022) and the CUDA C++
# Programming Guide's arithmetic-instruction throughput table: FP32 64 on sm_70/75/80, 128 on
# sm_86/89/90/100/120; FP64 and FP16x2 (per FP16 element) likewise. They reproduce the
# datasheet entries above: A100 FP64 108 x 32 x 2 x 1.41 GHz = 9.7, H100 SXM FP64
# 132 x 64 x 2 x 1.98 GHz = 33.5. None = not known here.
FP32_LANES = {"7.0": 64, "7.5": 64, "8.0": 64, "8.6": 128, "8.7": 128, "8.9": 128, "9.0": 128,
              "10.0": 128, "10.3": 128, "12.0": 128}
FP64_LANES = {"7.0": 32, "8.0": 32, "8.6": 2, "8.9": 2, "9.0": 64, "10.0": 64, "12.0": 2}
FP16_LANES = {"7.0": 128, "8.0": 256, "8.6": 128, "8.9": 128, "9.0": 256}
BF16_LANES = {"8.0": 256, "8.6": 128, "8.9": 128, "9.0": 256}
LANES: dict[str, dict[str, int]] = {"fp32": FP32_LANES, "fp64": FP64_LANES,
                                    "fp16": FP16_LANES, "bf16": BF16_LANES}


def fma_peak(precision: str, sm_count: int, cc: str, sm_clock_mhz: float) -> float | None:
    """SMs x lanes/SM x 2 x clock (FLOP/s), or None when the lane count is not known."""
    lanes = LANES.get(precision, {}).get(cc)
    if lanes is None or not sm_count or not sm_clock_mhz:
        return None
    return sm_count * lanes * 2 * sm_clock_mhz * 1e6


def hbm_peak(mem_clock_mhz: float, bus_width_bits: int) -> float | None:
    """Memory clock x bus width (bytes) x 2 (double data rate), bytes/s."""
    if not mem_clock_mhz or not bus_width_bits:
        return None
    return mem_clock_mhz * 1e6 * (bus_width_bits / 8) * 2


def theoretical_roofs(facts: dict[str, Any]) -> list[Roof]:
    """Peaks derived from device facts (nvml.device_facts): HBM from max memory clock and bus
    width, CUDA-core FMA peaks from SMs x lanes x 2 x max SM clock."""
    out: list[Roof] = []
    mem = facts.get("max_mem_clock_mhz")
    bus = facts.get("bus_width_bits")
    bw = hbm_peak(mem, bus) if mem and bus else None
    if bw:
        out.append(Roof(name="HBM (clock x bus x 2)", kind="memory", level="dram", value=bw,
                        source="theoretical",
                        evidence={"formula": "mem clock x bus width bytes x 2",
                                  "max_mem_clock_mhz": mem, "bus_width_bits": bus}))
    sms, cc, clk = facts.get("sm_count"), facts.get("compute_capability"), \
        facts.get("max_sm_clock_mhz")
    if not (sms and cc and clk):
        return out
    for prec in ("fp64", "fp32", "fp16", "bf16"):
        v = fma_peak(prec, sms, cc, clk)
        if v:
            out.append(Roof(name=f"{prec.upper()} FMA (SMs x lanes x 2 x clock)", kind="compute",
                            precision=prec, value=v, source="theoretical",
                            evidence={"formula": "SMs x lanes/SM x 2 x max SM clock",
                                      "sm_count": sms, "lanes_per_sm": LANES[prec][cc],
                                      "compute_capability": cc, "max_sm_clock_mhz": clk}))
    return out
