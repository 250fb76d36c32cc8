"""CPU roofs measured for real: STREAM bandwidth (cpu_stream.py), peak FMA throughput
(cpu_fma.py, measured in a child process: cpu_fma_child.py), a BLAS GEMM ceiling (cpu_blas.py).

Roofs produced (all ``source="measured"``; CPU datasheet roofs are unknown and never invented):

- memory, level "dram": ``dram stream-copy|scale|add|triad|add-nt`` (cpu_stream.STREAM);
  ``RoofSet.memory("dram")`` takes the highest of those whose record may set the roof.
- memory, levels "l1", "l2", "l3": ``l2 sweep-read`` and ``l2 sweep-read+write`` etc., the
  working-set sweep planned from the cache topology (cpu_cache_sweep.py, in its own process),
  each with its sweep on ``Roof.cache``; a case that fits a level is placed on it
  (roofline.place).
- compute, precision "fp64"/"fp32": ``fp64 FMA peak`` (independent FMA chains, widest vectors)
  and ``fp64 BLAS dgemm`` / ``fp32 BLAS sgemm`` (a library ceiling, evidence probe
  "blas-gemm"). Both are kept; ``RoofSet.compute`` picks the max within the measured source,
  which is the FMA peak unless BLAS beats it (it should not: GEMM is FMAs plus loads); when a
  probe comes out below its BLAS GEMM, ``compute_roof_notes`` says so on the RoofSet and the
  BLAS roof is the one used.

The model of the FMA probe, its sources and the measurements (against the C references too)
are in docs/cpu-roofs.md.
"""

from __future__ import annotations

from collections.abc import Callable

from roofbench.cpu_cache import last_level_cache_bytes
from roofbench.roof_records import Roof

from .cpu_blas import blas_gemm_roof
from .cpu_cache_sweep import cache_roofs as swept_cache_roofs
from .cpu_fma import FmaProbe, best_of_repeats
from .cpu_stream import Progress, TimeFn, default_stream_budget, measure_stream, stream_elements


def compute_roof_notes(roofs: list[Roof]) -> list[str]:
    """Notes for the report when the FMA probe of a precision came out below the measured BLAS
    GEMM of that precision. A compute roof below a GEMM that ran is impossible (GEMM is FMAs
    plus loads): the probe missed the peak, and the higher ceiling, the BLAS one, is the roof
    used (``RoofSet.compute`` takes the highest measured roof of a precision)."""
    notes = []
    for prec in ("fp64", "fp32"):
        fma = [r for r in roofs if r.precision == prec and r.evidence.get("probe") == "fma-peak"]
        blas = [r for r in roofs if r.precision == prec and r.evidence.get("probe") == "blas-gemm"]
        if not fma or not blas:
            continue
        f, b = max(fma, key=lambda r: r.value), max(blas, key=lambda r: r.value)
        if b.value > f.value:
            notes.append(
                f"{prec}: the FMA probe ({f.name}, {f.value / 1e9:.1f} GFLOP/s) measured below "
                f"the BLAS GEMM ({b.name}, {b.value / 1e9:.1f} GFLOP/s); a compute roof cannot "
                f"be below a GEMM that ran, so the {prec} roof used is the higher ceiling, "
                f"{b.name}")
    return notes


FmaRoofFn = Callable[[str, bool], Roof]


FMA_REPEATS = {False: 3, True: 2}  # independent measurements of each FMA roof (by quick)


def fma_roof_in_process(time_fn: TimeFn) -> FmaRoofFn:
    """The FMA probe run in this process, with whatever tuning numba was started with."""
    def measure(precision: str, quick: bool) -> Roof:
        probe = FmaProbe(precision, target_s=0.03 if quick else 0.05)
        roof = probe.roof(time_fn(probe))
        roof.evidence["process"] = "in process"
        return roof
    return measure


CacheRoofFn = Callable[[bool, Progress], list[Roof]]


def measure_cpu_roofs(time_fn: TimeFn, quick: bool = False, progress: Progress = None,
                      fma_roof: FmaRoofFn | None = None,
                      cache_roofs: CacheRoofFn | None = None) -> list[Roof]:
    """Measure this CPU's roofs: STREAM x4 (dram), the cache sweep (l1, l2, l3: read and
    read+write; ``cache_roofs(quick, progress)``, default in its own process), FMA peak and
    BLAS GEMM (fp64, fp32).

    ``time_fn(fn)`` times a no-argument call and returns a Timing. ``fma_roof(precision,
    quick)`` measures one FMA roof (default: in this process; the CPU backend runs it in a
    process started with the widest vectors), ``FMA_REPEATS`` times per precision, the two
    precisions alternating; each roof is the best repeat, flagged when they disagree by more
    than 10% (``best_of_repeats``). ``quick`` keeps arrays at the 4x-LLC minimum
    (memory permitting), shortens FMA calls and uses n=1024 for GEMM; the full run uses 8x LLC
    and n=2048.
    """
    llc = last_level_cache_bytes()
    n = stream_elements(llc, default_stream_budget(), factor=4.0 if quick else 8.0)
    roofs = measure_stream(time_fn, n, progress=progress, llc_bytes=llc,
                           settle_s=0.5 if quick else 3.0)
    roofs += (cache_roofs or swept_cache_roofs)(quick, progress)
    fma_roof = fma_roof or fma_roof_in_process(time_fn)
    repeats: dict[str, list[Roof]] = {"fp64": [], "fp32": []}
    n_rep = FMA_REPEATS[quick]
    for r in range(n_rep):  # the precisions alternate: a slow spell is unlikely to hit all
        for prec in repeats:
            if progress:
                progress(f"cpu roofs: {prec} FMA peak (repeat {r + 1}/{n_rep})")
            repeats[prec].append(fma_roof(prec, quick))
    roofs += [best_of_repeats(reps) for reps in repeats.values()]
    gemm_n = 1024 if quick else 2048
    for prec in ("fp64", "fp32"):
        if progress:
            progress(f"cpu roofs: {prec} BLAS GEMM n={gemm_n}")
        roofs.append(blas_gemm_roof(prec, gemm_n, time_fn))
    return roofs
