"""Which DRAM probe a kernel follows when the memory changes state: STREAM add-nt (three
streams), square-nt (two) and the read pass (one), each sampled beside kernels of one, two and
three streams, in turn, for SECONDS; each kernel's ratio to each probe, by the memory's state
(add-nt below or above the split, GB/s).

    python scripts/pair_mix.py [SECONDS] [SPLIT_GBPS]      (default 120 s, split 55)

A kernel whose ratio to a probe is the same in both states follows that probe (the pairs
give each launch the probe of its stream count: ``bench/measure/pairs.stream_shares``); one
whose ratio moves does not, and its paired efficiency depends on the state it met (the report
then gives it by state: ``roofline.state_split``). Sizes are the suite's on a 32 MiB-LLC
machine (128 MiB a main array). Markdown on stdout; exit 0 always
(figures, not a test). Run it on a quiet machine: another process's work moves both sides.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from roofbench.kernels import gemv, l2norm, rownorm  # noqa: E402
from roofbench.roofs.probes.cpu_pairs import ReadPass, StreamPair  # noqa: E402
from roofbench.roofs.probes.cpu_stream import StreamBracket  # noqa: E402

N = 1 << 24  # STREAM's arrays: 128 MiB each


def kernels() -> dict[str, tuple[Callable[[], None], int, int]]:
    """name: (call, bytes, streams) at the suite's sizes."""
    rng = np.random.default_rng(0)
    w = rng.random((8192, 4096), dtype=np.float32)
    x, y = np.ones(4096, np.float32), np.empty(8192, np.float32)
    m = 1 << 24
    a, b, t1, t2, t3 = (rng.random(m) for _ in range(5))
    c = l2norm.CPU
    xr = rng.random((8192, 4096), dtype=np.float32)
    sq, yr = rng.random((8192, 4096), dtype=np.float32), np.empty_like(xr)  # sq read: filled
    sums, scale = np.empty(8192, np.float32), np.ones(8192, np.float32)
    r = rownorm.CPU
    x64 = rng.random((4096, 4096))
    y64 = np.empty_like(x64)
    fused = rownorm.WORKLOAD.variants["fused"].impls["cpu"]["fused"]
    return {
        "gemv rows fp32": (lambda: gemv._rows(w, x, y, 8192, 4096), w.nbytes, 1),
        "rownorm rowsum fp32": (lambda: r["rowsum"](sq, sums, 8192, 4096), sq.nbytes, 1),
        "l2norm square fp64": (lambda: c["square"](a, t1, m), 16 * m, 2),
        "rownorm scale fp32": (lambda: r["scale"](xr, scale, yr, 8192, 4096), 2 * xr.nbytes, 2),
        "rownorm fused fp64": (lambda: fused(x64, y64, 4096, 4096, 1e-6), 2 * x64.nbytes, 2),
        "l2norm add fp64": (lambda: c["add"](t1, t2, t3, m), 24 * m, 3),
    }


def probes() -> dict[str, Callable[[], float]]:
    """The DRAM pairs' own samplers (``cpu_pairs.StreamPair``): STREAM add-nt, square-nt on
    STREAM's arrays and the cache sweep's read pass over one array's bytes: bytes/s a call."""
    bracket = StreamBracket(N)
    reads = ReadPass(8 * N)
    return {"add-nt": StreamPair(bracket), "square-nt": StreamPair(bracket, {2: 1.0}),
            "read": StreamPair(bracket, {1: 1.0}, reads)}


def main() -> None:
    seconds = float(sys.argv[1]) if len(sys.argv) > 1 else 120.0
    split = float(sys.argv[2]) if len(sys.argv) > 2 else 55.0
    probes_ = probes()
    ks = kernels()
    for p in probes_.values():
        p()
    for fn, _, _ in ks.values():
        fn()
    rows: list[list[float]] = []
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        row = [p() for p in probes_.values()]
        for fn, nbytes, _ in ks.values():
            t0 = time.perf_counter()
            fn()
            row.append(nbytes / (time.perf_counter() - t0))
        rows.append(row)
    rates = np.array(rows) / 1e9
    names = list(probes_)
    states = {"slow": rates[:, 0] < split, "fast": rates[:, 0] >= split}
    print(f"{len(rows)} rounds of {seconds:.0f} s; state by add-nt below / above {split} GB/s\n")
    print("| state | rounds | " + " | ".join(f"{n}, GB/s" for n in names) + " |")
    print("|---|---|" + "---|" * len(names))
    for s, k in states.items():
        if k.any():
            print(f"| {s} | {k.sum()} | " + " | ".join(
                f"{np.median(rates[k, i]):.1f}" for i in range(len(names))) + " |")
    print("\n| kernel (streams) | state | GB/s | " + " | ".join(f"/ {n}" for n in names) + " |")
    print("|---|---|---|" + "---|" * len(names))
    for j, (name, (_, _, streams)) in enumerate(ks.items()):
        col = rates[:, len(names) + j]
        for s, k in states.items():
            if k.any():
                ratios = " | ".join(f"{np.median(col[k] / rates[k, i]):.3f}"
                                    for i in range(len(names)))
                print(f"| {name} ({streams}) | {s} | {np.median(col[k]):.1f} | {ratios} |")


if __name__ == "__main__":
    main()
