"""The CuPy backend's paired samples, wired through the CuPy stand-in (tests/standins/fake_cupy:
events on the host clock that note the stream they were recorded on): the roof's samples run
on the probes' CuPy adapter and are timed by CUDA events on the run's stream, and the
backend's timer samples the roof after each sample of the case (bench/backends/cuda_timer.py,
gpu_roofs.py). In a process of its own: the stand-in must never meet the real CuPy."""

from __future__ import annotations

import json
import os
import subprocess
import sys

from patience import patience
from testpaths import FAKE_CUPY, ROOT

SCRIPT = """
import json, time
import cupy
from cupy.cuda import RECORDED_ON
from roofbench.bench.backends.cupy import CupyBackend
from roofbench.bench.measure.pairs import takes_pair
from roofbench.timing import RoofPair, TimerConfig

be = CupyBackend()
dev = be.pair_device()
RECORDED_ON.clear()
current = []

def work():
    current.append(cupy.cuda.get_current_stream() is be.stream)
    time.sleep(0.002)

secs = dev.timed(work)
sample_events = [s is be.stream for s in RECORDED_ON]
log = []

def roof():
    log.append("roof")
    return 5e9

cfg = TimerConfig(warmup_s=0.0, warmup_min_runs=1, min_samples=6, max_samples=6,
                  budget_s=60.0, target_cv=0.0, target_rel_ci=0.0)
t = be.time(lambda: log.append("case"), cfg, pair=RoofPair("memory:dram:x", roof, True))
print(json.dumps({"key": dev.key, "l2": dev.gpu.l2_bytes, "secs": secs, "current": current,
                  "sample_events": sample_events, "same": be.pair_device() is dev,
                  "takes_pair": takes_pair(be), "pairs_roofs": be.pairs_roofs,
                  "log": log, "n": t.n, "warm": t.warmup_runs, "rates": t.roof_rates,
                  "probe": t.roof_probe, "timer": t.config["timer"]}))
"""


def test_the_cupy_backend_samples_its_roof_on_the_runs_stream():
    env = dict(os.environ, RB_FAKE_CC="9.0",
               PYTHONPATH=os.pathsep.join([str(FAKE_CUPY), os.environ.get("PYTHONPATH", "")]))
    p = subprocess.run([sys.executable, "-c", SCRIPT], capture_output=True, text=True, env=env,
                       timeout=patience(120), cwd=ROOT)
    assert p.returncode == 0, p.stderr[-3000:]
    d = json.loads(p.stdout.strip().splitlines()[-1])
    assert d["key"] == "cuda:0" and d["l2"] == 1 << 20 and d["same"]
    assert d["pairs_roofs"] and d["takes_pair"]
    # a sample: its launches on the run's stream, between two events recorded there
    assert d["current"] == [True] and d["sample_events"] == [True, True]
    assert d["secs"] >= 0.002
    # the timer: the roof after each sample, and the case again untimed (rewarm)
    n, warm = d["n"], d["warm"]
    assert d["log"] == ["case"] * warm + ["roof"] + ["case", "roof", "case"] * n
    assert d["rates"] == [5e9] * n and d["probe"] == "memory:dram:x"
    assert d["timer"] == "cuda_events"
