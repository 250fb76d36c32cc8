"""`roofbench distributed` (alias `tp`): the tensor-parallel GEMM on the distributed roofline.

attainable = min(compute, HBM bw x AI_hbm, link bw x AI_link). The roofs come from a measured
roofs file when given (--roofs: a calibrated device, a fleet rank file or links.json), else
from --peak / --hbm-bw / --link-bw; the output says which.

    roofbench distributed --book
    roofbench tp -m 8192 -n 8192 -k 8192 -p 2,4,8 --peak 989T --hbm-bw 3.35T --link-bw 450G
    roofbench tp --roofs results/fleet/run1/rank0-h100.json -p 8 --plot tp.png
"""

from __future__ import annotations

import argparse
import json
import math
import re
from pathlib import Path

from roofbench.units import si

from ..errors import UserError
from .argtypes import checked

_PREFIX = {"": 1.0, "k": 1e3, "m": 1e6, "g": 1e9, "t": 1e12, "p": 1e15}


def parse_rate(s: str) -> float:
    """'600G', '0.6TB/s', '312 TFLOP/s', '6e11' -> a positive float (per second)."""
    t = s.strip().replace(" ", "")
    m = re.fullmatch(r"([0-9]*\.?[0-9]+(?:[eE][-+]?[0-9]+)?)([kKmMgGtTpP]?)"
                     r"(?:B|FLOP|FLOPS|B/s|FLOP/s|/s)?", t)
    if not m:
        raise argparse.ArgumentTypeError(
            f"not a rate: {s!r} (e.g. 600G, 0.6TB/s, 312TFLOP/s, 6e11)")
    v = float(m.group(1)) * _PREFIX[m.group(2).lower()]
    if not (v > 0 and math.isfinite(v)):
        raise argparse.ArgumentTypeError(f"must be > 0, got {s}")
    return v


def _ps(s: str) -> list[int]:
    try:
        ps = [int(x) for x in s.split(",") if x.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a list of GPU counts: {s!r} (e.g. 2,4,8)") from None
    if not ps or min(ps) < 1:
        raise argparse.ArgumentTypeError(f"GPU counts must be >= 1, got {s!r}")
    return ps


_dim = checked(int, lambda v: v >= 1, "must be >= 1", "an integer")


def register(sub: argparse._SubParsersAction) -> None:
    from roofbench.roofs.distributed import ITEMSIZE

    p = sub.add_parser("distributed", aliases=["tp"],
                       help="tensor-parallel GEMM on the distributed roofline (link roofs)",
                       description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("-m", type=_dim, default=8192, help="rows of A and C (tokens)")
    p.add_argument("-n", type=_dim, default=8192, help="columns of B and C")
    p.add_argument("-k", type=_dim, default=8192, help="inner dimension")
    p.add_argument("-p", type=_ps, default=[2, 4, 8], metavar="P,P,...",
                   help="GPU counts (default 2,4,8)")
    p.add_argument("--split", choices=["row", "column", "both"], default="both")
    p.add_argument("--dtype", choices=list(ITEMSIZE), default="bf16")
    p.add_argument("--precision", default=None,
                   help="compute roof to use (default: <dtype>_tc, e.g. bf16_tc)")
    p.add_argument("--roofs", metavar="FILE", help="measured roofs (RoofSet JSON, a fleet "
                   "rank file, links.json or fleet.json)")
    p.add_argument("--peak", type=parse_rate, help="compute roof, FLOP/s (e.g. 989T)")
    p.add_argument("--hbm-bw", type=parse_rate, help="HBM bandwidth, B/s (e.g. 3.35T)")
    p.add_argument("--link-bw", type=parse_rate,
                   help="link bandwidth per GPU, B/s (e.g. 450G), used when --roofs has no "
                        "measured interconnect roof")
    p.add_argument("--book", action="store_true",
                   help="the book's example: link 0.6 TB/s replacing HBM 2 TB/s")
    p.add_argument("--plot", metavar="FILE.png", help="draw the roofs and the points")
    p.add_argument("--json", metavar="FILE", help="write the table as JSON")
    p.set_defaults(func=_run)


def load_roofs(path: str):  # -> RoofSet
    """Any roofs file through the one loader; its error as the CLI's one line."""
    from roofbench.roofs.files import RoofsFileError
    from roofbench.roofs.files import load_roofs as load

    try:
        return load(path)
    except RoofsFileError as e:
        raise UserError(str(e)) from None


def _run(args: argparse.Namespace) -> int:
    from roofbench.roofs import distributed as dist

    if args.book:
        shift, roofs, rows = dist.book_example()
        print("Book example (distributed GEMM, case B): the link replaces HBM as the roof")
        print(f"  compute {si(shift.peak, 'FLOP/s')} ({dist.BOOK['peak_source']})")
        print(f"  ridge against HBM {si(shift.hbm, 'B/s')}: {shift.ridge_hbm:.1f} FLOP/B; "
              f"against the link {si(shift.link, 'B/s')}: {shift.ridge_link:.1f} FLOP/B")
        print(f"  GEMM {dist.BOOK['m']}^3 {dist.BOOK['dtype']}: AI {shift.ai:.1f} FLOP/B -> "
              f"one GPU {si(shift.attainable_hbm, 'FLOP/s')} ({shift.bound_hbm}-bound), "
              f"bytes over the link {si(shift.attainable_link, 'FLOP/s')} "
              f"({shift.bound_link}-bound)")
        m, n, k, dtype = dist.BOOK["m"], dist.BOOK["n"], dist.BOOK["k"], dist.BOOK["dtype"]
    else:
        m, n, k, dtype = args.m, args.n, args.k, args.dtype
        precision = args.precision or f"{dtype}_tc"
        splits: list[dist.Split] = ["row", "column"] if args.split == "both" else [args.split]
        measured = load_roofs(args.roofs) if args.roofs else None
        try:
            roofs = dist.resolve_roofs(precision, splits[0], measured, args.roofs or "",
                                       args.peak, args.hbm_bw, args.link_bw)
        except KeyError as e:
            raise UserError(str(e.args[0])) from None
        rows = dist.tp_table(m, n, k, args.p, splits, dtype, roofs)
    print(f"Tensor-parallel GEMM C[{m}x{n}] = A[{m}x{k}] B[{k}x{n}], {dtype}")
    for what, how in roofs.provenance.items():
        print(f"  {what}: {how}")
    r = roofs.ridges()
    print(f"  ridges: HBM {r['hbm']:.1f} FLOP/B, link {r['link']:.1f} FLOP/B")
    hdr = (f"{'split':<7}{'p':>3} {'coll':<10}{'GFLOP/GPU':>11}{'HBM MB/GPU':>12}"
           f"{'link MB/GPU':>12}{'AI_hbm':>9}{'AI_link':>9}{'TFLOP/s/GPU':>12}{'total':>10}  bound")
    print(hdr)
    for pt in rows:
        print(f"{pt.split:<7}{pt.p:>3} {pt.collective or '-':<10}{pt.flops_per_gpu / 1e9:>11.2f}"
              f"{pt.hbm_bytes_per_gpu / 1e6:>12.2f}{pt.link_bytes_per_gpu / 1e6:>12.2f}"
              f"{pt.ai_hbm:>9.1f}{pt.ai_link:>9.1f}{pt.attainable_per_gpu / 1e12:>12.1f}"
              f"{pt.attainable_total / 1e12:>10.1f}  {pt.bound} ({pt.roof})")
    if args.json:
        from ..fleet.output import write_atomic

        write_atomic(Path(args.json), json.dumps(
            {"provenance": roofs.provenance, "ridges": r, "roofs": roofs.roofs.to_dict(),
             "rows": [pt.to_dict() for pt in rows]}, indent=1, default=str) + "\n")
    if args.plot:
        _plot(Path(args.plot), roofs, rows)
        print(f"plot: {args.plot}")
    return 0


def _plot(path: Path, roofs, rows) -> None:  # noqa: ANN001 - model types, lazy import
    import io

    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    from ..fleet.output import write_atomic

    peak, hbm, link = roofs.peak, roofs.hbm, roofs.link
    x = np.logspace(0, 4, 400)
    fig, ax = plt.subplots(figsize=(8, 5.5))
    ax.plot(x, np.minimum(peak, hbm * x), "-", color="C0", lw=2,
            label=f"HBM {si(hbm, 'B/s')} ({roofs.roofs.memory('dram').source})")
    ax.plot(x, np.minimum(peak, link * x), "--", color="C3", lw=2,
            label=f"link {si(link, 'B/s')} ({roofs.roofs.interconnect('link').source})")
    for ridge, col in ((peak / hbm, "C0"), (peak / link, "C3")):
        ax.axvline(ridge, color=col, lw=0.8, alpha=0.5)
        ax.annotate(f"ridge {ridge:.0f}", (ridge, peak), textcoords="offset points",
                    xytext=(3, -14), fontsize=8, color=col)
    marks = {"single": "o", "row": "s", "column": "^"}
    for pt in rows:
        ai = pt.ai_hbm if pt.split == "single" else pt.ai_link
        lab = "1 GPU (AI_hbm)" if pt.split == "single" else f"{pt.split} p={pt.p} (AI_link)"
        ax.plot([ai], [pt.attainable_per_gpu], marks[pt.split], ms=8, label=lab)
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("arithmetic intensity (FLOP/byte of HBM or of the link)")
    ax.set_ylabel("attainable FLOP/s per GPU")
    ax.set_title("Tensor-parallel GEMM: the link roof moves the ridge right")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=7, loc="lower right")
    buf = io.BytesIO()
    fig.tight_layout()
    fig.savefig(buf, format="png", dpi=110)
    plt.close(fig)
    try:
        write_atomic(path, buf.getvalue())
    except OSError as e:
        raise UserError(f"cannot write the plot {path}: {e.strerror or e}") from None
