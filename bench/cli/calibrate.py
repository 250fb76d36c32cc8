"""`roofbench calibrate [--recalibrate] [--quick] [--backend auto|cuda|cpu] [--device N]
[--cores LIST] [--out FILE]`: the device's roofs, measured once and cached (one file per user
and device: $ROOFBENCH_HOME/roofs, else the per-user cache directory)."""

from __future__ import annotations

import argparse
from typing import Any

from roofbench.roof_context import parse_cpu_list

from ..errors import UserError
from ..measure.roof_source import calibrate
from ..present.tables import plot_device, print_summary
from .progress import steps


def choose_cores(text: str | None) -> None:
    """``--cores LIST``: this process and every CPU probe it starts run on those cores (as
    under taskset); the roofs and their cache file are named for them."""
    if not text:
        return
    from roofbench.roofs.probes.cpu_env import choose_cores as choose

    try:
        choose(parse_cpu_list(text))
    except ValueError as e:
        raise UserError(f"--cores {text}: {e}") from None


def load_line(load: dict[str, Any]) -> str:
    """The machine's load while the probes ran and their spread, in one line."""
    spread = load.get("probe_spread") or {}
    worst = max(spread.items(), key=lambda kv: kv[1]) if spread else None
    return (("UNDER LOAD: " if load.get("under_load") else "load: ")
            + f"others kept {load.get('busy_cores_others', 0):.2g} of {load.get('cores')} "
            f"cores busy, load average {load.get('load_avg_1m', 0):.1f}"
            + (f"; widest probe spread {worst[1]:.1%} ({worst[0]}: 1 - median/best)"
               if worst else ""))


def cmd_calibrate(args: argparse.Namespace) -> int:
    choose_cores(args.cores)
    with steps("calibrate", timed=True) as say:
        rs, path, measured = calibrate(args.device, quick=args.quick,
                                       recalibrate=args.recalibrate, out=args.out,
                                       progress=say, backend=args.backend)
    unsaved = rs.info.get("calibrated_file_error")
    if measured and not unsaved:
        print(f"calibrated {rs.device}: {path}")
    elif measured:
        print(f"calibrated {rs.device}, not saved: {unsaved}")
    else:
        print(f"using calibrated {path} (from {rs.info.get('calibrated_utc', '?')}); "
              "--recalibrate measures again")
    load = rs.info.get("calibration_load")
    if measured and isinstance(load, dict):  # the load it was measured under, said
        print(load_line(load))
    print_summary(rs)
    if not args.no_plot and not unsaved:
        paths, why = plot_device([rs], path.with_suffix(""), f"{rs.device}: measured roofs "
                                 "(solid), datasheet (dashed), ERT curves (dotted)")
        print(f"plot: {paths[0]}" if paths else f"plot: not drawn ({why})")
    return 0


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("calibrate", help="measure this device's roofs once and cache them "
                                         "(roofs/<device>.json in the per-user cache)")
    p.add_argument("--recalibrate", action="store_true",
                   help="measure again even when a calibrated file exists")
    p.add_argument("--quick", action="store_true", help="short probes (under a minute)")
    p.add_argument("--backend", choices=("auto", "cuda", "cpu"), default="auto",
                   help="the device to calibrate (auto: the GPU when there is one, else the "
                        "CPU)")
    p.add_argument("--device", type=int, default=0, metavar="N", help="CUDA device index")
    p.add_argument("--cores", metavar="LIST",
                   help="CPU: measure on these cores only (e.g. 0-3,8), as under taskset; "
                        "the roofs are named for them")
    p.add_argument("--out", metavar="FILE",
                   help="calibrated file (default roofs/<device>.json under $ROOFBENCH_HOME, "
                        "else the per-user cache directory)")
    p.add_argument("--no-plot", action="store_true", help="do not draw the roofline")
    p.set_defaults(func=cmd_calibrate)
