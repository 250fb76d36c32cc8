#!/usr/bin/env python3
"""Every hand-written CUDA kernel (and the wgmma GEMM) once at a small size on the CuPy backend,
for compute-sanitizer (`make gpu-check`'s sanitize step runs it under memcheck, racecheck,
synccheck and initcheck). Each case is prepared, poisoned, run once and validated.

The cases are derived from the registry: each variant with a hand-written kernel at the
dtypes and odd size its workload declares (``test_sizes.sanitize``: tails, partial tiles,
every guard path; the 16-bit dtype where the variant has it, fp8 where only it takes another
path): small enough that a sanitizer's slowdown costs seconds.

With --progress FILE each case appends "start <case>" then "ok <case>" or "failed <case>:
<reason>" as it goes, and cases already recorded there are skipped: after a kernel traps (a
sticky CUDA error: every later call of the process would fail) this exits with status 75 and
the caller starts it again for the rest, so a trapping kernel costs its one case.
Exit status: 0 all ok, 1 a case failed, 75 stopped after a sticky error, 2 no GPU backend.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from sticky_cuda import RESUME, STICKY

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

Row = tuple[str, str, tuple[str, ...], tuple[int, ...]]  # workload, variant, dtypes, size


def cases() -> tuple[Row, ...]:
    """One case per variant that launches a kernel of ours on CUDA (registry.hand_written), as
    its workload declares it (``Workload.test_sizes.sanitize``; else its first dtype at the
    first GPU test size): no list here names a workload."""
    from roofbench.kernels.registry import hand_written, workloads

    out = []
    for w in workloads().values():
        sizes = w.suite_sizes()
        for v in w.variants.values():
            if hand_written(v):
                dtypes, size = sizes.sanitize.get(v.name, ((v.dtypes[0],), sizes.gpu[0]))
                out.append((w.name, v.name, tuple(dtypes), tuple(size)))
    return tuple(out)


CASES = cases()


def case_names() -> list[str]:
    return [f"{w}/{v}/{d}/{'x'.join(map(str, s))}" for w, v, ds, s in CASES for d in ds]


def recorded(progress: Path | None) -> set[str]:
    """Cases with an outcome in the progress file (or started and never finished: crashed)."""
    if progress is None or not progress.is_file():
        return set()
    return {ln.split(" ", 2)[1].rstrip(":") for ln in progress.read_text().splitlines()
            if len(ln.split(" ")) > 1}


def note(progress: Path | None, line: str) -> None:
    print(line, flush=True)
    if progress is not None:
        with open(progress, "a") as f:
            f.write(line + "\n")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--progress", type=Path, default=None)
    ap.add_argument("--list", action="store_true", help="print the cases and exit")
    args = ap.parse_args(argv)
    if args.list:
        print("\n".join(case_names()))
        return 0
    import numpy as np
    from roofbench.bench.backends.base import open_backend
    from roofbench.bench.suite.runner import validate
    from roofbench.kernels.registry import workloads
    from roofbench.kernels.spec import Case

    from roofbench.errors_text import first_line

    try:
        backend = open_backend("cuda")
    except Exception as e:
        print(f"sanitize_kernels: no GPU backend: {first_line(e)}", file=sys.stderr)
        return 2
    done = recorded(args.progress)
    failed = False
    for w, v, dtypes, size in CASES:
        for dtype in dtypes:
            name = f"{w}/{v}/{dtype}/{'x'.join(map(str, size))}"
            if name in done:
                continue
            note(args.progress, f"start {name}")
            try:
                work = workloads()[w]
                case = Case(work, work.variants[v], dtype, size)
                inputs = work.make_inputs(size, dtype, np.random.default_rng(1))
                prep = backend.prepare(case, inputs)
                prep.poison()
                prep.run()
                ok, _, why = validate(case, prep.outputs(), work.expected(inputs, size, dtype))
                prep.close()
            except Exception as e:
                why, ok = first_line(e), False
                if STICKY.search(str(e)):
                    note(args.progress, f"failed {name}: {why} (sticky: the rest in a fresh "
                         "process)")
                    return RESUME
            note(args.progress, f"ok {name}" if ok else f"failed {name}: {why}")
            failed |= not ok
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
