"""`make gpu-check`'s Triton table: each Triton variant beside the CUDA C kernel of the same
variant and the workload's library variant, at the same dtype: time, % of roof, status.

    python scripts/gpu_check_triton.py TRITON_DIR CUDA_DIR [--out FILE] [--log STEP_LOG]
                                       [--append LOG]

TRITON_DIR holds the `roofbench run --backend triton` results.json (the gpu-check `triton`
step), CUDA_DIR the CUDA backend's (the `make-bench` step); each is searched for its
results.json, so a run cut short at its step's limit still gives the cases it finished. The
table is a pure function of the records (``table_rows``, ``render``;
tests/scripts/test_gpu_check_triton.py checks it on fixture records). Exit status 0 when at
least one Triton case is in the table, 1 when none is (the step's log line says why: the
triton step's own error when ``--log`` names its log). ``--append``: the table is also
appended to that file under a heading (gpu-check's gpu_check.log, which comes back from the
device tool beside the archive).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

LIBRARY = "library"  # the variant name of a workload's library baseline (cuBLAS, SDPA)


@dataclass(frozen=True)
class Entry:
    """What the table reads of one case record."""

    workload: str
    variant: str
    backend: str
    dtype: str
    size: tuple[int, ...]
    status: str
    median_s: float | None = None
    efficiency: float | None = None  # achieved / attainable (the case's roof)
    error: str | None = None


def entry_of(case: Any) -> Entry:
    """An Entry of a CaseResult (roofbench/records.py)."""
    i, o = case.identity, case.outcome
    return Entry(i.workload, i.variant, i.backend, i.dtype, tuple(i.size), o.status,
                 case.measurement.median_s, case.roofline.efficiency, o.error)


@dataclass(frozen=True)
class Row:
    workload: str
    variant: str
    dtype: str
    triton: Entry
    cuda: Entry | None  # the CUDA C kernel of the same variant
    library: Entry | None  # the workload's library variant on the CUDA backend


def _pick(entries: Iterable[Entry], size: tuple[int, ...]) -> Entry | None:
    """The entry at ``size``, else the one at the largest size (a run's default sizes can
    differ by backend): the row then names both sizes."""
    found = sorted(entries, key=lambda e: (e.size != size, [-x for x in e.size]))
    return found[0] if found else None


def table_rows(triton: Iterable[Entry], cuda: Iterable[Entry]) -> list[Row]:
    """One row per Triton case that is not unsupported, in the Triton run's order; the CUDA C
    and library entries of the same workload and dtype (None: not run)."""
    cuda = list(cuda)
    rows = []
    for t in triton:
        if t.status == "unsupported":
            continue
        same = [c for c in cuda if c.workload == t.workload and c.dtype == t.dtype]
        rows.append(Row(t.workload, t.variant, t.dtype, t,
                        _pick((c for c in same if c.variant == t.variant), t.size),
                        _pick((c for c in same if c.variant == LIBRARY), t.size)))
    return rows


def _size(size: tuple[int, ...]) -> str:
    return "x".join(map(str, size))


def cell(e: Entry | None, size: tuple[int, ...]) -> str:
    """``time, % of roof, status`` of one entry; ``-`` when there is none."""
    if e is None:
        return "-"
    if e.status != "ok":
        why = f": {e.error.splitlines()[0][:80]}" if e.error else ""
        text = f"{e.status}{why}".replace("|", "/")
    else:
        t = f"{e.median_s * 1e3:.3f} ms" if e.median_s is not None else "- ms"
        eff = f"{e.efficiency:.0%}" if e.efficiency is not None else "-"
        text = f"{t}, {eff} of roof, ok"
    return text + ("" if e.size == size else f" (at {_size(e.size)})")


def ratio(a: Entry | None, b: Entry | None) -> str:
    """How many times faster ``b`` is than ``a`` (a's time / b's), both ok at one size."""
    if (a is None or b is None or a.status != "ok" or b.status != "ok" or a.size != b.size
            or not a.median_s or not b.median_s):
        return "-"
    return f"{a.median_s / b.median_s:.2f}x"


APPENDED = "== Triton vs CUDA C vs library"
HEADER = ("| workload | variant | dtype | size | Triton | CUDA C | library "
          "| Triton vs CUDA C |\n|---|---|---|---|---|---|---|---:|")


def render(rows: list[Row]) -> str:
    """The markdown table (Triton vs CUDA C: the CUDA C time over Triton's; > 1: Triton
    faster)."""
    lines = [HEADER]
    for r in rows:
        s = r.triton.size
        lines.append(f"| {r.workload} | {r.variant} | {r.dtype} | {_size(s)} "
                     f"| {cell(r.triton, s)} | {cell(r.cuda, s)} | {cell(r.library, s)} "
                     f"| {ratio(r.cuda, r.triton)} |")
    return "\n".join(lines) + "\n"


def load_entries(folder: Path) -> list[Entry]:
    """Every case of every results.json under ``folder`` (none: an empty list)."""
    from roofbench.bench.results import load_run

    out: list[Entry] = []
    for p in sorted(folder.rglob("results.json")) if folder.is_dir() else []:
        out.extend(entry_of(c) for c in load_run(p).cases)
    return out


def _first_error(log: Path | None) -> str:
    if log is None or not log.is_file():
        return ""
    errors = [ln for ln in log.read_text(errors="replace").splitlines()
              if ln.startswith("roofbench: error:")]
    return f"; {log.name}: {errors[-1]}" if errors else ""


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("triton_dir", type=Path)
    p.add_argument("cuda_dir", type=Path)
    p.add_argument("--out", type=Path, help="write the table here too")
    p.add_argument("--log", type=Path, help="the triton step's log (its error, when no case)")
    p.add_argument("--append", type=Path, help="append the table to this file too")
    a = p.parse_args(argv)
    rows = table_rows(load_entries(a.triton_dir), load_entries(a.cuda_dir))
    if not rows:
        print(f"gpu_check_triton: no Triton case recorded under {a.triton_dir}"
              f"{_first_error(a.log)}")
        return 1
    text = render(rows)
    if a.out:
        a.out.write_text(text)
    if a.append:
        with open(a.append, "a") as f:
            f.write(f"{APPENDED}\n{text}")
    print(text, end="")
    return 0


if __name__ == "__main__":
    sys.exit(main())
