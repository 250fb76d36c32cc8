"""`roofbench list`: workloads, variants, dtypes, and which backends are available."""

from __future__ import annotations

import argparse

from rich.console import Console
from rich.table import Table
from roofbench.kernels.registry import workloads

from ..backends import base as backends


def cmd_list(args: argparse.Namespace) -> int:
    t = Table(title="roofbench workloads")
    for col in ("workload", "variant", "dtypes", "implemented for", "launches", "description"):
        t.add_column(col)
    for w in workloads().values():
        for v in w.variants.values():
            case_size = w.quick_size
            n_launch = len(v.plan(case_size, v.dtypes[0]))
            t.add_row(w.name, v.name, ",".join(v.dtypes), ",".join(v.backends()),
                      str(n_launch), v.description)
    console = Console(width=max(Console().width, 140))
    console.print(t)
    console.print("backends:")
    for name in backends.names():  # the registry, then any plug-in backends
        why = backends.unavailable_reason(name)
        # markup=False: reasons name pip extras in square brackets, e.g. roofbench[cuda13]
        console.print(f"  {name}: {'available' if why is None else why}", markup=False)
    return 0


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("list", help="workloads, variants, dtypes and backends")
    p.set_defaults(func=cmd_list)
