"""Run one case's pipeline once, for ncu to profile: ``python -m roofbench.bench.suite.ncu_child``.

``roofbench run --ncu`` starts this under ncu after the case was validated and timed in the
main process. It allocates the case, uploads fresh inputs and runs the launches once, nothing
else: no poisoning or validation launches that ncu would also see. With ``--profiler-range``
the pipeline is bracketed by cudaProfilerStart/Stop (ncu runs with ``--profile-from-start
off``), so only its launches are profiled. Before launching it prints one line (see
``case_json``) naming the launches and their model FLOPs and bytes.

Exit codes: 0 done, 2 bad input (one line), 1 the case failed (one line).
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import replace
from typing import Any, Literal

import numpy as np
from roofbench.bench.errors import UserError

from roofbench.errors_text import first_line
from roofbench.records import OccupancyLevel

CASE_MARK = "ROOFBENCH_NCU_CASE "  # the line printed before launching: what it launches


def case_json(case: Any, functions: list[str | None], kind: str = "gpu") -> str:
    """The line ncu_child prints before launching: the launches with their model numbers (read
    by the tests' stand-in ncu, and useful in a log)."""
    bufs = case.buffers()
    launches = []
    for la, fn in zip(case.launches(), functions, strict=True):
        launches.append({"kernel": la.kernel, "function": fn, "flops": la.flops,
                         "read": sum(bufs[n].nbytes for n in la.reads),
                         "write": sum(bufs[n].nbytes for n in la.writes)})
    return CASE_MARK + json.dumps({"case": case.key, "dtype": case.dtype,
                                   "cores": case.cores(kind), "launches": launches})


def parse_level(text: str) -> OccupancyLevel:
    """``blocks_per_sm:3:8`` -> the level (UserError when malformed)."""
    parts = text.split(":")
    if len(parts) != 3 or parts[0] not in ("threads", "blocks_per_sm") or not all(
            p.isdigit() and int(p) > 0 for p in parts[1:]):
        raise UserError(f"malformed occupancy level {text!r}: use threads:N:CORES or "
                        "blocks_per_sm:N:MOST")
    axis: Literal["threads", "blocks_per_sm"] = \
        "threads" if parts[0] == "threads" else "blocks_per_sm"
    return OccupancyLevel(axis, int(parts[1]), int(parts[2]))


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m roofbench.bench.suite.ncu_child",
                                description="run one case's launches once (for ncu)")
    p.add_argument("--backend", required=True)
    p.add_argument("--workload", "--kernel", dest="workload", required=True)
    p.add_argument("--variant", required=True)
    p.add_argument("--dtype", required=True)
    p.add_argument("--size", required=True)
    p.add_argument("--seed", type=int, default=None)
    p.add_argument("--occupancy-level", metavar="AXIS:VALUE:OF",
                   help="run the case at this level of an occupancy scan")
    p.add_argument("--profiler-range", action="store_true",
                   help="bracket the launches with cudaProfilerStart/Stop")
    return p.parse_args(argv)


def run(args: argparse.Namespace) -> None:
    from roofbench.bench.backends import base as backends
    from roofbench.bench.suite.session import select_one

    be = backends.open_for_user(args.backend)
    try:
        case = select_one(be, args.workload, args.variant, args.dtype, args.size)
        if args.occupancy_level:
            case = replace(case, occupancy_level=parse_level(args.occupancy_level))
        hooks = be.profiler_hooks() if args.profiler_range else None
        if args.profiler_range and hooks is None:
            raise UserError(f"--profiler-range: backend {be.name!r} has no profiler "
                            "start/stop")
    except UserError:
        be.close()
        raise
    inputs = case.workload.make_inputs(case.size, case.dtype,
                                       np.random.default_rng(args.seed))
    prepared = be.prepare(case, inputs)
    try:
        facts = prepared.launch_facts()
        names: list[str | None] = [f.function for f in facts] \
            if len(facts) == len(case.launches()) else [None] * len(case.launches())
        print(case_json(case, names, be.kind), flush=True)
        if hooks:
            hooks[0]()
        prepared.run()
        prepared.outputs()  # waits for the launches to finish
        if hooks:
            hooks[1]()
    finally:
        prepared.close()
        be.close()


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    try:
        run(args)
    except UserError as e:
        print(f"ncu_child: error: {e}", file=sys.stderr)
        return e.code
    except Exception as e:  # one line for the parent's note, not a traceback
        print(f"ncu_child: {first_line(e)}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
