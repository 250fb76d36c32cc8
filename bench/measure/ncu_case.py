"""Run one case's pipeline once, for ncu to profile: ``python -m roofbench.bench.measure.ncu_case``.

``roofbench run --ncu`` starts this under ncu after the case was validated and timed in the
main process. It allocates the case, uploads fresh inputs and runs the launches once, nothing
else: no poisoning or validation launches that ncu would also see. With ``--profiler-range``
the pipeline is bracketed by cudaProfilerStart/Stop (ncu runs with ``--profile-from-start
off``), so only its launches are profiled. Before launching it prints one line (see
``ncu.case_json``) naming the launches and their model FLOPs and bytes.

Exit codes: 0 done, 2 bad input (one line), 1 the case failed (one line).
"""

from __future__ import annotations

import argparse
import sys

import numpy as np

from roofbench.errors_text import first_line

from ..errors import UserError


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m roofbench.bench.measure.ncu_case",
                                description="run one case's launches once (for ncu)")
    p.add_argument("--backend", required=True)
    p.add_argument("--kernel", required=True)
    p.add_argument("--variant", required=True)
    p.add_argument("--dtype", required=True)
    p.add_argument("--size", required=True)
    p.add_argument("--seed", type=int, default=None)
    p.add_argument("--profiler-range", action="store_true",
                   help="bracket the launches with cudaProfilerStart/Stop")
    return p.parse_args(argv)


def run(args: argparse.Namespace) -> None:
    from roofbench.bench.measure.ncu import case_json
    from roofbench.kernels.registry import workloads
    from roofbench.kernels.spec import Case

    from ..backends import base as backends
    from .runner import parse_size, w_check

    ws = workloads()
    w = ws.get(args.kernel)
    if w is None:
        raise UserError(f"unknown kernel {args.kernel!r}; choose from: {', '.join(ws)}")
    v = w.variants.get(args.variant)
    if v is None:
        raise UserError(f"unknown variant {args.variant!r} of {w.name}; choose from: "
                        f"{', '.join(w.variants)}")
    if args.dtype not in v.dtypes:
        raise UserError(f"{w.name}/{v.name} has no dtype {args.dtype!r}; choose from: "
                        f"{', '.join(v.dtypes)}")
    size = parse_size(args.size)
    w_check(w, size)
    be = backends.open_for_user(args.backend)
    hooks = be.profiler_hooks() if args.profiler_range else None
    if args.profiler_range and hooks is None:
        be.close()
        raise UserError(f"--profiler-range: backend {be.name!r} has no profiler start/stop")
    case = Case(w, v, args.dtype, size)
    why = be.supports(case)
    if why is not None:
        raise UserError(f"{case.key} does not run on {be.name}: {why}")
    inputs = w.make_inputs(size, args.dtype, np.random.default_rng(args.seed))
    prepared = be.prepare(case, inputs)
    try:
        facts = prepared.launch_facts()
        names = [f.function for f in facts] if len(facts) == len(case.launches()) \
            else [None] * len(case.launches())
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
        print(f"ncu_case: error: {e}", file=sys.stderr)
        return e.code
    except Exception as e:  # one line for the parent's note, not a traceback
        print(f"ncu_case: {first_line(e)}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
