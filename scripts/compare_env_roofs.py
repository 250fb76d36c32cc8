#!/usr/bin/env python3
"""roofbench's CPU roofs measured in shells that carry the thread and binding variables HPC
users have, beside a C intrinsics FMA loop run in the same shell (issue 25, item 4).

    python scripts/compare_env_roofs.py [--rounds 2] [--json out.json] [--only NAME ...]

For each setting (none; OMP_NUM_THREADS=1; MKL/OpenBLAS/Numba thread variables = 1; OpenMP
bound close to cores with one thread; GOMP/KMP affinity lists; ``taskset -c 1``), a round runs

- ``roofbench roofs --backend cpu`` in a process started with that environment (and that
  affinity, for taskset): its FMA and BLAS roofs and what its probes recorded (cores, threads);
- the C loop (``scripts/c_ref/fma_peak.c``, built as ``make cpu-ref`` builds it, with the
  probe's chain count) as that shell gives it: its OpenMP threads are whatever the variables
  say, which is what the user's own OpenMP program gets there;
- the same C loop on the cores roofbench's probes ran on, one pinned thread per core
  (OMP_NUM_THREADS = cores, OMP_PROC_BIND=close, OMP_PLACES=cores): the machine's FMA peak
  on those cores, which the roof must match.

The settings run in turn within a round and the rounds repeat the whole list, so a slow
moment of a VM touches one figure of a row, not all of them. A row's ratio is the median of
the rounds' roofbench / C-on-the-probe's-cores ratios; the target is within 5%. Prints one
Markdown table, the load before and after, the date and the commit; ``--json`` keeps every
figure of every round. Run it with nothing else running.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import statistics
import subprocess
import sys
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from cpu_reference import ReferenceError, bin_dir, compile_program
from roofbench.roofs.probes import cpu_env
from roofbench.roofs.probes import cpu_fma as fma

from roofbench.readers import read_roofset

ROOT = Path(__file__).resolve().parent.parent
TARGET = 0.05  # the roof within 5% of the C loop on the same cores
C_STEPS, C_REPS = 20_000_000, 10


@dataclass(frozen=True)
class Setting:
    """A shell as a user has it: variables set, and the cores it may use (taskset)."""

    name: str
    variables: dict[str, str] = field(default_factory=dict)
    cores: tuple[int, ...] | None = None  # None: every core the machine allows


SETTINGS = (
    Setting("no thread variables"),
    Setting("OMP_NUM_THREADS=1", {"OMP_NUM_THREADS": "1"}),
    Setting("MKL/OpenBLAS/Numba threads=1", {"MKL_NUM_THREADS": "1",
                                             "OPENBLAS_NUM_THREADS": "1",
                                             "NUMBA_NUM_THREADS": "1"}),
    Setting("OMP bind close, places cores, 1 thread", {"OMP_NUM_THREADS": "1",
                                                       "OMP_PROC_BIND": "close",
                                                       "OMP_PLACES": "cores"}),
    Setting("GOMP_CPU_AFFINITY=0 KMP_AFFINITY=compact", {"GOMP_CPU_AFFINITY": "0",
                                                         "KMP_AFFINITY": "compact"}),
    Setting("taskset -c 1", cores=(1,)),
)


def shell_env(setting: Setting, environ: dict[str, str] | None = None) -> dict[str, str]:
    """The environment of a shell with ``setting``: this one's without any thread or binding
    variable, plus the setting's."""
    base = {k: v for k, v in (os.environ if environ is None else environ).items()
            if k not in cpu_env.THREAD_VARIABLES}
    return {**base, **setting.variables}


def pinned_env(setting: Setting, cores: list[int],
               environ: dict[str, str] | None = None) -> dict[str, str]:
    """The shell's environment with one OpenMP thread pinned to each of ``cores``."""
    return {**shell_env(setting, environ), "OMP_NUM_THREADS": str(len(cores)),
            "OMP_PROC_BIND": "close", "OMP_PLACES": "cores"}


def _affinity(cores: tuple[int, ...] | list[int] | None) -> Callable[[], None] | None:
    if cores is None or not hasattr(os, "sched_setaffinity"):
        return None
    return lambda: os.sched_setaffinity(0, cores)


def run_c(exe: Path, env: dict[str, str], cores: tuple[int, ...] | list[int] | None,
          steps: int = C_STEPS, reps: int = C_REPS) -> dict[str, Any]:
    """The C FMA loop under ``env`` on ``cores``: its threads and best GFLOP/s per
    precision."""
    r = subprocess.run([str(exe), str(steps), str(reps)], capture_output=True, text=True,
                       env=env, timeout=300, preexec_fn=_affinity(cores))
    lines = r.stdout.strip().splitlines()
    if r.returncode != 0 or not lines:
        why = (r.stderr.strip().splitlines() or ["no output"])[-1]
        raise ReferenceError(f"{exe.name} failed (exit {r.returncode}): {why}")
    out = json.loads(lines[-1])
    return {"threads": out["threads"], "fp64": out["fp64"]["best_gflops"],
            "fp32": out["fp32"]["best_gflops"]}


def run_roofbench(setting: Setting, out: Path) -> dict[str, Any]:
    """``roofbench roofs --backend cpu`` in the shell of ``setting``: its FMA and BLAS roofs
    (GFLOP/s) and the probes' cores and threads as its roof set records them."""
    cmd = [sys.executable, "-m", "roofbench.bench.cli", "roofs", "--backend", "cpu",
           "--out", str(out)]
    r = subprocess.run(cmd, capture_output=True, text=True, env=shell_env(setting),
                       timeout=1800, preexec_fn=_affinity(setting.cores))
    if r.returncode != 0:
        why = (r.stderr.strip().splitlines() or ["no output"])[-1]
        raise ReferenceError(f"roofbench roofs failed under {setting.name}: {why}")
    return read_roofs(json.loads(out.read_text()))


def read_roofs(doc: Any) -> dict[str, Any]:
    """The figures compared from a roofs file (``roofbench roofs --out``), read as the roof
    set it is: the FMA and BLAS roofs (GFLOP/s) by their probe, the probes' cores and
    threads."""
    rs = read_roofset(doc)
    env = rs.context.environment if rs.context else None
    if env is None:
        raise ReferenceError("the roofs file records no probe environment")
    got: dict[str, Any] = {"cores": env.cores, "threads": env.threads,
                           "cores_from": env.cores_from, "variables": env.variables}
    for roof in rs.roofs:
        probe = roof.evidence.get("probe")
        if roof.kind == "compute" and probe in ("fma-peak", "blas-gemm"):
            got[f"{roof.precision} {probe}"] = roof.value / 1e9
    return got


def one_round(settings: tuple[Setting, ...], exe: Path, tmp: Path, progress: Any = print
              ) -> list[dict[str, Any]]:
    """Every setting once: roofbench, the C loop as the shell gives it, the C loop on the
    probe's cores."""
    rows = []
    for s in settings:
        rb = run_roofbench(s, tmp / "roofs.json")
        shell_c = run_c(exe, shell_env(s), s.cores)
        probe_c = run_c(exe, pinned_env(s, rb["cores"]), rb["cores"])
        rows.append({"setting": s.name, "roofbench": rb, "c_shell": shell_c,
                     "c_probe_cores": probe_c})
        progress(f"  {s.name}: roofbench fp64 {rb['fp64 fma-peak']:.1f} on cores "
                 f"{rb['cores']}, C {probe_c['fp64']:.1f} there, C as the shell gives it "
                 f"{shell_c['fp64']:.1f} ({shell_c['threads']} threads)")
    return rows


def table(rounds: list[list[dict[str, Any]]]) -> list[dict[str, Any]]:
    """One row per setting: the last round's records, the median over rounds of each figure
    and of roofbench / C-on-the-probe's-cores per precision, and the verdict."""
    out = []
    for i, last in enumerate(rounds[-1]):
        per = [r[i] for r in rounds]
        row: dict[str, Any] = {"setting": last["setting"], "cores": last["roofbench"]["cores"],
                               "threads": last["roofbench"]["threads"],
                               "c_shell_threads": last["c_shell"]["threads"]}
        for p in ("fp64", "fp32"):
            row[f"roofbench {p}"] = statistics.median(r["roofbench"][f"{p} fma-peak"] for r in per)
            row[f"c {p}"] = statistics.median(r["c_probe_cores"][p] for r in per)
            row[f"c shell {p}"] = statistics.median(r["c_shell"][p] for r in per)
            row[f"blas {p}"] = statistics.median(r["roofbench"][f"{p} blas-gemm"] for r in per)
            row[f"ratio {p}"] = statistics.median(
                r["roofbench"][f"{p} fma-peak"] / r["c_probe_cores"][p] for r in per)
        row["within"] = all(abs(row[f"ratio {p}"] - 1) <= TARGET for p in ("fp64", "fp32"))
        out.append(row)
    return out


def markdown(rows: list[dict[str, Any]]) -> str:
    lines = ["| setting | probe cores | probe threads (numba, blas) | roofbench FMA fp64 / fp32 "
             "| C loop, those cores | roofbench / C | C as the shell gives it (threads) "
             "| BLAS dgemm / sgemm |", "|---|---|---|---|---|---|---|---|"]
    for r in rows:
        th = r["threads"]
        lines.append(
            f"| {r['setting']} | {','.join(map(str, r['cores']))} | {th.get('numba')}, "
            f"{th.get('blas')} | {r['roofbench fp64']:.1f} / {r['roofbench fp32']:.1f} "
            f"| {r['c fp64']:.1f} / {r['c fp32']:.1f} "
            f"| **{r['ratio fp64']:.3f}** / **{r['ratio fp32']:.3f}** "
            f"| {r['c shell fp64']:.1f} / {r['c shell fp32']:.1f} ({r['c_shell_threads']}) "
            f"| {r['blas fp64']:.1f} / {r['blas fp32']:.1f} |")
    return "\n".join(lines)


def _commit() -> str:
    r = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"],
                       capture_output=True, text=True)
    return r.stdout.strip() or "unknown"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=2, help="every setting, this many times")
    ap.add_argument("--only", action="append", metavar="NAME",
                    help="only the settings whose name contains NAME (repeatable)")
    ap.add_argument("--json", type=Path, help="write every figure here")
    args = ap.parse_args(argv)
    if args.rounds < 1:
        ap.error("--rounds must be at least 1")
    allowed = set(cpu_env.machine_cores())
    settings = tuple(s for s in SETTINGS
                     if (s.cores is None or set(s.cores) <= allowed)
                     and (not args.only or any(o in s.name for o in args.only)))
    if not settings:
        ap.error("no setting left to run (--only matched none, or taskset's core is absent)")
    try:
        exe, cmd = compile_program("fma_peak", bin_dir(),
                                   defines=(f"NACC={fma.probe_shape().accumulators}",))
        started = datetime.datetime.now(datetime.UTC)
        load_before = os.getloadavg()
        rounds = []
        with tempfile.TemporaryDirectory(prefix="roofbench-env-") as tmp:
            for i in range(args.rounds):
                print(f"round {i + 1} of {args.rounds}", flush=True)
                rounds.append(one_round(settings, exe, Path(tmp)))
    except ReferenceError as e:
        print(f"compare_env_roofs: {e}", file=sys.stderr)
        return 1
    rows = table(rounds)
    print(f"\n{started:%Y-%m-%d %H:%M} UTC, commit {_commit()}, {args.rounds} rounds, C built "
          f"as `{' '.join(cmd)}`; load (1/5/15 min) before "
          f"{[f'{x:.2f}' for x in load_before]}, after {[f'{x:.2f}' for x in os.getloadavg()]}"
          "\n")
    print(markdown(rows))
    if args.json:
        args.json.write_text(json.dumps({"rounds": rounds, "rows": rows, "c_build": cmd,
                                         "commit": _commit(),
                                         "started_utc": started.isoformat()}, indent=1))
    return 0 if all(r["within"] for r in rows) else 2


if __name__ == "__main__":
    sys.exit(main())
