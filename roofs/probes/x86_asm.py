"""What a compiled loop does, read from x86-64 assembly (AT&T syntax, as LLVM prints it).

The probes record these facts in their evidence and the codegen tests assert on them for CPUs
this machine is not: a loop is the instructions from a label to a jump back to it; its FMA
chains are the distinct registers its packed FMAs accumulate into (AT&T: the last operand is
both read and written); a spill is a memory operand on the stack inside the loop.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

_LABEL = re.compile(r"^([.\w$]+):")
_JUMP = re.compile(r"^\s+j[a-z]+\s+([.\w$]+)\s*(?:#.*)?$")
_FMA = re.compile(r"^v?fn?m(?:add|sub)\d{3}([ps])([sd])\b")
_REG = re.compile(r"%([xyz])mm(\d+)")
# Packed register -> memory moves (vmovss/vmovsd are scalar, however they name xmm).
_STORE = re.compile(r"^(v?mov(?:ntp[sd]|[au]p[sd]|dq[au]\d*|ntdq))\s+%([xyz])mm\d+,"
                    r"\s*[^%\s]*\(")
_FUNC = re.compile(r"^([A-Za-z_$][\w.$]*):")
BITS = {"x": 128, "y": 256, "z": 512}


@dataclass(frozen=True)
class Loop:
    """One loop: its label, its instructions (the backward jump included) and the listing's
    line span [start, end] it covers."""

    label: str
    body: tuple[str, ...]
    start: int = 0
    end: int = 0

    def contains(self, other: Loop) -> bool:
        return (self.start <= other.start and other.end <= self.end
                and (self.start, self.end) != (other.start, other.end))

    def fmas(self) -> list[tuple[str, int, str]]:
        """(mnemonic, vector bits, destination register) of every packed FMA."""
        out = []
        for ins in self.body:
            m = _FMA.match(ins)
            regs = _REG.findall(ins)
            if m and m.group(1) == "p" and regs:
                w, n = regs[-1]
                out.append((ins.split()[0], BITS[w], f"{w}mm{n}"))
        return out

    def chains(self) -> int:
        """Independent FMA chains: distinct accumulator registers of the packed FMAs."""
        return len({dest for _, _, dest in self.fmas()})

    def stores(self) -> list[tuple[str, int]]:
        """(mnemonic, vector bits) of every vector store to memory."""
        return [(m.group(1), BITS[m.group(2)]) for ins in self.body if (m := _STORE.match(ins))]

    def stack_operands(self, frame_pointer: bool = False) -> list[str]:
        """Instructions with a stack-slot memory operand (a spill or a reload)."""
        pat = r"\(%rsp\b|\(%rbp\b" if frame_pointer else r"\(%rsp\b"
        return [ins for ins in self.body if re.search(pat, ins)]

    def vector_spills(self, frame_pointer: bool = False) -> list[str]:
        """Stack operands that move a vector register (an accumulator or a vector spilled)."""
        return [ins for ins in self.stack_operands(frame_pointer) if _REG.search(ins)]

    def vector_bits(self) -> int | None:
        """The widest vector register the loop uses, None for scalar code."""
        widths = [BITS[w] for ins in self.body for w, _ in _REG.findall(ins)
                  if not ins.startswith(("vzeroupper",))]
        return max(widths) if widths else None


def loops(asm: str) -> list[Loop]:
    """Every loop: the instructions between a label and a later jump back to it."""
    lines = asm.splitlines()
    at: dict[str, int] = {}
    out = []
    for i, line in enumerate(lines):
        m = _LABEL.match(line)
        if m:
            at[m.group(1)] = i
            continue
        m = _JUMP.match(line)
        if m and m.group(1) in at:
            body = tuple(s for s in (x.strip() for x in lines[at[m.group(1)] + 1:i + 1])
                         if s and not s.startswith((".", "#")) and not _LABEL.match(s))
            out.append(Loop(m.group(1), body, at[m.group(1)], i))
    return out


def innermost(found: list[Loop]) -> list[Loop]:
    """The loops that contain no other loop."""
    return [lp for lp in found if not any(lp.contains(o) for o in found)]


def kernel_part(asm: str, marker: str = "parfor_gufunc") -> str:
    """The functions of a listing whose name holds ``marker`` (numba's parallel loop body: the
    kernel proper, not its argument-unpacking wrappers), or the whole listing if none does."""
    parts, keep = [], False
    for line in asm.splitlines():
        m = _FUNC.match(line)
        if m:
            keep = marker in m.group(1)
        if keep:
            parts.append(line)
    return "\n".join(parts) if parts else asm


def uses_frame_pointer(asm: str) -> bool:
    """Whether a function sets up %rbp as its frame pointer (then -N(%rbp) is a stack slot)."""
    return re.search(r"movq\s+%rsp,\s*%rbp", asm) is not None


def fma_loop(asm: str) -> Loop | None:
    """The innermost loop with the most packed FMAs (the probe's hot loop), or None."""
    cands = [lp for lp in innermost(loops(asm)) if lp.fmas()]
    return max(cands, key=lambda lp: len(lp.fmas()), default=None)


def store_loop(asm: str, nontemporal: bool = False) -> Loop | None:
    """The innermost loop that stores the most vector bytes per trip (a kernel's main vector
    loop; its remainder loops store less); with ``nontemporal``, among the loops that store
    with ``movnt`` (a non-temporal-store kernel's main loop), None if no loop does."""
    cands = [lp for lp in innermost(loops(asm)) if lp.stores()]
    if nontemporal:
        cands = [lp for lp in cands if any("movnt" in m for m, _ in lp.stores())]
    return max(cands, key=lambda lp: (sum(b for _, b in lp.stores()), -len(lp.body)),
               default=None)


def loop_facts(loop: Loop | None, asm: str) -> dict[str, Any]:
    """The facts the probes record and the tests assert on, JSON-ready."""
    if loop is None:
        return {"loop": None}
    fp = uses_frame_pointer(asm)
    stores = loop.stores()
    return {"loop": loop.label, "instructions": len(loop.body),
            "vector_bits": loop.vector_bits(),
            "fma_bits": sorted({b for _, b, _ in loop.fmas()}), "fmas": len(loop.fmas()),
            "fma_chains": loop.chains(),
            "stores": len(stores), "store_bits": sorted({b for _, b in stores}),
            "nontemporal_stores": sum("movnt" in m for m, _ in stores),
            "stack_operands": len(loop.stack_operands(fp)),
            "vector_spills": len(loop.vector_spills(fp))}


def fma_asm_facts(asm: str) -> dict[str, Any]:
    """Packed vector FMA instructions per register width over the whole listing (scalar
    ``...ss``/``...sd`` FMAs, which also name xmm registers, counted apart), the widest packed
    width used, and the facts of the hot FMA loop."""
    counts = {"xmm": 0, "ymm": 0, "zmm": 0, "scalar": 0}
    for m in re.finditer(r"\bv?fn?m(?:add|sub)\d{3}([ps])[sd]\b[^\n]*", asm):
        w = re.search(r"%(xmm|ymm|zmm)", m.group(0))
        if w:
            counts[w.group(1) if m.group(1) == "p" else "scalar"] += 1
    widest = next((w for w in ("zmm", "ymm", "xmm") if counts[w]), None)
    bits = {"zmm": 512, "ymm": 256, "xmm": 128, None: None}[widest]
    return {"fma_instructions": counts, "vector_bits": bits,
            "hot_loop": loop_facts(fma_loop(asm), asm)}
