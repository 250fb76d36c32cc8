"""`roofbench specs [NAME]`: the datasheet table (dense vendor figures, each entry with the
document it comes from) or one entry."""

from __future__ import annotations

import argparse

from rich.table import Table
from roofbench.roofs import datasheet

from ..errors import UserError
from ..present.tables import wide_console

_COLS = (("hbm_tbs", "HBM TB/s"), ("fp64", "FP64"), ("fp64_tc", "FP64 TC"), ("fp32", "FP32"),
         ("bf16_tc", "BF16 TC"), ("fp16_tc", "FP16 TC"), ("fp8_tc", "FP8 TC"), ("sms", "SMs"),
         ("l2_mb", "L2 MB"))


def _cell(v: object) -> str:
    return "-" if v is None else f"{v:g}" if isinstance(v, float) else str(v)


def cmd_specs(args: argparse.Namespace) -> int:
    if args.name:
        spec = datasheet.find_spec(args.name)
        if spec is None:
            raise UserError(f"unknown GPU {args.name!r}; known: "
                            f"{', '.join(datasheet.known_names())}")
        specs = [spec]
    else:
        specs = list(datasheet.SPECS.values())
    t = Table(title="datasheet peaks (dense; TFLOP/s unless marked) - leads, not measurements")
    t.add_column("key")
    t.add_column("GPU")
    for _, label in _COLS:
        t.add_column(label, justify="right")
    for s in specs:
        row = s.row()
        t.add_row(s.key, s.label, *(_cell(row[k]) for k, _ in _COLS))
    wide_console().print(t)
    for s in specs:
        for note in s.notes:
            print(f"{s.key}: {note}")
        print(f"{s.key}: source: {s.source}")
    print(f"table: {datasheet.TABLE_SOURCE}")
    return 0


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("specs", help="datasheet peaks of known GPUs (or one: NAME)")
    p.add_argument("name", nargs="?", help="e.g. h100-pcie, 'H200 SXM', 4090")
    p.set_defaults(func=cmd_specs)
