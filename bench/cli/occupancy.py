"""`roofbench occupancy`: one workload's cases once per occupancy level (CPU: Numba threads
1 .. cores; GPU: resident blocks per SM 1 .. the kernel's most), the same FLOPs and bytes at
each, into a run folder like any run's, with the roofline (one column per case), the figure of
bandwidth against occupancy and the level at which the plateau is reached."""

from __future__ import annotations

import argparse
import sys

from roofbench.bench.suite.session import RunOptions

from roofbench.boundary import EXIT_STOPPED

from ..backends import REGISTRY
from ..backends import base as backends
from .run import (
    add_measure_options,
    run_session,
    said_written,
)


def cmd_occupancy(args: argparse.Namespace) -> int:
    """As `roofbench run`: settings and names checked, then the run's own folder (before the
    roofs), then roofs, cases and the report each inside the session's guard; whatever stops
    it is saved in results.json as its stop, and the report is still written."""
    from ..present.occupancy_scan import reached_text, scans

    be = backends.open_for_user(args.backend)
    opts = RunOptions(workloads=(args.workload,), variant=args.variant,
                      dtypes=tuple(args.dtype) if args.dtype else None, size=args.size,
                      quick=args.quick, samples=args.samples, cold=args.cold,
                      seed=args.seed, ncu=args.ncu, occupancy_scan=True)
    session, paths = run_session(args, be, opts)
    run, out = session.run, session.out
    found = scans(run)
    for s in found:
        print(f"{s.title}: {reached_text(s)}")
    if said_written(run, out, paths, figures=not args.no_figures):
        return EXIT_STOPPED
    uneven = [s.title for s in found if not s.constant_counts()]
    if uneven:
        print(f"not a scan: the levels of {', '.join(uneven)} count different FLOPs or bytes",
              file=sys.stderr)
        return 1
    return 0 if all(c.outcome.status in ("ok", "unsupported") for c in run.cases) else 1


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
