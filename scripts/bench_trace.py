"""How long `roofbench trace` takes, and how much memory, on a trace of ~100 MB (issue 59's
budget: read, counted and placed in <= 60 s and <= 4 GB on 2 cores).

    .venv/bin/python scripts/bench_trace.py [--source TRACE] [--mb 100] [--keep DIR]

The big trace is made by replicating a recorded trace's events: each copy shifted in time
past the previous one (a step after a step), its External ids and correlations offset so
that links stay within a copy. The source defaults to a torch.profiler trace of
transformers' GPT-2 small (12 layers, d 768) prefill of 128 tokens, recorded here on the
CPU with record_shapes=True (random weights from the config; nothing downloaded).
The trace is then placed in a child process (`roofbench trace --roofs`, a hand-written
roofs file: the roofs' source is not what is timed), whose wall time, CPU time (user +
system: on a loaded machine the closer figure to a quiet wall time) and peak resident
memory (ru_maxrss) are printed, with the machine's load average before and after.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
ROOFS = {"device": "bench-roofs", "roofs": [
    {"name": "dram", "kind": "memory", "value": 2e10, "source": "user", "level": "dram"},
    {"name": "fp32", "kind": "compute", "value": 1e11, "source": "user", "precision": "fp32"}]}


def record_gpt2(path: Path) -> None:
    import torch
    from torch.profiler import ProfilerActivity, profile
    from transformers import GPT2Config, GPT2LMHeadModel

    torch.manual_seed(0)
    model = GPT2LMHeadModel(GPT2Config()).eval()  # GPT-2 small's shape, random weights
    ids = torch.randint(0, 50257, (1, 128))
    with torch.no_grad():
        model(ids)
        with profile(activities=[ProfilerActivity.CPU], record_shapes=True) as p:
            model(ids)
    p.export_chrome_trace(str(path))


def replicate(src: Path, dst: Path, mb: float) -> tuple[int, int]:
    """Write ``dst``: ``src``'s events copied until the file holds ``mb`` MB (copies, events)."""
    import gzip

    opener = gzip.open if src.read_bytes()[:2] == b"\x1f\x8b" else open
    with opener(src, "rt") as f:
        d = json.load(f)
    events = d.pop("traceEvents")
    xs = [e for e in events if e.get("ph") == "X"]
    t0 = min(e["ts"] for e in xs)
    span = max(e["ts"] + e.get("dur", 0) for e in xs) - t0 + 10.0
    one = sum(len(json.dumps(e)) + 2 for e in events)
    copies = max(1, int(mb * 1e6 / one))
    head = json.dumps(d)[:-1]
    n = 0
    with open(dst, "w") as f:
        f.write(head + ', "traceEvents": [')
        first = True
        for k in range(copies):
            for e in events:
                e2 = dict(e)
                if "ts" in e2 and e2.get("ph") != "M":
                    e2["ts"] = e2["ts"] + k * span
                if k and isinstance(e2.get("id"), int):
                    e2["id"] += k * 10_000_000
                if k and isinstance(e2.get("args"), dict):
                    a = dict(e2["args"])
                    for key in ("External id", "correlation"):
                        if isinstance(a.get(key), int):
                            a[key] += k * 10_000_000
                    e2["args"] = a
                f.write(("" if first else ",\n") + json.dumps(e2))
                first = False
                n += 1
        f.write("]}\n")
    return copies, n


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--source", help="a trace to replicate (default: GPT-2 small, recorded)")
    ap.add_argument("--mb", type=float, default=100.0)
    ap.add_argument("--keep", help="write the big trace and the output here")
    a = ap.parse_args()
    work = Path(a.keep or tempfile.mkdtemp(prefix="bench-trace-"))
    work.mkdir(parents=True, exist_ok=True)
    src = Path(a.source) if a.source else work / "gpt2-small-prefill.json"
    if not a.source:
        t = time.perf_counter()
        record_gpt2(src)
        print(f"recorded {src} ({src.stat().st_size / 1e6:.1f} MB) in "
              f"{time.perf_counter() - t:.1f} s")
    big = work / "big.json"
    copies, n = replicate(src, big, a.mb)
    (work / "roofs.json").write_text(json.dumps(ROOFS))
    print(f"{big}: {big.stat().st_size / 1e6:.1f} MB, {copies} copies, {n} events")
    load0 = os.getloadavg()
    t = time.perf_counter()
    out = work / "out"
    proc = subprocess.run([sys.executable, "-m", "roofbench.bench.cli", "trace", str(big),
                           "--roofs", str(work / "roofs.json"), "--out", str(out)],
                          cwd=ROOT, capture_output=True, text=True)
    wall = time.perf_counter() - t
    use = resource.getrusage(resource.RUSAGE_CHILDREN)
    rss = use.ru_maxrss / 1024  # KiB -> MiB
    cpu = use.ru_utime + use.ru_stime  # the child's own seconds on a core: what load hides
    print(proc.stdout.strip().splitlines()[0] if proc.stdout.strip() else proc.stderr)
    print(f"roofbench trace: exit {proc.returncode}, wall {wall:.1f} s, CPU {cpu:.1f} s, "
          f"peak RSS {rss:.0f} MiB; load average before {load0}, after {os.getloadavg()} "
          f"on {os.cpu_count()} cores")
    return proc.returncode


if __name__ == "__main__":
    sys.exit(main())
