"""The CPU roofs measured in a process of their own, whatever the caller's environment.

    python -m roofbench.roofs.probes.cpu_roofs_child [--quick]

:func:`isolated_cpu_roofs` starts this module with the environment of ``cpu_env.probe_env``
(the caller's thread and binding variables left out, one thread per core for Numba, OpenMP
and BLAS, the cores to run on); the child pins itself to those cores, measures STREAM, the
FMA peak (each repeat in a grandchild, ``cpu_fma_child``) and the BLAS GEMMs, and prints
progress lines (``progress<TAB>...``) and, last, ``result<TAB>{roofs, notes, environment}``.
When the child cannot run, the roofs are measured in the calling process and a note says so.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from collections import deque
from collections.abc import Callable
from typing import Any, cast

from roofbench.boundary import die_with_parent
from roofbench.paths import child_env
from roofbench.readers import read_roof
from roofbench.roof_context import CoresFrom, ProbeEnvironment, read_context
from roofbench.roof_records import Roof
from roofbench.timing import host_timer

from ..files import jsonable
from . import cpu_env

CHILD_TIMEOUT_S = 900.0
Progress = Callable[[str], None] | None


def measure_cpu_roof_parts(quick: bool, progress: Progress = None
                           ) -> tuple[list[Roof], list[str]]:
    """Every CPU roof measured from this process (the FMA peak in children of its own, with
    the widest vectors; in this process when a child fails, said in a note)."""
    from .cpu import compute_roof_notes, fma_roof_in_process, measure_cpu_roofs
    from .cpu_fma import repeat_notes
    from .cpu_fma_child import isolated_fma_roof, timer_config

    cfg = timer_config(quick)
    time_fn = lambda fn: host_timer(fn, cfg)  # noqa: E731
    notes: list[str] = []

    def fma_roof(precision: str, q: bool) -> Roof:
        try:
            return isolated_fma_roof(precision, q)
        except RuntimeError as e:
            note = (f"{precision} FMA probe measured in the bench process, with the "
                    f"tuning numba started with: {e}")
            if note not in notes:  # once, not once per repeat
                notes.append(note)
            return fma_roof_in_process(time_fn)(precision, q)

    roofs = measure_cpu_roofs(time_fn, quick=quick, progress=progress, fma_roof=fma_roof)
    return roofs, notes + repeat_notes(roofs) + compute_roof_notes(roofs)


def name_for_cores(roofs: list[Roof], pe: ProbeEnvironment) -> list[str]:
    """Roofs measured on fewer cores than the machine allows are named for them: each roof's
    name ends in ``(cores 0-3)``, and the note says whose choice it was."""
    if not pe.restricted:
        return []
    tag = f" (cores {pe.cores_text})"
    for r in roofs:
        if not r.name.endswith(tag):
            r.name += tag
    return [cpu_env.describe(pe) + ": these roofs hold for those cores only"]


def _command(cores_from: str, found: dict[str, str], *flags: str) -> list[str]:
    return [sys.executable, "-m", "roofbench.roofs.probes.cpu_roofs_child",
            "--cores-from", cores_from, "--variables", json.dumps(found), *flags]


def probe_setup(timeout: float = 120.0) -> ProbeEnvironment:
    """What a probe process started from here runs with (``--env-only``: set up, measure
    nothing): its cores, its thread counts, the caller's variables it left out."""
    cores, cores_from = cpu_env.probe_cores()
    cmd = _command(cores_from, cpu_env.found_variables(), "--env-only")
    return _run_child(cmd, cpu_env.probe_env(cores, child_env()), None, timeout)[2]


def isolated_cpu_roofs(quick: bool = False, progress: Progress = None,
                       timeout: float = CHILD_TIMEOUT_S
                       ) -> tuple[list[Roof], list[str], ProbeEnvironment]:
    """The CPU roofs, measured in a child whose cores and threads are its own (module doc):
    (roofs, notes for the roof set, the probe environment)."""
    cores, cores_from = cpu_env.probe_cores()
    found = cpu_env.found_variables()
    cmd = _command(cores_from, found, *(["--quick"] if quick else []))
    env = cpu_env.probe_env(cores, child_env())
    try:
        roofs, notes, pe = _run_child(cmd, env, progress, timeout)
    except RuntimeError as e:
        roofs, notes = measure_cpu_roof_parts(quick, progress)
        pe = cpu_env.probe_environment(cores, cores_from, found)
        notes.insert(0, f"CPU roofs measured in the bench process, with its own threads and "
                        f"affinity ({e})" + (f"; the caller's {', '.join(found)} applied"
                                             if found else ""))
    return roofs, notes + name_for_cores(roofs, pe), pe


def _run_child(cmd: list[str], env: dict[str, str], progress: Progress,
               timeout: float) -> tuple[list[Roof], list[str], ProbeEnvironment]:
    tail: deque[str] = deque(maxlen=5)
    result: dict[str, Any] | None = None
    try:
        # The child dies with this process, even by SIGKILL: never a probe left running.
        proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                text=True, env=env, preexec_fn=die_with_parent)
    except OSError as e:
        raise RuntimeError(f"the probe process did not start: {e}") from None
    assert proc.stdout is not None
    try:
        for line in proc.stdout:
            kind, _, rest = line.rstrip("\n").partition("\t")
            if kind == "progress" and progress:
                progress(rest)
            elif kind == "result":
                result = json.loads(rest)
            elif line.strip():
                tail.append(line.strip())
        rc = proc.wait(timeout=timeout)
    except (subprocess.TimeoutExpired, json.JSONDecodeError) as e:
        proc.kill()
        raise RuntimeError(f"the probe process failed: {e}") from None
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    if rc != 0 or result is None:
        why = tail[-1] if tail else "no output"
        raise RuntimeError(f"the probe process failed (exit {rc}): {why}")
    ctx = read_context({"environment": result["environment"]})
    assert ctx is not None and ctx.environment is not None
    return ([read_roof(r) for r in result["roofs"]], [str(n) for n in result["notes"]],
            ctx.environment)


def main(argv: list[str] | None = None) -> int:
    cores = cpu_env.pin_from_env()  # first: every thread started from here inherits it
    ap = argparse.ArgumentParser(prog="python -m roofbench.roofs.probes.cpu_roofs_child",
                                 description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--cores-from", choices=("machine", "affinity", "option"),
                    default="machine")
    ap.add_argument("--variables", default="{}", help="the caller's thread variables (JSON)")
    ap.add_argument("--env-only", action="store_true",
                    help="set up as a probe would, print its environment, measure nothing")
    args = ap.parse_args(argv)
    cores = cores or cpu_env.affinity()
    cpu_env.limit_threads(len(cores))

    def say(line: str) -> None:
        print(f"progress\t{line}", flush=True)

    roofs, notes = ([], []) if args.env_only else measure_cpu_roof_parts(args.quick, say)
    pe = cpu_env.probe_environment(cores, cast(CoresFrom, args.cores_from),
                                   json.loads(args.variables))
    out = {"roofs": [r.to_dict() for r in roofs], "notes": notes,
           "environment": pe.to_dict()}
    print("result\t" + json.dumps(out, default=jsonable), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
