"""Σ ops over the program, three profiles per model of scripts/model_zoo.py: the same-run
ratio (bench/profile/inprogram.py: each run's ops over that run's program time, the
profiler's overhead taken out) beside the old pairing with the eager run after each timed
run, whether the profile was taken under load, the highest % of its roof among the valid
points (ops and program) and the points flagged above theirs, and the caller's world
around each profile (torch's intra-/inter-op threads, every argument tensor and module
weight compared bit for bit). Without ``--roofs`` it places under stand-in roofs (the ratio
does not read them), so nothing is calibrated.

    MODEL_ZOO_SCALE=tiny python scripts/profile_ratio_runs.py gpt2_prefill gpt2_decode
    python scripts/profile_ratio_runs.py --roofs R.json --out DIR gpt2_prefill ...

``--out`` keeps each profile's results.json and profile.json in DIR/ENTRY-runK and every
run's figures in DIR/runs.jsonl (appended; ``uptime`` before and after each profile).
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import torch

import roofbench
from roofbench.roof_records import Roof, RoofSet

ROOFS = RoofSet(device="stand-in roofs", roofs=[
    Roof("dram stream", "memory", 20e9, "measured", level="dram"),
    Roof("fp32 fma", "compute", 200e9, "measured", precision="fp32")])


def tensors_of(fn: Any, args: tuple[Any, ...]) -> list[torch.Tensor]:
    """The caller's tensors: the arguments' (a cache's keys and values too) and the weights
    and buffers of every module the program is or closes over."""
    out: list[torch.Tensor] = []
    for a in args:
        if isinstance(a, torch.Tensor):
            out.append(a)
        elif isinstance(a, list | tuple):
            out += [t for t in a if isinstance(t, torch.Tensor)]
        elif hasattr(a, "layers"):  # a transformers cache
            out += [t for layer in a.layers for t in (layer.keys, layer.values)]
    cells = [c.cell_contents for c in getattr(fn, "__closure__", None) or []]
    for m in [fn, *cells]:
        if isinstance(m, torch.nn.Module):
            out += list(m.state_dict(keep_vars=True).values())
    return out


def uptime() -> str:
    return subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip()


def one(zoo: Any, entry: str, k: int, roofs: Any, out: Path | None) -> dict[str, Any]:
    fn, args = getattr(zoo, entry)()[:2]
    mine = tensors_of(fn, args)
    before = [t.detach().clone() for t in mine]
    threads = (torch.get_num_threads(), torch.get_num_interop_threads())
    up0 = uptime()
    t0 = time.perf_counter()
    with torch.no_grad():
        p = roofbench.profile(fn, *args, roofs=roofs)
    wall = time.perf_counter() - t0
    up1 = uptime()
    after = (torch.get_num_threads(), torch.get_num_interop_threads())
    e = p.extra
    cases = [q.case for q in p.ops] + [p.program]
    valid = [c.roofline.efficiency for c in cases
             if c.outcome.status == "ok" and c.roofline.efficiency is not None]
    row = {"entry": entry, "run": k, "ops_over_program": e["ops_over_program"],
           "spread": e["ops_over_program_spread"], "runs": e["ops_over_program_runs"],
           "in_program_runs": e["in_program_runs"],
           "profiler_overhead_s": e.get("profiler_overhead_s"),
           "profiler_overhead_call_s": e.get("profiler_overhead_call_s"),
           "ops_over_eager_paired": e["ops_over_eager_paired"],
           "under_load": e.get("under_load") or "",
           "calls": len(p.recording.calls), "placed": len(valid),
           "max_valid_eff": max(valid) if valid else None,
           "invalid": [f"{c.identity.workload} {c.identity.variant}: {c.outcome.error}"
                       for c in cases if c.outcome.status == "invalid"],
           "threads_before": threads, "threads_after": after,
           "tensors": len(mine),
           "tensors_unchanged": all(torch.equal(b, t) for b, t in zip(before, mine,
                                                                      strict=True)),
           "torch_threads_profiled": e.get("torch_threads"),
           "profile_wall_s": wall, "uptime_before": up0, "uptime_after": up1}
    if out is not None:
        with tempfile.TemporaryDirectory() as tmp:
            p.write(Path(tmp) / "p")
            dest = out / f"{entry}-run{k}"
            dest.mkdir(parents=True, exist_ok=True)
            for name in ("results.json", "profile.json"):
                shutil.copy(Path(tmp) / "p" / name, dest / name)
        with (out / "runs.jsonl").open("a") as f:
            f.write(json.dumps(row) + "\n")
    return row


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("entries", nargs="*",
                    default=["gpt2_prefill", "gpt2_decode", "llama_gqa_prefill", "resnet18"])
    ap.add_argument("--roofs", help="roofs file (default: stand-in roofs)")
    ap.add_argument("--out", type=Path, help="folder for the profiles and runs.jsonl")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--first", type=int, default=1, help="the first run's number")
    a = ap.parse_args()
    spec = importlib.util.spec_from_file_location(
        "model_zoo", Path(__file__).resolve().parent / "model_zoo.py")
    assert spec is not None and spec.loader is not None
    zoo = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(zoo)
    for entry in a.entries:
        for k in range(a.first, a.first + a.repeats):
            r = one(zoo, entry, k, a.roofs or ROOFS, a.out)
            lo, hi = r["spread"]
            eff = r["max_valid_eff"]
            print(f"{entry} run {k}: same-run {r['ops_over_program']:.3f} [{lo:.3f}, {hi:.3f}]"
                  f" over {r['in_program_runs']} runs; paired with the eager run after "
                  f"{r['ops_over_eager_paired']:.3f}; under load: "
                  f"{'yes' if r['under_load'] else 'no'}; max valid "
                  f"{'-' if eff is None else f'{eff:.0%}'}, {len(r['invalid'])} flagged; "
                  f"threads {r['threads_before']} -> {r['threads_after']}; tensors "
                  f"{'unchanged' if r['tensors_unchanged'] else 'CHANGED'}; "
                  f"{r['profile_wall_s']:.0f} s; load {os.getloadavg()[0]:.1f}", flush=True)


if __name__ == "__main__":
    main()
    sys.exit(0)
