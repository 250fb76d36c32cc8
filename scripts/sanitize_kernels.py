#!/usr/bin/env python3
"""Every hand-written CUDA kernel (and the wgmma GEMM) once at a small size on the CuPy backend,
for compute-sanitizer (`make gpu-check`'s sanitize step runs it under memcheck, racecheck,
synccheck and initcheck). Each case is prepared, poisoned, run once and validated.

The sizes are the emulation tests' odd ones (tails, partial tiles, every guard path), one
dtype per kernel variant (the 16-bit one where the variant has it, fp8 where only it takes
another path): small enough that a sanitizer's slowdown costs seconds.

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

# (workload, variant, dtypes, size)
CASES: tuple[tuple[str, str, tuple[str, ...], tuple[int, ...]], ...] = (
    ("vector_add", "scalar", ("fp32",), (1003,)),
    ("vector_add", "vec4", ("fp16", "fp8"), (1003,)),
    ("l2norm", "naive", ("fp32",), (2051,)),
    ("l2norm", "fused", ("bf16",), (2051,)),
    ("rownorm", "naive", ("fp32",), (3, 1001)),
    ("rownorm", "fused", ("fp16",), (3, 1024)),
    ("rownorm", "onepass", ("fp16", "fp32"), (2, 1001)),
    ("gemm", "naive", ("fp32",), (67, 45, 33)),
    ("gemm", "tiled", ("fp16",), (67, 45, 33)),
    ("gemm", "regblock", ("fp32",), (130, 132, 20)),
    ("gemm", "tensor_mma", ("fp16", "fp8"), (130, 136, 97)),
    ("gemm", "tensor", ("fp16", "fp8"), (130, 272, 112)),
    ("gemv", "rows", ("fp16", "fp8"), (37, 1001)),
    ("attention", "naive", ("fp16",), (1, 2, 67, 64)),
    ("attention", "flash", ("bf16",), (1, 2, 131, 128)),
    ("attention_causal", "naive", ("bf16",), (1, 1, 67, 128)),
    ("attention_causal", "flash", ("fp16",), (2, 1, 67, 64)),
)


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
