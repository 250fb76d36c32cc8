"""How long `roofbench.profile` takes on a 12-layer, ~100M-parameter decoder (issue 26's
budget: at most 60 s on the 2-core CPU, distinct ops timed once).

    .venv/bin/python scripts/bench_profile_decoder.py [--roofs FILE] [--out DIR] [--threads N]

Profiles ``model_zoo.decoder12`` (12 layers, d 768, SwiGLU 2048, vocab 32000 tied: ~110M
parameters; a batch-1 prompt of 128 tokens) under no_grad with the default timer, and
prints the wall time of the whole profile and of its phases (recording, the in-program
runs, timing the distinct ops alone, placing the program), the calls and distinct ops,
and the machine's load average before and after (other processes on a shared machine slow
every phase).
Without --roofs the device's calibration cache is used (measured once when absent: that
first calibration is timed apart and not counted in the profile's time).
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--roofs", help="roofs file (default: the device's calibration cache)")
    ap.add_argument("--out", help="write the profile there too")
    ap.add_argument("--threads", type=int, help="torch intra-op threads (default: torch's)")
    args = ap.parse_args()
    import torch

    if args.threads:
        torch.set_num_threads(args.threads)

    from roofbench.bench.measure.callables import Clock
    from roofbench.bench.measure.roof_source import device_roofs

    import roofbench

    spec = importlib.util.spec_from_file_location("model_zoo", ROOT / "scripts" /
                                                  "model_zoo.py")
    assert spec is not None and spec.loader is not None
    zoo = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(zoo)
    model, inputs = zoo.decoder12()
    params = sum(p.numel() for p in model.parameters())
    roofs = args.roofs
    if roofs is None:  # the calibration, when there is none yet, is not the profile's time
        t0 = time.perf_counter()
        roofs, _ = device_roofs(Clock())
        print(f"roofs: {time.perf_counter() - t0:.1f} s (calibration cache)")
    load0 = os.getloadavg()
    t0 = time.perf_counter()
    with torch.no_grad():
        prof = roofbench.profile(model, *inputs, roofs=roofs, name="decoder12")
    wall = time.perf_counter() - t0
    load1 = os.getloadavg()
    ph = prof.extra["phases_s"]
    print(f"decoder12: {params / 1e6:.1f}M parameters, {len(prof.recording.calls)} aten "
          f"calls, {len(prof.ops)} distinct ops")
    print(f"profile: {wall:.1f} s (record {ph['record']:.1f} s, in-program runs "
          f"{ph['time_in_program']:.1f} s, ops alone {ph['time_ops_alone']:.1f} s, program "
          f"{ph['time_program']:.1f} s); program median {prof.program_s:.3f} s, sum of ops "
          f"in the program {prof.ops_s:.3f} s, alone {prof.extra['ops_alone_s']:.3f} s")
    print(f"torch threads {torch.get_num_threads()}, load average before "
          f"{load0[0]:.2f} {load0[1]:.2f} {load0[2]:.2f}, after "
          f"{load1[0]:.2f} {load1[1]:.2f} {load1[2]:.2f} on {os.cpu_count()} cores")
    print("within 60 s" if wall <= 60 else "OVER 60 s")
    if args.out:
        for p in prof.write(args.out):
            print(f"wrote {p}")
    return 0 if wall <= 60 else 1


if __name__ == "__main__":
    raise SystemExit(main())
