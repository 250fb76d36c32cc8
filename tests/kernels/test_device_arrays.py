"""Inputs, reference and validation where the backend's arrays live (kernels/arrays.py).

- The device storage (bf16 words, fp8 codes) rounds as ml_dtypes does: every fp8 code, every
  midpoint between neighbours (ties to even), the overflow to NaN, -0.0, NaN; bf16 likewise.
- The host path draws and computes exactly what it did before the array module existed (the
  old code is kept here as the oracle).
- On the CuPy stand-in (real CupyBackend and runner, kernels through the CPU emulation) a GPU
  case copies no full-size array to the host, nor to the device: every transfer is recorded
  by the stand-in, and a planted host copy is caught.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import cuda_tools as ct
import ml_dtypes
import numpy as np
import pytest
from patience import patience
from roofbench.bench.suite.runner import validate
from roofbench.kernels.arrays import HOST, Arrays, fp8_values, np_dtype
from roofbench.kernels.registry import workloads
from roofbench.kernels.spec import Case
from testpaths import FAKE_CUPY, ROOT

DEVICE_ON_NUMPY = Arrays(np, device=True)  # the device code path, run by numpy


def _edge_values() -> np.ndarray:
    v = fp8_values()[:127]  # the finite non-negative codes
    mids = (v[:-1] + v[1:]) / 2
    rng = np.random.default_rng(3)
    wide = rng.standard_normal(100_000) * 10.0 ** rng.integers(-4, 4, 100_000)
    special = [447.9, 448, 455, 460, 463.99, 464, 464.01, 470, 479, 480, 481, 1e6, 1e9,
               0.0, -0.0, np.nan, -np.nan, 2.0 ** -9, 2.0 ** -10, 3 * 2.0 ** -11]
    x = np.concatenate([v, mids, wide, special]).astype(np.float32)
    return np.concatenate([x, -x])


@pytest.mark.filterwarnings("ignore:overflow encountered in cast")
@pytest.mark.parametrize("dtype", ["fp8", "bf16", "fp16", "fp32"])
def test_device_storage_rounds_as_ml_dtypes(dtype):
    x = _edge_values()
    want = x.astype(np_dtype(dtype))
    got = DEVICE_ON_NUMPY.store(x, dtype)
    assert got.dtype == DEVICE_ON_NUMPY.storage(dtype)
    if dtype in ("fp8", "bf16"):
        w, g = want.view(got.dtype), got
        nan = np.isnan(want.astype(np.float64))
        assert np.array_equal(w[~nan], g[~nan])  # bit for bit
        # NaN stays NaN (the payload may differ; fp8 has one NaN per sign)
        assert np.isnan(DEVICE_ON_NUMPY.values(g[nan], dtype)).all()
    else:
        assert np.array_equal(want, got, equal_nan=True)
    back = DEVICE_ON_NUMPY.values(got, dtype)
    assert back.dtype == np.float64
    assert np.array_equal(back, want.astype(np.float64), equal_nan=True)


def test_fp8_ties_go_to_the_even_code_and_overflow_to_nan():
    codes = DEVICE_ON_NUMPY.store(np.float32([464.0, 470.0, 0.0, -0.0, 17.0]), "fp8")
    assert codes.tolist() == [126, 127, 0, 128, 0x58]  # 448; NaN; 0; -0; 16 (tie: even code)
    assert fp8_values()[0x58] == 16.0 and fp8_values()[0x59] == 18.0


def _old_make_inputs(w, size, dtype, rng):
    """make_inputs as it was before the array module (the oracle of the host path)."""
    lo, hi = w.input_range
    out = {}
    for name, buf in w.inputs(size, dtype).items():
        work = np.float64 if buf.dtype == "fp64" else np.float32
        x = rng.random(size=buf.shape, dtype=work)
        x *= work(hi - lo)
        x += work(lo)
        np.negative(x, out=x, where=rng.integers(0, 2, size=buf.shape, dtype=np.int8) == 1)
        out[name] = x if x.dtype == np_dtype(buf.dtype) else x.astype(np_dtype(buf.dtype))
    return out


OLD_REFERENCE = {
    "vector_add": lambda x: {"c": x["a"].astype(np.float64) + x["b"].astype(np.float64)},
    "l2norm": lambda x: {"out": np.sqrt(x["a"].astype(np.float64) ** 2
                                        + x["b"].astype(np.float64) ** 2)},
    "rownorm": lambda x: {"y": x["x"].astype(np.float64) / np.sqrt(np.einsum(
        "ij,ij->i", x["x"].astype(np.float64), x["x"].astype(np.float64)) + 1e-6)[:, None]},
    "gemm": lambda x: {"C": x["A"].astype(np.float64) @ x["B"].astype(np.float64)},
}
SIZES = {"vector_add": (1003,), "l2norm": (1003,), "rownorm": (7, 129), "gemm": (17, 9, 33)}


@pytest.mark.parametrize("name", sorted(SIZES))
@pytest.mark.parametrize("dtype", ["fp32", "fp64", "fp16", "bf16", "fp8"])
def test_host_path_numbers_are_unchanged(name, dtype):
    w = workloads()[name]
    if dtype not in w.dtypes():
        pytest.skip(f"{name} has no {dtype}")
    size = SIZES[name]
    new = w.make_inputs(size, dtype, np.random.default_rng(11))
    old = _old_make_inputs(w, size, dtype, np.random.default_rng(11))
    assert set(new) == set(old)
    for k in new:
        assert new[k].dtype == old[k].dtype and np.array_equal(new[k].view(np.uint8),
                                                               old[k].view(np.uint8))
    ref = w.expected(new, size, dtype)
    want = OLD_REFERENCE[name](old)
    for k in want:
        assert ref[k].dtype == np.float64
        np.testing.assert_allclose(ref[k], want[k], rtol=1e-13, atol=0)


def test_device_inputs_are_drawn_in_range_and_stored_as_words():
    w = workloads()["vector_add"]
    class Gen:  # cupy.random.RandomState's call, on numpy
        g = np.random.default_rng(5)

        def random_sample(self, size, dtype):
            return self.g.random(size, dtype=dtype)
    gen = Gen()
    x = w.make_inputs((5000,), "fp8", gen, DEVICE_ON_NUMPY)
    assert x["a"].dtype == np.uint8
    v = DEVICE_ON_NUMPY.values(x["a"], "fp8")
    assert (np.abs(v) >= 0.25).all() and (np.abs(v) <= 1.0).all() and (v < 0).any()


def test_device_validation_catches_unwritten_and_wrong_outputs():
    w = workloads()["vector_add"]
    case = Case(w, w.variants["scalar"], "bf16", (999,))
    a = DEVICE_ON_NUMPY
    x = {"a": a.store(np.linspace(0.25, 1, 999, dtype=np.float32), "bf16"),
         "b": a.store(np.linspace(-1, -0.25, 999, dtype=np.float32), "bf16")}
    ref = w.expected(x, case.size, "bf16", a)
    good = {"c": a.store(ref["c"].astype(np.float32), "bf16")}
    assert validate(case, good, ref, a)[0]
    unwritten = {"c": good["c"].copy()}
    unwritten["c"][17] = 0x7FC0  # the bf16 poison
    ok, err, why = validate(case, unwritten, ref, a)
    assert not ok and "1 element(s)" in why and "(17,)" in why
    wrong = {"c": a.store((ref["c"] * 1.1).astype(np.float32), "bf16")}
    ok, err, why = validate(case, wrong, ref, a)
    assert not ok and err == pytest.approx(0.1, rel=0.05) and "tolerance" in why
    # the host path reads the same outputs as ml_dtypes arrays, with the same verdicts
    host_ref = w.expected({k: v.view(ml_dtypes.bfloat16) for k, v in x.items()}, case.size,
                          "bf16")
    assert validate(case, {"c": good["c"].view(ml_dtypes.bfloat16)}, host_ref, HOST)[0]


GPU_CASES = r"""
import json, sys
import numpy as np
import cupy
from roofbench.bench.backends.cupy import CupyBackend
from roofbench.bench.suite.runner import run_cases
from roofbench.timing import TimerConfig
from roofbench.kernels.registry import workloads
from roofbench.kernels.spec import Case

be = CupyBackend()
ws = workloads()
todo = [("vector_add", v, d, (1 << 16,)) for v in ("scalar", "vec4") for d in ("fp8", "bf16")]
todo += [("vector_add", "scalar", d, (1 << 16,)) for d in ("fp32", "fp64")]
todo += [("l2norm", v, "fp16", (1 << 16,)) for v in ("naive", "fused")]
todo += [("rownorm", v, "fp32", (64, 1024)) for v in ("naive", "fused")]
todo += [("gemm", "library", "fp32", (96, 80, 64)), ("gemm", "tensor_mma", "bf16", (128, 128, 64))]
cases = [Case(ws[n], ws[n].variants[v], d, s) for n, v, d, s in todo]
out = []
def done(rec):
    out.append({"key": rec.key, "status": rec.outcome.status, "valid": rec.valid,
                "error": rec.outcome.error,
                "transfers": cupy.transfers(), "phases": rec.measurement.phases,
                "device_phases": rec.measurement.device_phases,
                "timed": (rec.measurement.timing.warmup_runs, len(rec.measurement.timing.samples)),
                "smallest_buffer": min(b.count for b in
                                       next(c for c in cases if c.key == rec.key).buffers().values()
                                       if b.count > 1000)})
    cupy.clear_transfers()
cupy.clear_transfers()
# a warm-up and two samples, not --quick's 12: every phase and a copy between samples is seen,
# and each of the 12 cases' emulated launches is paid 4 times, not 14 or more
run_cases(cases, be, None, TimerConfig(warmup_s=0.0, warmup_min_runs=1, min_samples=2,
                                       max_samples=2, budget_s=0.0), seed=1, done=done)
# a planted host copy of the outputs: the instrument must see a full-size transfer
c = cases[0]
p = be.prepare(c, c.workload.make_inputs(c.size, c.dtype, np.random.default_rng(2)))
cupy.clear_transfers()
p.outputs()
out.append({"planted": cupy.transfers()})
p.close()
print("RESULT " + json.dumps(out))
"""


@pytest.mark.skipif(ct.emulation_missing() is not None, reason=ct.emulation_missing() or "")
def test_a_gpu_case_copies_no_full_size_array_to_the_host():
    env = dict(os.environ, RB_EMU_LIBDIR=str(ct.build_emulation()),
               PYTHONPATH=os.pathsep.join([str(FAKE_CUPY),
                                           os.environ.get("PYTHONPATH", "")]))
    p = subprocess.run([sys.executable, "-c", GPU_CASES], capture_output=True, text=True,
                       env=env, timeout=patience(600), cwd=ROOT)
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-3000:]
    res = json.loads(next(ln for ln in p.stdout.splitlines()
                          if ln.startswith("RESULT "))[len("RESULT "):])
    *cases, planted = res
    assert len(cases) == 12
    for c in cases:
        assert c["status"] == "ok" and c["valid"], c
        sizes = [n for _, n in c["transfers"]]
        # scalars and the 256-entry fp8 table only, against arrays of 4096 elements and more
        assert max(sizes, default=0) <= 256 < c["smallest_buffer"], (c["key"], c["transfers"])
        assert set(c["device_phases"]) >= {"inputs", "prepare", "validate", "time"}
        assert "compile" in c["phases"] and "compile" not in c["device_phases"]
        assert all(v >= 0 for v in c["device_phases"].values())
        assert c["timed"] == [1, 2], c["timed"]  # (warm-ups, samples): the set-up's, no more
    # the instrument sees a host copy of a full output when one is made
    assert planted["planted"] == [["d2h", 1 << 16]]


def test_ml_dtypes_is_imported_only_when_bf16_or_fp8_is_asked_for():
    """The CLI, the registry and an fp32 case never import ml_dtypes (its import costs every
    process about half a second of CPU); bf16 and fp8 still resolve to its types."""
    code = ("import sys\n"
            "import roofbench.bench.cli\n"
            "from roofbench.kernels.registry import workloads\n"
            "from roofbench.kernels.arrays import DTYPES, np_dtype\n"
            "workloads(); np_dtype('fp32'); list(DTYPES); 'bf16' in DTYPES\n"
            "print('ml_dtypes' in sys.modules)\n"
            "print(np_dtype('bf16').name, DTYPES['fp8'].name, 'ml_dtypes' in sys.modules)\n")
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                       timeout=patience(120), cwd=ROOT)
    assert p.returncode == 0, p.stderr
    assert p.stdout.split("\n")[:2] == ["False", "bfloat16 float8_e4m3fn True"], p.stdout
