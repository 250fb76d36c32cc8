"""The GPU roof samplers (roofs/probes/gpu_pairs.py: HbmPair, L2Pair, FmaPair) EXECUTING their
CUDA kernels (issue 37): under the CuPy stand-in (tests/standins/fake_cupy), whose RawModule
kernels run under the CPU emulation of CUDA (tests/standins/cuda_emu). The tests of
test_gpu_pairs.py and tests/bench/measure/test_pairs_gpu.py drive them on a virtual GPU that
runs no kernel; here each one runs its real kernel, on the probes' CuPy adapter, through
``pair_device_through_cupy`` as a GPU backend makes it.

The child (emu_pairs_child.py) calibrates the emulated device with the real probes (HBM, L2,
FMA at each precision: the roofs as the calibration records them), takes from them a roof for
every thing a roof can name (each STREAM kernel and dtype, each library copy, each L2 form,
each FMA precision), calls each roof's sampler twice and reports. Held here, per roof:

- the sampler launches the roof's kernel at the roof's launch (grid, block), a launch the probe
  itself made, between the two CUDA events of its timer; the L2 sampler's warm launch comes
  before the first event (untimed), then the timed one;
- it returns a finite positive rate whose work is what the kernel really moved or did: the
  bytes of each array counted by the emulation's counting build (tests/standins/cuda_emu/
  bytes_count.cpp) equal STREAM's convention over the roof's own array size, or L2Launch's
  bytes; the FMAs the emulation executed (rb_emu_fma_counts) equal the FLOPs it divides by;
- every array stays in bounds (the arrays sit between guard bytes: an access past one fails
  the launch, and the test with it) and no access is misaligned;
- the outputs hold what the kernel computes (STREAM's a/b/c, the L2 copy's destination, each
  FMA thread's chains against a float64 model; outputs poisoned before the launch).

The rates are emulation rates and mean nothing. The PyTorch forms of the HBM roof cannot run
here (no CUDA PyTorch): their samplers raise ProbeUnavailable, which gpu_pair turns into no
pair. Planted errors, each made in gpu_pairs.py by hand, seen failing here and reverted: an
HBM launch of one block more than the roof's grid (the launch check), HBM work counted twice
(the byte check), an L2 sampler without its warm launch (the order check), an L2 buffer one
16-byte vector short (the emulation's bounds check fails the launch), the FMA FLOPs without
the packed forms' factor 2 (the FMA count check)."""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import cuda_tools as ct
import pytest
from patience import patience
from roofbench.roofs.probes import gpu_math as gm
from roofbench.roofs.probes import gpu_memory as gmem
from testpaths import FAKE_CUPY, ROOT, STANDINS

pytestmark = pytest.mark.skipif(ct.emulation_missing() is not None,
                                reason=ct.emulation_missing() or "")

CHILD = Path(__file__).with_name("emu_pairs_child.py")
STREAMS = [f"stream {k} {p}" for p in gmem.STREAM_DTYPES for k in gmem.STREAM_RW]
LIBRARIES = [f"{lib} {op}" for lib, op in gmem.LIBRARY_STREAMS]
PACKED = ("fp16", "bf16")
FMA_SLOT = {"fp32": 0, "fp64": 1, "fp16": 2, "bf16": 3}  # emu.h rb_emu_fma_counts


@pytest.fixture(scope="module")
def emulated() -> dict[str, Any]:
    out = ct._TMP / "emu_pairs"
    check, count = out / "check", out / "count"
    check.mkdir(parents=True, exist_ok=True)
    jobs = [lambda s=s: ct._emu_compile(ct.PROBE_DIR / f"{s}.cu", check / f"{s}.so", "-O1")
            for s in ("stream", "cache", "fma")]
    jobs += [lambda s=s: ct.build_counting(f"{s}.cu", count) for s in ("stream", "cache")]
    with ThreadPoolExecutor(max_workers=2) as ex:
        list(ex.map(lambda j: j(), jobs))
    env = dict(os.environ, RB_EMU_LIBDIR=str(check), RB_EMU_COUNT=str(count), RB_FAKE_CC="9.0",
               PYTHONPATH=os.pathsep.join([str(FAKE_CUPY), str(STANDINS),
                                           os.environ.get("PYTHONPATH", "")]))
    res = out / "result.json"
    p = subprocess.run([sys.executable, str(CHILD), str(res)], capture_output=True, text=True,
                       env=env, timeout=patience(600), cwd=ROOT)
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-3000:]
    return json.loads(res.read_text())


def by_probe(emulated: dict[str, Any], probe: str) -> dict[str, Any]:
    (rec,) = [r for r in emulated["roofs"] if r["evidence"]["probe"] == probe]
    return rec


def l2_roof(emulated: dict[str, Any], form: str) -> dict[str, Any]:
    (rec,) = [r for r in emulated["roofs"] if r["level"] == "l2"
              and r["evidence"]["form"] == form]
    return rec


def fma_roof(emulated: dict[str, Any], prec: str) -> dict[str, Any]:
    (rec,) = [r for r in emulated["roofs"] if r["kind"] == "compute"
              and r["precision"] == prec]
    return rec


def launch_of(rec: dict[str, Any]) -> list[Any]:
    """The launch that measured the roof: its kernel (a STREAM probe's "stream <kernel>
    <dtype>" is stream_<kernel>_<f32|f64>) at its grid and block."""
    ev, cfg = rec["evidence"], rec["evidence"]["config"]
    words = str(ev["probe"]).split()
    kernel = (f"stream_{words[1]}_{gmem.STREAM_DTYPES[words[2]][0]}" if words[0] == "stream"
              else words[0])
    return ["launch", kernel, [int(cfg["grid"])], [int(cfg["block"])]]


def held_to_its_launch(rec: dict[str, Any], emulated: dict[str, Any], warm: bool) -> None:
    """Ran, launched the roof's kernel at the roof's launch (one the probe made), between
    its timer's events (after an untimed warm launch: ``warm``), and gave a rate."""
    assert "error" not in rec, rec["error"]
    assert rec["key"].endswith(f":{rec['evidence']['probe']}")
    launch = launch_of(rec)
    assert launch[1:] in emulated["probe_launches"], "not a launch the probe made"
    want = [launch] * warm + [["event"], launch, ["event"]]
    for call in rec["calls"]:
        got = [e[:1] if e[0] == "event" else e for e in call["log"]]
        assert got == want
        assert math.isfinite(call["rate"]) and call["rate"] > 0
    assert rec["outputs"] == "ok"


def test_every_roof_the_probes_record_gets_its_sampler(emulated):
    keys = sorted(r["key"] for r in emulated["roofs"])
    forms = {r["evidence"]["form"]: r["evidence"]["probe"] for r in emulated["roofs"]
             if r["level"] == "l2"}
    assert keys == sorted([f"memory:dram:{p}" for p in STREAMS + LIBRARIES]
                          + [f"memory:l2:{p}" for p in forms.values()]
                          + [f"compute:{p}:{k}" for p, k in gm.FMA_KERNELS.items()])
    assert set(forms) == set(gmem.L2_FORMS)


@pytest.mark.parametrize("probe", STREAMS)
def test_the_hbm_sampler_runs_each_stream_kernel_over_the_roofs_arrays(emulated, probe):
    rec = by_probe(emulated, probe)
    held_to_its_launch(rec, emulated, warm=False)
    _, kernel, prec = probe.split()
    isz = gmem.STREAM_DTYPES[prec][1]
    nbytes = rec["evidence"]["array_bytes"]
    assert [n for _, n in rec["arrays"]] == [nbytes // isz] * 3 + [1]  # a, b, c, the sink
    c = rec["counted"]
    assert c["work"] == rec["work"] == gmem.stream_bytes(kernel, nbytes // isz, isz)
    r, w = gmem.STREAM_RW[kernel]
    assert c["nbytes"][:3] == [nbytes] * 3
    assert sum(c["read"][:3]) == r * nbytes and sum(c["written"][:3]) == w * nbytes
    assert sum(c["read"][:3]) + sum(c["written"][:3]) == rec["work"]
    assert c["misaligned"] == 0
    if kernel != "read":  # read: one atomic per warp into its sink, beyond STREAM's count
        assert c["read"][3] == c["written"][3] == 0


@pytest.mark.parametrize("probe", LIBRARIES)
def test_the_hbm_sampler_runs_the_library_copy_that_set_the_roof(emulated, probe):
    rec = by_probe(emulated, probe)
    lib, op = probe.split()
    if lib == "torch":  # no CUDA PyTorch here: refused on the first call (gpu_pair: no pair)
        assert rec["error"].startswith("ProbeUnavailable: PyTorch"), rec.get("error")
        return
    assert "error" not in rec, rec["error"]
    nbytes = rec["evidence"]["array_bytes"]
    assert [n for _, n in rec["arrays"]] == [nbytes // 4] * 3
    assert rec["work"] == gmem.stream_bytes(op, nbytes // 4, 4)
    for call in rec["calls"]:  # the library's work between the events, no kernel of ours
        assert [e[0] for e in call["log"]] == ["event", "event"]
        assert math.isfinite(call["rate"]) and call["rate"] > 0
    assert rec["outputs"] == "ok"


@pytest.mark.parametrize("form", gmem.L2_FORMS)
def test_the_l2_sampler_warms_then_times_the_roofs_launch(emulated, form):
    rec = l2_roof(emulated, form)
    held_to_its_launch(rec, emulated, warm=True)
    cfg = rec["evidence"]["config"]
    per_buffer = cfg["chunk_bytes"] * cfg["chunks"]
    buffers = 2 if form == "copy" else 1
    assert [n * 4 for _, n in rec["arrays"]] == [per_buffer] * buffers + [4]  # and the sink
    c = rec["counted"]
    assert c["work"] == rec["work"] == rec["evidence"]["bytes_per_launch"]
    moved = cfg["grid"] * cfg["chunk_bytes"]  # every block its chunk
    assert c["read"][0] == moved and c["written"][:buffers] == [0] * (buffers - 1) + [
        moved if form == "copy" else 0]
    assert sum(c["read"]) + sum(c["written"]) == rec["work"]
    assert c["misaligned"] == 0


@pytest.mark.parametrize("prec", list(gm.FMA_KERNELS))
def test_the_fma_sampler_executes_the_flops_it_divides_by(emulated, prec):
    rec = fma_roof(emulated, prec)
    held_to_its_launch(rec, emulated, warm=False)
    cfg, roof_iters = rec["evidence"]["config"], rec["evidence"]["iters"]
    threads = cfg["grid"] * cfg["block"]
    assert rec["arrays"][0][1] == threads
    packed = prec in PACKED
    iters = round(rec["work"] / gm.fma_flops(threads, 1, packed))
    assert rec["work"] == gm.fma_flops(threads, iters, packed)
    assert 1 <= iters <= roof_iters and roof_iters == 4  # shortened, never lengthened
    for call in rec["calls"]:
        counts = call["fma_counts"]
        assert counts[FMA_SLOT[prec]] * (4 if packed else 2) == rec["work"], counts
        assert sum(counts) == counts[FMA_SLOT[prec]]
