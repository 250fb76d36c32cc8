"""`roofbench trace TRACE... [--roofs FILE | --device NAME] [--out DIR]`: PyTorch profiler
traces (Kineto JSON, .json or .json.gz; several files or a folder: the ranks of one job) and
JAX's (.xplane.pb, or jax.profiler.trace's log folder) counted, timed and placed on roofs
(bench/trace/, docs/trace.md)."""

from __future__ import annotations

import argparse
from pathlib import Path

from roofbench.paths import home

from ..results import check_out_folder, make_run_dir, utc_stamp
from .argtypes import out_folder


def cmd_trace(args: argparse.Namespace) -> int:
    from roofbench.bench.trace.api import trace

    out = Path(args.out).absolute() if args.out else None
    if out is not None:
        check_out_folder(out)  # before anything is read
    tp = trace(*args.traces, roofs=args.roofs, device=args.device)
    if out is None:
        out = make_run_dir(home() / "results", tp.device, f"{utc_stamp()}-trace-{tp.name}")
    paths = tp.write(out)
    a = tp.analysis
    counted = sum(1 for o in a.ops if o.counted.distinct is not None)
    print(f"{tp.name}: {len(a.files)} file(s), {counted} of {len(a.ops)} distinct ops "
          f"counted; ops {a.ops_s:.6g} s of the trace's {a.trace_s:.6g} s, no op claims "
          f"{a.unclaimed_s:.6g} s; roofs: {tp.roofs_from}")
    for n in tp.notes:
        print(f"note: {n}")
    for p in paths:
        print(f"wrote {p}")
    return 0


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("trace", help="place a PyTorch (Kineto JSON) or JAX (.xplane.pb) "
                                     "profiler trace op by op on measured roofs")
    p.add_argument("traces", nargs="+", metavar="TRACE",
                   help=".json or .json.gz traces, or a folder of them (one per rank); a "
                        "JAX .xplane.pb (the trace-jax extra) or jax.profiler.trace's folder")
    g = p.add_mutually_exclusive_group()
    g.add_argument("--roofs", metavar="FILE", help="roofs to place it under (a calibration "
                                                   "cache, a roofs file, a results.json)")
    g.add_argument("--device", metavar="NAME", help="the device, where the trace names it "
                                                    "badly (ROCm: 'AMD Radeon Graphics')")
    out_folder(p, "trace-<name>")
    p.set_defaults(func=cmd_trace)
