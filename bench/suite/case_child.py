"""The worker of isolated cases (bench/suite/isolation.py): ``python -m
roofbench.bench.suite.case_child --backend NAME``.

Reads one JSON request a line from stdin (workload, variant, dtype, size, seed, timer
settings), runs the case as the runner does, and answers with one line, ``RESULT_MARK`` and
the CaseResult as JSON (roofs are applied by the parent). After a case that ended in an error
it exits: a sticky CUDA error would fail every later case of this process. End of stdin ends
it. Exit codes: 0 done, 2 bad input (one line on stderr), 3 ended after an error.
"""

from __future__ import annotations

import argparse
import json
import sys

import numpy as np
from roofbench.bench.errors import UserError
from roofbench.bench.suite.isolation import RESULT_MARK

from roofbench.errors_text import first_line
from roofbench.records import OccupancyLevel
from roofbench.timing import TimerConfig


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m roofbench.bench.suite.case_child")
    p.add_argument("--backend", required=True)
    args = p.parse_args(argv)
    from roofbench.bench.backends import base as backends
    from roofbench.bench.suite.case_record import case_record
    from roofbench.bench.suite.runner import run_case
    from roofbench.kernels.registry import workloads
    from roofbench.kernels.spec import Case

    try:
        be = backends.open_for_user(args.backend)
    except UserError as e:
        print(f"case_child: error: {e}", file=sys.stderr)
        return 2
    ws = workloads()
    for line in sys.stdin:
        if not line.strip():
            continue
        req = json.loads(line)
        w = ws[req["workload"]]
        level = req.get("occupancy_level")  # an occupancy scan's level, run as in the parent
        case = Case(w, w.variants[req["variant"]], req["dtype"], tuple(req["size"]),
                    occupancy_level=OccupancyLevel(**level) if level else None)
        cfg = TimerConfig(**req["cfg"])
        launch_cfg = TimerConfig(**req["launch_cfg"]) if req.get("launch_cfg") else None
        try:
            rec = run_case(case, be, None, cfg, np.random.default_rng(req["seed"]),
                           per_launch=req["per_launch"], launch_cfg=launch_cfg)
        except Exception as e:  # a fault while freeing (a sticky error): still one answer
            rec = case_record(case, be, status="error", error=first_line(e))
        print(RESULT_MARK + json.dumps(rec.to_dict(), allow_nan=True), flush=True)
        if rec.outcome.status == "error":
            return 3
    return 0


if __name__ == "__main__":
    sys.exit(main())
