#!/usr/bin/env python3
"""roofbench's cache-level CPU roofs beside carm-roofline's, measured side by side on this
machine: a benchmark-time comparison (carm-roofline is not a dependency).

    pip install carm-roofline            # into the same .venv, once
    python scripts/compare_carm.py [--test-time 2] [--json out.json]

Runs, in this order: roofbench's cache sweep (roofs/probes/cpu_cache_sweep.py, in its own
process as `roofbench roofs` runs it), roofbench's STREAM copy and triad (the DRAM probe), then
``carm benchmark -t memory`` for L1, L2, L3 and DRAM with load-only (1:0), load+store (1:1) and
two loads per store (2:1) accesses on the same threads, with each cache level's working set per
thread set to the one where roofbench's roof was measured (carm's own default for L3 is 3/4 of
the L3 per thread, 360 MiB on a VM reporting its host's 480 MiB L3, and 16x that for DRAM) and
DRAM at roofbench's STREAM array size. Prints one Markdown table (level, access, both figures,
the ratio), the load before and after, the date and the commit; ``--json`` keeps every figure.
Comparing like with like (both count the bytes loaded plus the bytes stored, neither a read
for ownership): roofbench read vs carm 1:0, roofbench read+write vs carm 1:1; DRAM: STREAM
copy (1 read, 1 write) vs carm 1:1 and STREAM triad (2 reads, 1 write) vs carm 2:1. carm
stores plainly; roofbench's DRAM roof itself is its non-temporal add (`stream-add-nt`, no
read for ownership), which carm does not measure.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))  # a checkout without an install

GB = 1e9
CARM_RATIO = {"read": "1:0", "read+write": "1:1", "2:1": "2:1"}


def load() -> str:
    return Path("/proc/loadavg").read_text().split(" ")[0:3].__str__()


def roofbench_side(quick: bool) -> tuple[list[Any], dict[str, Any]]:
    from roofbench.roofs.probes.cpu_cache_sweep import isolated_cache_roofs
    from roofbench.roofs.probes.cpu_fma_child import timer_config
    from roofbench.roofs.probes.cpu_stream import (
        default_stream_budget,
        measure_stream,
        stream_elements,
    )

    from roofbench.cpu_cache import last_level_cache_bytes
    from roofbench.timing import host_timer

    roofs = isolated_cache_roofs(quick)
    cfg = timer_config(quick)
    n = stream_elements(last_level_cache_bytes(), default_stream_budget(), factor=4.0)
    stream = measure_stream(lambda fn: host_timer(fn, cfg), n, kernels=("copy", "triad"),
                            settle_s=0.5)
    return roofs, {r.evidence["probe"].removeprefix("stream-"): r for r in stream}


def carm_side(carm: str, threads: int, isa: str, sizes: list[int], test_time: float,
              out: Path) -> list[dict[str, Any]]:
    cmd = [carm, "benchmark", "-t", "memory", "-m", "L1", "L2", "L3", "DRAM", "-i", isa,
           "-d", "f64", "--threads", str(threads), "--ld-st-ratio", "1:0", "1:1", "2:1",
           "--mem-test-sizes", *[f"{max(1, s // 1024)}KiB" for s in sizes],
           "--test-time", str(test_time), "--output-fmt", "jsonl", "--output-dir", str(out)]
    print("$ " + " ".join(cmd), file=sys.stderr, flush=True)
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=1800)
    if r.returncode != 0:
        raise RuntimeError(f"carm exited {r.returncode}: "
                           f"{(r.stderr or r.stdout).strip().splitlines()[-1:]}")
    rows = []
    for f in out.rglob("benchmarks.jsonl"):
        rows += [json.loads(line) for line in f.read_text().splitlines() if line.strip()]
    return rows


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--test-time", type=float, default=2.0,
                    help="carm's seconds per micro-benchmark (its default is 25)")
    ap.add_argument("--quick", action="store_true", help="roofbench's quick sweep")
    ap.add_argument("--carm", default=str(Path(sys.executable).parent / "carm"))
    ap.add_argument("--json", type=Path, help="write every figure here")
    args = ap.parse_args()
    if not (shutil.which(args.carm) or Path(args.carm).exists()):
        print(f"carm-roofline not found at {args.carm}: pip install carm-roofline",
              file=sys.stderr)
        return 2
    from roofbench.roofs.probes.cpu_features import (
        host_cpu_features,
        parse_features,
        widest_vector_bits,
    )

    load_before = load()
    started = datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M UTC")
    roofs, stream = roofbench_side(args.quick)
    copy = stream["copy"]
    threads = roofs[0].cache.cores if roofs else len(os.sched_getaffinity(0))
    best = {(r.level, r.cache.access): r for r in roofs}
    sizes = [best[(lv, "read")].evidence["best_working_set_bytes"] // threads
             if (lv, "read") in best else 32 * 1024 for lv in ("l1", "l2", "l3")]
    sizes.append(copy.evidence["array_bytes"] * 2 // threads)  # copy: a read, c written
    isa = {512: "x86_avx512", 256: "x86_avx2"}.get(
        widest_vector_bits(parse_features(host_cpu_features())), "x86_sse")
    with tempfile.TemporaryDirectory(prefix="compare-carm-") as tmp:
        carm_rows = carm_side(args.carm, threads, isa, sizes, args.test_time, Path(tmp))
    load_after = load()
    carm = {(row["cache_level"].lower(), {"1:0": "read", "1:1": "read+write"}.get(
        row["load_store_ratio"], row["load_store_ratio"])): row for row in carm_rows}
    commit = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"],
                            capture_output=True, text=True).stdout.strip()
    table = []
    for (lv, acc), r in sorted(best.items()):
        c = carm.get((lv, acc))
        table.append({"level": lv, "access": acc, "roofbench_GBps": r.value / GB,
                      "roofbench_mean_burst_GBps": r.evidence.get("mean_burst_bytes_per_s",
                                                                  0) / GB,
                      "working_set": r.evidence.get("best_working_set_bytes"),
                      "carm_GBps": c["bandwidth_gbps"] if c else None,
                      "carm_working_set": c["working_set_bytes"] if c else None})
    for kernel, ratio, arrays in (("copy", "read+write", 2), ("triad", "2:1", 3)):
        c, r = carm.get(("dram", ratio)), stream[kernel]
        table.append({"level": "dram", "access": f"STREAM {kernel} vs {CARM_RATIO[ratio]}",
                      "roofbench_GBps": r.value / GB,
                      "roofbench_mean_burst_GBps": r.evidence["median_bytes_per_s"] / GB,
                      "working_set": r.evidence["array_bytes"] * arrays,
                      "carm_GBps": c["bandwidth_gbps"] if c else None,
                      "carm_working_set": c["working_set_bytes"] if c else None})
    print(f"\n{started}, commit {commit}, {threads} threads, carm ISA {isa}, "
          f"carm --test-time {args.test_time}; load (1/5/15 min) before {load_before}, "
          f"after {load_after}\n")
    print("| level | access | working set | roofbench GB/s | (mean burst / median) | "
          "carm GB/s | roofbench / carm |")
    print("|---|---|---|---|---|---|---|")
    for t in table:
        ratio = (f"{t['roofbench_GBps'] / t['carm_GBps']:.2f}" if t["carm_GBps"] else "-")
        carm_s = f"{t['carm_GBps']:.1f}" if t["carm_GBps"] else "-"
        print(f"| {t['level']} | {t['access']} | {t['working_set'] / 2**20:.3g} MiB | "
              f"{t['roofbench_GBps']:.1f} | {t['roofbench_mean_burst_GBps']:.1f} | "
              f"{carm_s} | {ratio} |")
    if args.json:
        args.json.write_text(json.dumps({"started": started, "commit": commit,
                                         "load_before": load_before, "load_after": load_after,
                                         "threads": threads, "isa": isa, "rows": table,
                                         "carm": carm_rows}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
