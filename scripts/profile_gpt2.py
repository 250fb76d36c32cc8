"""Issue 38's acceptance figures for one GPT-2 entry of scripts/model_zoo.py (built from
GPT2Config, random weights, nothing downloaded):

    .venv/bin/python scripts/profile_gpt2.py ENTRY ROOFS OUT [THREADS]
    PROJECT_ON=core0-roofs.json ... (also project onto those roofs)

Profiles ENTRY (gpt2_prefill, gpt2_decode) under no_grad on ROOFS with THREADS torch
threads, projects it onto the stored H200 roofs (and PROJECT_ON), writes the profile to OUT
and OUT/acceptance.json: the profile's wall time and phases, Σ ops in the program run by run
beside each run's wall and the eager program, the ops alone, the bytes (for decode: the
weights' and the KV cache's), the levels, the points above their roofs, the projections.
"""

from __future__ import annotations

import importlib.util
import json
import os
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
H200 = ROOT / "results" / "nvidia-h200" / "first-contact-ea800a6" / "gemm-4096" / "results.json"


def main() -> int:
    sys.path.insert(0, str(ROOT))
    import torch

    entry, roofs, out = sys.argv[1], sys.argv[2], sys.argv[3]
    if len(sys.argv) > 4:
        torch.set_num_threads(int(sys.argv[4]))
    spec = importlib.util.spec_from_file_location("zoo", ROOT / "scripts" / "model_zoo.py")
    assert spec is not None and spec.loader is not None
    zoo = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(zoo)
    fn, args = getattr(zoo, entry)()
    import roofbench

    t0 = time.perf_counter()
    with torch.no_grad():
        p = roofbench.profile(fn, *args, roofs=roofs)
    wall = time.perf_counter() - t0
    on = os.environ.get("PROJECT_ON")
    on_core0 = None
    if on:
        pj = p.project(on)
        on_core0 = {"program_bound_s": pj.program_s,
                    "ops": [{"name": o.name, "calls": o.calls, "bound_s": o.bound_s,
                             "level": o.level, "roof": o.limiting_roof, "flops": o.flops,
                             "bytes": o.bytes} for o in pj.ops]}
    p.project(H200)
    p.write(out)
    inv = [(q.op.name, q.case.outcome.error) for q in p.ops if q.case.outcome.status != "ok"]
    placed = [q for q in p.ops if q.case.roofline.efficiency is not None]
    levels: dict[str, int] = {}
    for q in p.ops:
        pl = q.case.roofline.placement
        key = pl.level if pl else "None"
        levels[key] = levels.get(key, 0) + 1
    s = {"entry": entry, "threads": torch.get_num_threads(), "profile_wall_s": wall,
         "phases_s": p.extra["phases_s"], "calls": len(p.recording.calls),
         "distinct": len(p.ops), "ops_in_program_s": p.ops_s,
         "ops_run_s": p.extra["ops_run_s"], "run_wall_s": p.extra["run_wall_s"],
         "ops_alone_s": p.extra["ops_alone_s"], "program_s": p.program_s,
         "program_samples_s": p.program.measurement.timing.samples,
         "ops_over_program": p.ops_s / p.program_s, "program_bytes": p.program.declaration.bytes,
         "program_working_set": p.extra["program_working_set"], "levels": levels,
         "placed": len(placed),
         "max_eff": max(q.case.roofline.efficiency for q in placed) if placed else None,
         "invalid": inv, "launch_s": p.extra["launch_s"], "dtype": p.program.identity.dtype,
         "load_start": p.extra["load_start"], "load_end": os.getloadavg(),
         "h200_bound_s": p.extra["projection"]["program_bound_s"], "on_core0": on_core0,
         "ops": [{"name": q.op.name, "calls": q.op.calls, "flops": q.op.flops,
                  "bytes": q.op.bytes, "median_s": q.case.measurement.median_s}
                 for q in p.ops if q.op.bytes or q.op.flops]}
    if entry == "gpt2_decode":
        step, (_, past) = fn, args
        s["weights_bytes"] = sum(t.numel() * t.element_size() for t in step.parameters())
        s["kv_bytes"] = sum(t.numel() * t.element_size() for t in past)
        s["by_op_bytes"] = sorted(((q.op.name, q.op.bytes * q.op.calls) for q in p.ops),
                                  key=lambda x: -x[1])[:12]
    Path(out, "acceptance.json").write_text(json.dumps(s, indent=1, default=str))
    print(json.dumps(s, indent=1, default=str))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
