"""`roofbench occupancy`: one workload's cases once per occupancy level (CPU: Numba threads
1 .. cores; GPU: resident blocks per SM 1 .. the kernel's most), the same FLOPs and bytes at
each, into a run folder like any run's, with the roofline (one column per case), the figure of
bandwidth against occupancy and the level at which the plateau is reached."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from rich.console import Console

from roofbench.paths import home

from ..backends import REGISTRY
from ..backends import base as backends
from ..measure.session import RunOptions, execute, parse_size, select_cases
from ..results import check_writable
from .progress import Heartbeat
from .run import add_measure_options, roofs_with_progress, summary_table


def cmd_occupancy(args: argparse.Namespace) -> int:
    from ..present.occupancy import reached_text, scans
    from ..present.outputs import write_outputs

    be = backends.open_for_user(args.backend)
    out_root = Path(args.out) if args.out else home() / "results"
    check_writable(out_root)
    # Names and sizes are checked before the roofs are measured (a minute on a CPU).
    select_cases(be, workloads=[args.workload], variant=args.variant, dtypes=args.dtype,
                 size=parse_size(args.size) if args.size else None, quick=args.quick)
    roofs = roofs_with_progress(be, args.roofs, args.quick)
    opts = RunOptions(workloads=(args.workload,), variant=args.variant,
                      dtypes=tuple(args.dtype) if args.dtype else None, size=args.size,
                      quick=args.quick, cold=args.cold, seed=args.seed, ncu=args.ncu,
                      occupancy=True)
    with Heartbeat() as beat:
        run, out = execute(opts, be, roofs, out_root, beat)
    paths = write_outputs(run, out)
    Console(width=max(Console().width, 140)).print(summary_table(run))
    found = scans(run)
    for s in found:
        print(f"{s.title}: {reached_text(s)}")
    print(f"results: {out / 'results.json'}")
    print(f"report:  {paths[-2]}")
    print(f"html:    {paths[-1]}")
    if run.interrupted:
        print("interrupted: the finished cases are saved", file=sys.stderr)
        return 130
    uneven = [s.title for s in found if not s.constant_counts()]
    if uneven:
        print(f"not a scan: the levels of {', '.join(uneven)} count different FLOPs or bytes",
              file=sys.stderr)
        return 1
    return 0 if all(c.status in ("ok", "unsupported") for c in run.cases) else 1


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("occupancy", help="one workload at every occupancy level: the roofline "
                                         "column, bandwidth against occupancy")
    p.add_argument("--workload", "--kernel", dest="workload", required=True, metavar="W",
                   help="the workload to scan (--kernel is the same)")
    p.add_argument("--variant", help="only this variant (default: every one the backend can "
                                     "scan)")
    p.add_argument("--dtype", action="append", metavar="D",
                   help="fp64, fp32, fp16, bf16, fp8 (repeatable; default: all the backend runs)")
    p.add_argument("--size", help="N, NxM or MxNxK (default: fills the device by the stated "
                                  "rule)")
    p.add_argument("--backend", default="auto",
                   help="auto (best available), " + ", ".join(REGISTRY))
    add_measure_options(p, "after timing, profile each level under Nsight Compute (achieved "
                           "occupancy, DRAM bytes)")
    p.set_defaults(func=cmd_occupancy)
