"""The CPU FMA roof, measured in a process of its own that numba starts with the widest vectors.

    python -m roofbench.roofs.probes.cpu_fma_child fp64|fp32 [--quick]

Numba reads ``NUMBA_CPU_FEATURES`` once, when it is imported; on Intel AVX-512 cores LLVM
prefers 256-bit vectors unless the features say ``-prefer-256-bit`` (see
``roofs/probes/cpu_features.widest_vector_env``). The probe's explicit vectors keep their width
either way, but the child is also a fresh process: its threads start on an idle machine
state of their own, and a repeat that lands in a slow spell does not drag the others with it.
:func:`isolated_fma_roof` starts this module as a child with that environment; the child
times the probe with the same timer discipline as every CPU roof and prints the Roof as one
JSON object on its last stdout line. What else ran on the machine meanwhile (other
processes, hypervisor steal) is recorded as the roof's ``machine_load``.
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import replace
from typing import Any

from roofbench.paths import child_env
from roofbench.readers import read_roof
from roofbench.roof_records import Roof
from roofbench.timing import TimerConfig, host_timer

from .probe_child import child_answer

CHILD_TIMEOUT_S = 300.0


def timer_config(quick: bool) -> TimerConfig:
    """The timer configuration of every CPU roof (the backend uses the same)."""
    return TimerConfig.quick() if quick else TimerConfig(budget_s=1.0)


def isolated_fma_roof(precision: str, quick: bool, timeout: float = CHILD_TIMEOUT_S,
                      cores: list[int] | None = None) -> Roof:
    """Run the FMA probe of ``precision`` in a child process with the widest vectors, on
    ``cores`` (default: those a probe here runs on, ``cpu_env.probe_cores``) with one thread
    per core and none of the caller's thread or binding variables (``cpu_env.probe_env``).

    Raises RuntimeError with a one-line reason when the child fails.
    """
    from . import cpu_env
    from .cpu_features import widest_vector_env
    from .cpu_noise import NoiseProbe, noise_cause

    extra = widest_vector_env()
    cores = cores or cpu_env.probe_cores()[0]
    cmd = [sys.executable, "-m", "roofbench.roofs.probes.cpu_fma_child", precision]
    if quick:
        cmd.append("--quick")
    noise = NoiseProbe(children=True)
    roof = read_roof(child_answer(cmd, f"FMA probe child ({precision})",
                                  cpu_env.probe_env(cores, child_env(), **extra), timeout))
    # Over the whole child (start-up, compile, timing); its page faults are its own start-up,
    # not noise, so the cause is named from the other counters.
    load = replace(noise.report(), minor_faults=0, major_faults=0)
    roof.evidence["machine_load"] = {"other_busy": load.other_busy, "steal": load.steal,
                                     "load_avg_1m": load.load_avg_1m,
                                     "cause": noise_cause(load)}
    roof.evidence["process"] = "own process (numba started with the environment below)"
    roof.evidence["child_environment"] = extra
    return roof


def _measure(precision: str, quick: bool) -> dict[str, Any]:
    from .cpu import fma_roof_in_process

    cfg = timer_config(quick)
    from roofbench.roof_context import cpu_list

    from .cpu_env import affinity

    roof = fma_roof_in_process(lambda fn: host_timer(fn, cfg))(precision, quick)
    roof.evidence["cores"] = cpu_list(affinity())  # the probe's affinity as it ran
    return roof.to_dict()


def main(argv: list[str] | None = None) -> int:
    from .cpu_env import pin_from_env

    pin_from_env()  # first: the probe's threads inherit the cores its parent chose
    ap = argparse.ArgumentParser(prog="python -m roofbench.roofs.probes.cpu_fma_child",
                                 description=__doc__.split("\n\n")[0])
    ap.add_argument("precision", choices=("fp64", "fp32"))
    ap.add_argument("--quick", action="store_true")
    args = ap.parse_args(argv)
    print(json.dumps(_measure(args.precision, args.quick)), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
