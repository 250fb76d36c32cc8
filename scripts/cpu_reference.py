"""Compare the numba CPU probes with plain C references, on the same machine at the same time.

    python scripts/cpu_reference.py [--rounds N] [--quick] [--out FILE] [--strict]

Compiles ``scripts/c_ref/triad.c`` (C/OpenMP STREAM triad) and ``scripts/c_ref/fma_peak.c`` (C
intrinsics FMA peak, widest vectors) with ``gcc -O3 -march=native -fopenmp`` into
``scripts/c_ref/bin/`` (a temp dir when that is not writable), then runs rounds that interleave
a C run and the matching numba probe (same array size, same thread count, alternating which
goes first) so that both see the same machine load. Per round each side reports its best
sample (STREAM's convention) and its median; the table shows the median over rounds of each
side's value and, as the verdict, the median over rounds of the paired numba/C ratios (the
ratio of the per-round medians is shown for information). Targets: numba triad
>= 95% of the C triad, numba FP64 FMA >= 90% of the C intrinsics peak. FP32 is information.
Run it on a quiet machine: other load makes every number noisy (pairing only makes it fair).

OpenMP threads are pinned one per core (OMP_NUM_THREADS = numba's thread count,
OMP_PROC_BIND=close, OMP_PLACES=cores); numba uses its default of one thread per core.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numba
from roofbench.bench.backends.cpu import cpu_model
from roofbench.roofs.probes import cpu_features as feat
from roofbench.roofs.probes import cpu_fma as fma
from roofbench.roofs.probes import cpu_stream as cs

from roofbench import cpu_cache as llc
from roofbench.timing import TimerConfig, host_timer

C_REF_DIR = Path(__file__).resolve().parent / "c_ref"
CFLAGS = ("-O3", "-march=native", "-fopenmp")
PROGRAMS = ("triad", "fma_peak")
TARGETS: dict[str, float | None] = {"triad": 0.95, "fp64 FMA": 0.90, "fp32 FMA": None}


class ReferenceError(RuntimeError):
    """A one-line, user-facing failure (no compiler, a program failed)."""


def find_cc() -> str | None:
    return os.environ.get("CC") or shutil.which("gcc")


def bin_dir() -> Path:
    d = C_REF_DIR / "bin"
    try:
        d.mkdir(exist_ok=True)
        probe = d / ".write-test"
        probe.touch()
        probe.unlink()
        return d
    except OSError:  # installed read-only: build in a temp dir instead
        return Path(tempfile.mkdtemp(prefix="roofbench-c_ref-"))


def compile_program(name: str, out_dir: Path | None = None, cc: str | None = None,
                    defines: tuple[str, ...] = ()) -> tuple[Path, list[str]]:
    """Compile ``c_ref/<name>.c`` (``defines``: "NAME=value" macros); returns the binary and
    the command used."""
    cc = cc or find_cc()
    if not cc:
        raise ReferenceError("no C compiler: install gcc (or set CC) to build scripts/c_ref")
    out_dir = out_dir or bin_dir()
    exe = out_dir / name
    cmd = [cc, *CFLAGS, *(f"-D{d}" for d in defines), str(C_REF_DIR / f"{name}.c"), "-o",
           str(exe), "-lm"]
    try:
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    except (OSError, subprocess.TimeoutExpired) as e:
        raise ReferenceError(f"cannot run C compiler {cc!r}: {e}") from None
    if r.returncode != 0:
        msg = (r.stderr.strip().splitlines() or ["(no output)"])[-1]
        raise ReferenceError(f"compiling {name}.c failed: {msg}")
    return exe, cmd


def omp_env(threads: int) -> dict[str, str]:
    return dict(os.environ, OMP_NUM_THREADS=str(threads), OMP_PROC_BIND="close",
                OMP_PLACES="cores")


_ALL_CPUS = sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else []


def _unpin() -> None:
    # A child inherits the affinity of the thread that forks it; if OpenMP pinned this
    # process's main thread to one core (OMP_PROC_BIND set for numba), the C program would
    # otherwise get that single core for all its threads.
    if _ALL_CPUS:
        os.sched_setaffinity(0, _ALL_CPUS)


def run_program(exe: Path, args: list[str], threads: int, timeout: float = 300) -> dict[str, Any]:
    """Run a reference program and parse the JSON object on its last stdout line."""
    r = subprocess.run([str(exe), *args], capture_output=True, text=True, env=omp_env(threads),
                       timeout=timeout, preexec_fn=_unpin)
    lines = r.stdout.strip().splitlines()
    if r.returncode != 0 or not lines:
        why = (r.stderr.strip().splitlines() or lines or ["no output"])[-1]
        raise ReferenceError(f"{exe.name} {' '.join(args)} failed (exit {r.returncode}): {why}")
    return json.loads(lines[-1])


@dataclass
class Row:
    probe: str
    unit: str
    numba_best: list[float] = field(default_factory=list)  # per round
    numba_median: list[float] = field(default_factory=list)
    c_best: list[float] = field(default_factory=list)
    c_median: list[float] = field(default_factory=list)

    @property
    def ratio(self) -> float:
        """Median over rounds of numba/C, each round's pair run back to back: load that
        drifts between rounds cancels out of every pair."""
        return statistics.median([nb / c for nb, c in zip(self.numba_best, self.c_best,
                                                           strict=True)])

    @property
    def ratio_of_medians(self) -> float:
        return statistics.median(self.numba_median) / statistics.median(self.c_median)

    @property
    def target(self) -> float | None:
        return TARGETS.get(self.probe)

    @property
    def passed(self) -> bool | None:
        return None if self.target is None else self.ratio >= self.target

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d.update(numba=statistics.median(self.numba_best), c=statistics.median(self.c_best),
                 ratio=self.ratio,
                 ratio_of_medians=self.ratio_of_medians, target=self.target, passed=self.passed)
        return d


def _rates(work: float, seconds: list[float]) -> tuple[float, float]:
    return work / min(seconds), work / statistics.median(seconds)


def compare(rounds: int = 5, reps: int = 10, quick: bool = False,
            progress: Any = print) -> dict[str, Any]:
    """Build the C programs, run the interleaved rounds, return every number measured."""
    s = _prepare(rounds, reps, quick, progress)
    rows = {k: Row(k, u) for k, u in (("triad", "GB/s"), ("fp64 FMA", "GFLOP/s"),
                                      ("fp32 FMA", "GFLOP/s"))}
    c_info: dict[str, Any] = {}
    _interleave(_paired_runs(s, reps, rows, c_info), rounds, progress)
    s.arrays.check("triad")
    for p in s.probes.values():
        p.check()
    return _result(s, rows, c_info, rounds, reps)


@dataclass
class _Subjects:
    """Both sides of the comparison, sized alike: the compiled C programs and the numba
    triad arrays and FMA probes (settled and checked once)."""

    triad_exe: Path
    triad_cmd: list[str]
    fma_exe: Path
    fma_cmd: list[str]
    threads: int
    llc: int
    n: int  # triad elements per array
    settle_s: float
    arrays: Any  # cs.StreamArrays
    triad_call: Any
    probes: dict[str, Any]  # precision -> fma.FmaProbe
    c_steps: int


def _prepare(rounds: int, reps: int, quick: bool, progress: Any) -> _Subjects:
    out_dir = bin_dir()
    triad_exe, triad_cmd = compile_program("triad", out_dir)
    # The C probe runs as many chains as the numba probe (the target's model); the C file
    # refuses a count its vector registers cannot hold.
    shape = fma.probe_shape()
    fma_exe, fma_cmd = compile_program("fma_peak", out_dir,
                                       defines=(f"NACC={shape.accumulators}",))
    threads = int(numba.get_num_threads())
    llc_bytes = llc.last_level_cache_bytes()
    # The C program holds its own three arrays beside ours: half the budget each.
    n = cs.stream_elements(llc_bytes, cs.default_stream_budget() // 2, factor=4.0 if quick else 8.0)
    progress(f"triad: {n} FP64 elements per array ({8 * n / llc_bytes:.1f}x LLC of "
             f"{llc_bytes / cs.MiB:.0f} MiB), {threads} threads; {rounds} rounds x {reps} reps")

    arrays = cs.StreamArrays(n)
    arrays.check("triad")
    triad_call = arrays.call("triad")
    settle_s = 1.0 if quick else 3.0  # as cs.measure_stream does before timing
    progress(f"settling the numba arrays for {settle_s:.0f} s")
    cs.settle(arrays, settle_s)
    probes = {p: fma.FmaProbe(p, target_s=0.03 if quick else 0.05) for p in ("fp64", "fp32")}
    for p in probes.values():
        p()
        p.check()
    # Same FLOPs per thread per call as the numba fp64 call (same accumulators and lanes).
    c_steps = probes["fp64"].iters * fma.STEPS
    return _Subjects(triad_exe, triad_cmd, fma_exe, fma_cmd, threads, llc_bytes, n, settle_s,
                     arrays, triad_call, probes, c_steps)


def _paired_runs(s: _Subjects, reps: int, rows: dict[str, Row],
                 c_info: dict[str, Any]) -> list[tuple[Callable[[], None], Callable[[], None]]]:
    """(C run, its numba counterpart) for the triad and the FMAs; each appends one round's
    best and median to ``rows`` (the C side also what its program reports to ``c_info``)."""
    cfg = TimerConfig(warmup_s=0.1, warmup_min_runs=2, min_samples=reps, max_samples=reps,
                      budget_s=1e9, target_cv=0.0)

    def c_triad() -> None:
        t = run_program(s.triad_exe, [str(s.n), str(reps)], s.threads)
        if not t.get("valid", False):
            raise ReferenceError("C triad produced wrong values")
        rows["triad"].c_best.append(t["best_gbs"])
        rows["triad"].c_median.append(t["median_gbs"])
        c_info.update(triad_threads=t["threads"], triad_thp_madvise=t.get("thp_madvise"))

    def c_fma() -> None:
        f = run_program(s.fma_exe, [str(s.c_steps), str(reps)], s.threads)
        for prec in ("fp64", "fp32"):
            rows[f"{prec} FMA"].c_best.append(f[prec]["best_gflops"])
            rows[f"{prec} FMA"].c_median.append(f[prec]["median_gflops"])
        c_info.update(fma_threads=f["threads"], fma_vector_bits=f["vector_bits"],
                      fma_accumulators=f["accumulators"], fma_steps=f["steps"])

    def numba_triad() -> None:
        best, med = _rates(24 * s.n / 1e9, host_timer(s.triad_call, cfg).samples)
        rows["triad"].numba_best.append(best)
        rows["triad"].numba_median.append(med)

    def numba_fma() -> None:
        for prec, probe in s.probes.items():
            best, med = _rates(probe.flops / 1e9, host_timer(probe, cfg).samples)
            rows[f"{prec} FMA"].numba_best.append(best)
            rows[f"{prec} FMA"].numba_median.append(med)

    return [(c_triad, numba_triad), (c_fma, numba_fma)]


def _interleave(pairs: list[tuple[Callable[[], None], Callable[[], None]]], rounds: int,
                progress: Any) -> None:
    """Each C run sits right beside its numba counterpart; who goes first alternates by
    round, so that both see the same machine load."""
    t0 = time.time()
    for r in range(rounds):
        for c_run, numba_run in pairs:
            for run in ((c_run, numba_run) if r % 2 == 0 else (numba_run, c_run)):
                run()
        progress(f"round {r + 1}/{rounds} done ({time.time() - t0:.0f} s)")


def _result(s: _Subjects, rows: dict[str, Row], c_info: dict[str, Any], rounds: int,
            reps: int) -> dict[str, Any]:
    """Every number measured and how (the JSON written by --out)."""
    return {
        "schema": "roofbench.cpu_reference/1",
        "utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "host": platform.node(), "cpu": cpu_model(), "threads": s.threads,
        "llc_bytes": s.llc, "triad_elements": s.n, "triad_array_bytes": 8 * s.n,
        "numba_settle_s": s.settle_s,
        "rounds": rounds, "reps_per_round": reps,
        "estimator": "per round: each side's best sample; value: median over rounds; "
                     "ratio: median over rounds of the paired numba/C ratios",
        "compile": {"triad": s.triad_cmd, "fma_peak": s.fma_cmd},
        "omp_env": {k: omp_env(s.threads)[k] for k in ("OMP_NUM_THREADS", "OMP_PROC_BIND",
                                                       "OMP_PLACES")},
        "c": c_info,
        "numba": {"version": numba.__version__, "threading_layer": _layer(),
                  "cpu_features_env": os.environ.get("NUMBA_CPU_FEATURES"),
                  **{f"{p}_fma": {"vector_bits": pr.asm["vector_bits"], "row": pr.row,
                                  "accumulators": pr.accumulators,
                                  "model": pr.shape.to_dict(),
                                  "steps": fma.STEPS, "iters": pr.iters,
                                  "flops_per_run": pr.flops, "asm": pr.asm}
                     for p, pr in s.probes.items()}},
        "rows": [row.to_dict() for row in rows.values()],
        "passed": all(row.passed is not False for row in rows.values()),
    }


def _layer() -> str | None:
    try:
        return numba.threading_layer()
    except ValueError:
        return None


def _fma_shape(d: dict[str, Any], bits_key: str) -> str:
    acc = d.get("accumulators", d.get("fma_accumulators"))
    return f"{d.get(bits_key)}-bit" + (f" x {acc} chains" if acc else "")


def format_table(result: dict[str, Any]) -> str:
    head = (f"{'probe':10s} {'unit':8s} {'numba':>9s} {'C':>9s} {'ratio':>7s} "
            f"{'(of medians)':>12s} {'target':>7s}  result")
    lines = [head, "-" * len(head)]
    for d in result["rows"]:
        target = f">={d['target']:.0%}" if d["target"] is not None else "-"
        verdict = {True: "pass", False: "FAIL", None: "info"}[d["passed"]]
        lines.append(f"{d['probe']:10s} {d['unit']:8s} {d['numba']:9.2f} {d['c']:9.2f} "
                     f"{d['ratio']:7.1%} {d['ratio_of_medians']:12.1%} {target:>7s}  {verdict}")
    lines.append(f"({result['estimator']}; {result['rounds']} rounds x "
                 f"{result['reps_per_round']} reps, {result['threads']} threads, "
                 f"triad {result['triad_array_bytes'] / cs.MiB:.0f} MiB per array, "
                 f"numba FMA {_fma_shape(result['numba']['fp64_fma'], 'vector_bits')}, "
                 f"C FMA {_fma_shape(result['c'], 'fma_vector_bits')})")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="scripts/cpu_reference.py",
                                 description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=7, help="interleaved rounds (default 7)")
    ap.add_argument("--reps", type=int, default=10, help="samples per side per round")
    ap.add_argument("--quick", action="store_true", help="4x LLC arrays, shorter FMA calls")
    ap.add_argument("--out", type=Path, help="also write every number to this JSON file")
    ap.add_argument("--strict", action="store_true", help="exit 1 when a target is missed")
    args = ap.parse_args(argv)
    if args.rounds < 1 or args.reps < 1:
        print("error: --rounds and --reps must be at least 1", file=sys.stderr)
        return 2
    try:
        result = compare(rounds=args.rounds, reps=args.reps, quick=args.quick,
                         progress=lambda s: print(s, file=sys.stderr, flush=True))
    except (ReferenceError, subprocess.TimeoutExpired) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    print(format_table(result))
    if args.out:
        try:
            args.out.parent.mkdir(parents=True, exist_ok=True)
            tmp = args.out.with_name(args.out.name + ".tmp")
            tmp.write_text(json.dumps(result, indent=2) + "\n")
            os.replace(tmp, args.out)  # atomic: no half-written file
        except OSError as e:
            print(f"error: cannot write {args.out}: {e.strerror or e}", file=sys.stderr)
            return 2
        print(f"wrote {args.out}")
    return 1 if args.strict and not result["passed"] else 0


def _restart_with_widest_vectors() -> None:
    """Numba reads NUMBA_CPU_FEATURES only at import: when the CPU needs it for its widest
    vectors (AVX-512 on Intel, see cpu_features.widest_vector_env), start this program again
    with it, once (the variable is then set, so the new process does not restart)."""
    extra = feat.widest_vector_env()
    if extra:
        os.execve(sys.executable, [sys.executable, str(Path(__file__).resolve()),
                                   *sys.argv[1:]], {**os.environ, **extra})


if __name__ == "__main__":
    _restart_with_widest_vectors()
    sys.exit(main())
