"""Σ ops over the program, three profiles per model of scripts/model_zoo.py: the same-run
ratio (bench/profile/inprogram.py: each run's ops over that run's program time) beside the
old pairing with the eager run after each timed run, and whether the profile was taken under
load. Placed under stand-in roofs (the ratio does not read them), so nothing is calibrated.

    MODEL_ZOO_SCALE=tiny python scripts/profile_ratio_runs.py gpt2_prefill gpt2_decode
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import torch

import roofbench
from roofbench.roof_records import Roof, RoofSet

ROOFS = RoofSet(device="stand-in roofs", roofs=[
    Roof("dram stream", "memory", 20e9, "measured", level="dram"),
    Roof("fp32 fma", "compute", 200e9, "measured", precision="fp32")])


def main(entries: list[str], repeats: int = 3) -> None:
    spec = importlib.util.spec_from_file_location(
        "model_zoo", Path(__file__).resolve().parent / "model_zoo.py")
    assert spec is not None and spec.loader is not None
    zoo = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(zoo)
    for entry in entries:
        fn, args = getattr(zoo, entry)()[:2]
        for k in range(repeats):
            with torch.no_grad():
                e = roofbench.profile(fn, *args, roofs=ROOFS).extra
            lo, hi = e["ops_over_program_spread"]
            print(f"{entry} run {k + 1}: same-run {e['ops_over_program']:.3f} "
                  f"[{lo:.3f}, {hi:.3f}] over {e['in_program_runs']} runs; paired with the "
                  f"eager run after {e['ops_over_eager_paired']:.3f}; "
                  f"under load: {'yes' if e.get('under_load') else 'no'}", flush=True)


if __name__ == "__main__":
    main(sys.argv[1:] or ["gpt2_prefill", "gpt2_decode", "llama_gqa_prefill", "resnet18"])
