"""`roofbench fleet calibrate|links|gpu-links`: calibrate many devices into one report.

Start it with an MPI launcher, one rank per GPU (or one per node on CPU-only hosts):

    mpirun -n 8 roofbench fleet calibrate --backend cuda --out results/fleet/run1
    srun --mpi=pmix -N 4 --ntasks-per-node=8 --gpus-per-task=1 roofbench fleet calibrate
    mpirun -n 2 roofbench fleet links        # MPI interconnect roofs only
    roofbench fleet gpu-links                # one node, no MPI: NCCL + P2P over its GPUs
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import replace
from typing import TYPE_CHECKING

from ..errors import UserError
from .argtypes import checked

if TYPE_CHECKING:
    from ..fleet.fleet_records import FleetConfig

_positive = checked(float, lambda v: v > 0, "must be > 0")
_margin = checked(float, lambda v: 0 <= v < 1, "must be in [0, 1), e.g. 0.1 for 10%")


def _bytes(s: str) -> int:
    units = {"": 1, "k": 1 << 10, "kib": 1 << 10, "m": 1 << 20, "mib": 1 << 20,
             "g": 1 << 30, "gib": 1 << 30}
    t = s.strip().lower()
    num = t.rstrip("abcdefghijklmnopqrstuvwxyz")
    try:
        v = int(float(num) * units[t[len(num):]])
    except (ValueError, KeyError):
        raise argparse.ArgumentTypeError(f"not a size: {s!r} (e.g. 4M, 65536)") from None
    if v < 1:
        raise argparse.ArgumentTypeError(f"must be >= 1 byte, got {s}")
    return v


def register(sub: argparse._SubParsersAction) -> None:
    from ..backends import REGISTRY

    p = sub.add_parser("fleet", help="calibrate every device of an MPI job into one report",
                       description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    fsub = p.add_subparsers(dest="fleet_command", metavar="{calibrate,links,gpu-links}",
                            parser_class=type(p))
    fsub.required = True

    def common(q: argparse.ArgumentParser) -> None:
        q.add_argument("--quick", action="store_true",
                       help="short probes (quick calibration, MPI sizes up to 16 MiB)")
        q.add_argument("--out", metavar="DIR",
                       help="report directory (default results/fleet/<UTC time>)")
        q.add_argument("--timeout", type=_positive, default=600.0, metavar="S",
                       help="longest wait for any other rank, at any step (default 600 s); "
                            "past it the rank is recorded as timed out or the job aborts")
        q.add_argument("--link-max-size", type=_bytes, default=None, metavar="BYTES",
                       help="largest MPI probe message (e.g. 1M), for short runs")

    c = fsub.add_parser("calibrate", help="each rank measures its device's roofs; rank 0 "
                        "writes fleet.json, fleet.md, fleet.png")
    c.add_argument("--backend", default="auto", choices=["auto", *REGISTRY],
                   help="backend on every rank (default auto: a GPU when the rank has one)")
    c.add_argument("--margin", type=_margin, default=0.1,
                   help="flag a device more than this fraction below its peers' median on "
                        "any roof (default 0.1)")
    c.add_argument("--no-links", action="store_true", help="skip the MPI link probes")
    common(c)
    c.set_defaults(func=_calibrate)

    ln = fsub.add_parser("links", help="measure only the MPI interconnect roofs "
                         "(point-to-point and all-reduce)")
    common(ln)
    ln.set_defaults(func=_links)

    g = fsub.add_parser("gpu-links", help="no MPI: NCCL all-reduce/all-gather/reduce-scatter "
                        "bus bandwidth and the P2P copy matrix over this node's GPUs")
    g.add_argument("--quick", action="store_true", help="sizes up to 64 MiB, fewer samples")
    g.add_argument("--out", metavar="FILE", default="gpu-links.json",
                   help="roofs file to write (default gpu-links.json); usable as "
                        "`roofbench tp --roofs FILE`")
    g.set_defaults(func=_gpu_links)


def _cfg(args: argparse.Namespace) -> FleetConfig:
    from ..fleet.fleet_records import FleetConfig

    return FleetConfig(quick=args.quick, out=args.out, timeout=args.timeout,
                       link_max_bytes=args.link_max_size, argv=list(sys.argv))


def _calibrate(args: argparse.Namespace) -> int:
    from ..fleet.protocol import run_fleet

    return run_fleet(replace(_cfg(args), backend=args.backend, margin=args.margin,
                             links=not args.no_links))


def _links(args: argparse.Namespace) -> int:
    from ..fleet.protocol import run_fleet

    code = run_fleet(replace(_cfg(args), calibrate=False))
    if code:
        raise UserError("link measurement failed; see the report")
    return 0


def _gpu_links(args: argparse.Namespace) -> int:
    import json
    from pathlib import Path

    from roofbench.roofs.probes import gpu_links as gl
    from roofbench.roofs.probes import links as ic

    from roofbench.roof_records import RoofSet
    from roofbench.units import si

    from ..fleet.output import write_atomic

    try:
        sizes = gl.QUICK_NCCL_SIZES if args.quick else gl.DEFAULT_NCCL_SIZES
        samples = 3 if args.quick else 5
        p2p = gl.p2p_matrix(size=(64 if args.quick else 256) * ic.MiB, samples=samples)
        colls = gl.nccl_collectives(sizes=sizes, samples=samples)
    except gl.GpuUnavailable as e:
        raise UserError(str(e)) from None
    rs = RoofSet(device="gpu-links", info={"p2p": p2p.to_dict(),
                                           "nccl": [m.to_dict() for m in colls]})
    print(f"P2P copy over {p2p.devices} device(s): {p2p.note or ''}")
    for i, row in enumerate(p2p.bandwidth):
        if p2p.devices > 1:
            print(f"  {i}: " + "  ".join(si(v, "B/s") if i != j else "-"
                                         for j, v in enumerate(row)))
    for roof in [p2p.to_roof(), *(m.to_roof() for m in colls)]:
        if roof is not None:
            rs.add(roof)
    for m in colls:
        best = m.best_point()
        print(f"NCCL {m.op} over {m.ranks} GPU(s): algbw {si(m.peak_algbw, 'B/s')}, busbw "
              f"{si(m.peak_busbw, 'B/s')} at {best.bytes if best else '-'} B {m.note}".rstrip())
    try:
        write_atomic(Path(args.out), json.dumps(rs.to_dict(), indent=1, default=str) + "\n")
    except OSError as e:
        raise UserError(f"cannot write {args.out}: {e.strerror or e}") from None
    print(f"roofs: {args.out} ({len(rs.roofs)} interconnect roof(s))")
    return 0
