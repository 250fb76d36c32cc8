#!/usr/bin/env python3
"""roofbench's cache-level CPU roofs beside carm-roofline's, measured side by side on this
machine: a benchmark-time comparison (carm-roofline is not a dependency).

    pip install carm-roofline            # into the same .venv, once
    python scripts/compare_carm.py [--rounds 3] [--test-time 2] [--json out.json]

Each round runs roofbench's cache sweep (roofs/probes/cpu_cache_sweep.py, in its own process as
`roofbench roofs` runs it) and roofbench's STREAM copy and triad (the DRAM probe), then ``carm
benchmark -t memory`` for L1, L2, L3 and DRAM with load-only (1:0), load+store (1:1) and its
default two loads per store (2:1) on the same threads, each cache level at the working set per
thread where roofbench's read roof was measured, DRAM at roofbench's STREAM array size. The
rounds alternate the two tools, because a VM's caches and memory change speed within minutes:
a row's ratio is the median of the rounds' ratios, each from figures taken minutes apart.

Like with like, both counting bytes loaded plus bytes stored (no read for ownership): roofbench
read vs carm 1:0, roofbench read+write (two loads per store) vs carm 2:1; DRAM: STREAM copy
vs carm 1:1 and STREAM triad vs carm 2:1 (carm stores plainly; roofbench's DRAM roof itself is
its non-temporal add, which carm does not measure). roofbench's figure is its roof (the
rate a tenth of the sweep's bursts reach, STREAM's best time); its median (each thread's median
burst, summed; STREAM's median time; carm reports its median run) is printed beside it. Prints
one Markdown table, the load before and after, the date and the commit; ``--json`` keeps
every figure of every round.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))  # a checkout without an install

GB = 1e9
# (level, roofbench's access or STREAM kernel) -> carm's load:store ratio
PAIRS = [(("l1", "read"), "1:0"), (("l1", "read+write"), "2:1"),
         (("l2", "read"), "1:0"), (("l2", "read+write"), "2:1"),
         (("l3", "read"), "1:0"), (("l3", "read+write"), "2:1"),
         (("dram", "copy"), "1:1"), (("dram", "triad"), "2:1")]
STREAM_ARRAYS = {"copy": 2, "triad": 3}


def load() -> list[str]:
    return Path("/proc/loadavg").read_text().split(" ")[0:3]


def roofbench_side(quick: bool) -> dict[tuple[str, str], dict[str, float]]:
    """{(level, access or STREAM kernel): figure, median, working set}, in GB/s and
    bytes."""
    from roofbench.roofs.probes.cpu_cache_sweep import isolated_cache_roofs
    from roofbench.roofs.probes.cpu_fma_child import timer_config
    from roofbench.roofs.probes.cpu_stream import (
        default_stream_budget,
        measure_stream,
        stream_elements,
    )

    from roofbench.cpu_cache import last_level_cache_bytes
    from roofbench.timing import host_timer

    out: dict[tuple[str, str], dict[str, float]] = {}
    for r in isolated_cache_roofs(quick):
        assert r.cache is not None
        out[(r.level, r.cache.access)] = {
            "GBps": r.value / GB, "median_GBps": r.evidence["median_burst_bytes_per_s"] / GB,
            "working_set": r.evidence["best_working_set_bytes"], "threads": r.cache.cores}
    cfg = timer_config(quick)
    n = stream_elements(last_level_cache_bytes(), default_stream_budget(), factor=4.0)
    for r in measure_stream(lambda fn: host_timer(fn, cfg), n, kernels=tuple(STREAM_ARRAYS),
                            settle_s=0.5):
        k = r.evidence["probe"].removeprefix("stream-")
        out[("dram", k)] = {"GBps": r.value / GB,
                            "median_GBps": r.evidence["median_bytes_per_s"] / GB,
                            "working_set": r.evidence["array_bytes"] * STREAM_ARRAYS[k],
                            "threads": r.evidence["threads"]}
    return out


def carm_sizes(ours: dict[tuple[str, str], dict[str, float]], threads: int) -> list[int]:
    """carm's --mem-test-sizes (bytes per thread): L1, L2, L3 at roofbench's best read working
    set, DRAM at STREAM copy's arrays."""
    sizes = [int(ours[(lv, "read")]["working_set"]) // threads if (lv, "read") in ours
             else 32 * 1024 for lv in ("l1", "l2", "l3")]
    return [*sizes, int(ours[("dram", "copy")]["working_set"]) // threads]


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
    return read_carm(out)


def read_carm(folder: Path) -> list[dict[str, Any]]:
    """Every record of carm's JSONL output under ``folder`` (``benchmarks.jsonl``)."""
    rows = []
    for f in sorted(folder.rglob("benchmarks.jsonl")):
        rows += [json.loads(line) for line in f.read_text().splitlines() if line.strip()]
    return rows


def carm_figures(rows: list[dict[str, Any]]) -> dict[tuple[str, str], dict[str, Any]]:
    """{(level, load:store ratio): carm's record}; the last record of a key wins."""
    return {(r["cache_level"].lower(), str(r["load_store_ratio"])): r
            for r in rows if r.get("type", "memory") == "memory"}


def table(rounds: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """One row per pair: each side's median over the rounds, and the median of the rounds'
    ratios (a round: {"roofbench": roofbench_side(), "carm": carm records})."""
    out = []
    for (level, access), ratio in PAIRS:
        ours, theirs, ratios, median, ws = [], [], [], [], None
        for rd in rounds:
            o = rd["roofbench"].get((level, access))
            c = carm_figures(rd["carm"]).get((level, ratio))
            if o is None:
                continue
            ours.append(o["GBps"])
            median.append(o["median_GBps"])
            ws = o["working_set"]
            if c is not None:
                theirs.append(c["bandwidth_gbps"])
                ratios.append(o["GBps"] / c["bandwidth_gbps"])
        if not ours:
            continue
        name = access if level != "dram" else f"STREAM {access}"
        out.append({"level": level, "access": name, "carm_ratio": ratio, "working_set": ws,
                    "roofbench_GBps": statistics.median(ours),
                    "roofbench_median_GBps": statistics.median(median),
                    "carm_GBps": statistics.median(theirs) if theirs else None,
                    "ratio": statistics.median(ratios) if ratios else None,
                    "ratios": ratios})
    return out


def markdown(rows: list[dict[str, Any]]) -> str:
    lines = ["| level | roofbench | carm | working set | roofbench GB/s | roofbench median "
             "| carm GB/s | roofbench / carm (median of rounds; each round) |",
             "|---|---|---|---|---|---|---|---|"]
    for t in rows:
        carm_s = f"{t['carm_GBps']:.1f}" if t["carm_GBps"] else "-"
        ratio = (f"{t['ratio']:.2f} ({', '.join(f'{x:.2f}' for x in t['ratios'])})"
                 if t["ratio"] else "-")
        lines.append(f"| {t['level']} | {t['access']} | {t['carm_ratio']} | "
                     f"{t['working_set'] / 2**20:.3g} MiB | {t['roofbench_GBps']:.1f} | "
                     f"{t['roofbench_median_GBps']:.1f} | {carm_s} | {ratio} |")
    return "\n".join(lines)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=3, help="roofbench then carm, this many times")
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
    if args.rounds < 1:
        print("--rounds: give 1 or more", file=sys.stderr)
        return 2
    from roofbench.roofs.probes.cpu_features import (
        host_cpu_features,
        parse_features,
        widest_vector_bits,
    )

    load_before = load()
    started = datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M UTC")
    isa = {512: "x86_avx512", 256: "x86_avx2"}.get(
        widest_vector_bits(parse_features(host_cpu_features())), "x86_sse")
    rounds: list[dict[str, Any]] = []
    threads = len(os.sched_getaffinity(0))
    for k in range(args.rounds):
        print(f"round {k + 1} of {args.rounds}: roofbench", file=sys.stderr, flush=True)
        ours = roofbench_side(args.quick)
        threads = int(ours[("dram", "copy")]["threads"])
        with tempfile.TemporaryDirectory(prefix="compare-carm-") as tmp:
            theirs = carm_side(args.carm, threads, isa, carm_sizes(ours, threads),
                               args.test_time, Path(tmp))
        rounds.append({"roofbench": ours, "carm": theirs})
    load_after = load()
    commit = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"],
                            capture_output=True, text=True).stdout.strip()
    rows = table(rounds)
    print(f"\n{started}, commit {commit}, {threads} threads, carm ISA {isa}, "
          f"carm --test-time {args.test_time}, {args.rounds} rounds; load (1/5/15 min) "
          f"before {load_before}, after {load_after}\n")
    print(markdown(rows))
    if args.json:
        args.json.write_text(json.dumps({
            "started": started, "commit": commit, "load_before": load_before,
            "load_after": load_after, "threads": threads, "isa": isa, "rows": rows,
            "rounds": [{"roofbench": {f"{lv} {acc}": v for (lv, acc), v in
                                      rd["roofbench"].items()}, "carm": rd["carm"]}
                       for rd in rounds]}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
