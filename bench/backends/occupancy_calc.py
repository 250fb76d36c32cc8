"""Theoretical occupancy of a kernel launch, the way the CUDA occupancy calculator computes it.

Occupancy (resident warps / the SM's maximum) is one axis, arithmetic intensity another: the
report shows both beside a kernel's roof efficiency. Inputs are what the compiler reports for
the function (registers per thread, static shared memory) plus the launch (block size, dynamic
shared memory) and the architecture's limits below (CUDA C Programming Guide, "Compute
Capabilities" table; shared memory per SM is the configurable maximum).
"""

from __future__ import annotations

from dataclasses import dataclass

from roofbench.records import Occupancy


@dataclass(frozen=True)
class ArchLimits:
    max_warps_per_sm: int
    max_blocks_per_sm: int
    regs_per_sm: int = 65536
    reg_alloc_unit: int = 256  # registers are allocated per warp in units of this many
    max_regs_per_thread: int = 255
    smem_per_sm: int = 228 * 1024
    smem_reserved_per_block: int = 1024  # the runtime keeps 1 KiB per block (sm_80+)
    smem_alloc_unit: int = 128


# compute capability -> limits
ARCH: dict[tuple[int, int], ArchLimits] = {
    (7, 0): ArchLimits(64, 32, smem_per_sm=96 * 1024, smem_reserved_per_block=0,
                       smem_alloc_unit=256),
    (7, 5): ArchLimits(32, 16, smem_per_sm=64 * 1024, smem_reserved_per_block=0,
                       smem_alloc_unit=256),
    (8, 0): ArchLimits(64, 32, smem_per_sm=164 * 1024),
    (8, 6): ArchLimits(48, 16, smem_per_sm=100 * 1024),
    (8, 7): ArchLimits(48, 16, smem_per_sm=164 * 1024),
    (8, 9): ArchLimits(48, 24, smem_per_sm=100 * 1024),
    (9, 0): ArchLimits(64, 32, smem_per_sm=228 * 1024),
    (10, 0): ArchLimits(64, 32, smem_per_sm=228 * 1024),
    (12, 0): ArchLimits(48, 32, smem_per_sm=100 * 1024),
}


def limits_for(cc: tuple[int, int]) -> ArchLimits:
    """The table entry for ``cc``, else the closest lower one of the same major (else sm_90)."""
    key = (cc[0], cc[1])  # a list from JSON too
    if key in ARCH:
        return ARCH[key]
    same = [k for k in ARCH if k[0] == cc[0] and k <= key]
    return ARCH[max(same)] if same else ARCH[(9, 0)]


def _round_up(x: int, unit: int) -> int:
    return -(-x // unit) * unit if unit > 1 else x


def occupancy(threads_per_block: int, registers_per_thread: int, smem_per_block: int,
              cc: tuple[int, int], limits: ArchLimits | None = None) -> Occupancy:
    """Resident blocks per SM and the resulting theoretical occupancy."""
    lim = limits or limits_for(cc)
    if threads_per_block <= 0:
        raise ValueError("threads_per_block must be positive")
    warps = -(-threads_per_block // 32)
    by: dict[str, int] = {
        "warps": lim.max_warps_per_sm // warps,
        "blocks": lim.max_blocks_per_sm,
    }
    regs = max(int(registers_per_thread), 1)
    if regs > lim.max_regs_per_thread:
        by["registers"] = 0
    else:
        per_warp = _round_up(regs * 32, lim.reg_alloc_unit)
        by["registers"] = (lim.regs_per_sm // per_warp) // warps
    smem = _round_up(int(smem_per_block) + lim.smem_reserved_per_block, lim.smem_alloc_unit)
    by["shared_memory"] = lim.smem_per_sm // smem if smem > 0 else lim.max_blocks_per_sm
    blocks = min(by.values())
    # Name the tightest limit; on a tie the fixed caps win (a resource that allows exactly as
    # many blocks is not what holds the kernel back).
    order = ("warps", "blocks", "registers", "shared_memory")
    limiter = next(k for k in order if by[k] == blocks)
    active = blocks * warps
    return Occupancy(threads_per_block, regs, int(smem_per_block), blocks, active,
                     lim.max_warps_per_sm, active / lim.max_warps_per_sm, limiter)


def smem_for_blocks(blocks: int, static_smem: int, cc: tuple[int, int],
                    optin: int | None = None, limits: ArchLimits | None = None) -> int | None:
    """The most dynamic shared memory per block with which shared memory alone lets exactly
    ``blocks`` blocks reside on an SM (how an occupancy scan limits residency); None when no
    allocation does (the allocation unit skips that count), or it is more than a block may
    opt in to (``optin`` bytes), or ``static_smem`` leaves no room."""
    lim = limits or limits_for(cc)
    if blocks <= 0:
        raise ValueError("blocks must be positive")
    total = (lim.smem_per_sm // blocks) // lim.smem_alloc_unit * lim.smem_alloc_unit
    dyn = total - lim.smem_reserved_per_block - int(static_smem)
    if total <= 0 or lim.smem_per_sm // total != blocks or dyn < 0 or (
            optin is not None and static_smem + dyn > optin):
        return None
    return dyn
