"""`roofbench.measure` and `roofbench.Session`: a user's callable counted, validated, timed
and placed like a workload, on numpy (host clock), on the CuPy stand-in (CUDA events on the
current stream, validated on the device) and on a torch stand-in; the session's results.json
read back by `report`, `plot` and `compare`; the quick calibration run once and reused."""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import textwrap
from dataclasses import asdict

import numpy as np
import pytest
from flat_cases import flat_case
from load_reading import Quiet
from patience import patience
from roofbench.bench.backends.cpu import CpuBackend, cpu_model
from roofbench.bench.cli import main
from roofbench.bench.measure import api, roof_source
from roofbench.bench.measure.door import MeasureError
from roofbench.bench.results import load_run
from roofbench.roofs.files import save_calibrated
from testpaths import FAKE_CUPY, ROOT

import roofbench
from roofbench.roof_records import Roof, RoofSet
from roofbench.timing import TimerConfig

N = 1 << 18
QUICK = TimerConfig.quick()


def roofs_of(device: str) -> RoofSet:
    return RoofSet(device=device, roofs=[
        Roof("dram", "memory", 2e10, "measured", level="dram"),
        Roof("l2", "memory", 1e11, "measured", level="l2"),
        Roof("fp32", "compute", 2e11, "measured", precision="fp32"),
        Roof("fp64", "compute", 1e11, "measured", precision="fp64")])


@pytest.fixture
def arrays():
    rng = np.random.default_rng(3)
    a, b = (rng.uniform(0.25, 1.0, N).astype(np.float32) for _ in range(2))
    return a, b, np.empty_like(a)


def add(a, b, c):
    np.add(a, b, out=c)
    return c


def test_numpy_add_is_counted_validated_timed_and_placed(arrays):
    a, b, c = arrays
    rs = roofs_of(cpu_model())
    rec = roofbench.measure(add, a, b, c, flops=N, reads=[a, b], writes=c, roofs=rs,
                            reference=lambda a, b, c: a.astype(np.float64) + b, output=c)
    assert rec.outcome.status == "ok" and rec.valid and rec.identity.backend == "cpu"
    assert rec.key == f"add/default/fp32/{N}" and rec.identity.precision == "fp32"
    assert rec.declaration.flops == N and rec.declaration.bytes == {"dram": 3 * 4 * N}
    assert rec.declaration.ai == {"dram": pytest.approx(1 / 12)}
    assert 0 <= rec.outcome.rel_error <= 1e-7 and rec.declaration.tolerance == 1e-4
    t = rec.measurement.timing
    assert t.n >= QUICK.min_samples or t.stopped_by == "budget"
    assert t.stopped_by in ("noise", "median_ci", "budget", "max_samples")
    assert t.warmup_runs >= 1 and all(x > 0 for x in t.samples)
    assert rec.outcome.checked
    assert t.config == asdict(TimerConfig())  # a run's timer, not a second one
    assert rec.measurement.median_s == statistics.median(t.samples)
    assert rec.roofline.flop_per_s == N / rec.measurement.median_s
    assert rec.roofline.bytes_per_s == {"dram": 12 * N / rec.measurement.median_s}
    # placed: min(compute roof, bandwidth x AI), computed here from the roofs themselves
    assert rec.roofline.attainable == pytest.approx(min(2e11, 2e10 * N / (12 * N)))
    assert rec.roofline.bound == "memory" and rec.roofline.limiting_roof == "dram"
    assert rec.roofline.efficiency == pytest.approx(
        rec.roofline.flop_per_s / rec.roofline.attainable
    )
    assert (
        rec.evidence.extra["array_module"] == "numpy" and "timing_environment" in rec.evidence.extra
    )


def test_bytes_per_memory_level_and_name(arrays):
    a, b, c = arrays
    rec = roofbench.measure(add, a, b, c, flops=2 * N, bytes={"dram": 12 * N, "l2": 24 * N},
                            name="mine/v2", roofs=roofs_of(cpu_model()), size=[N, 1])
    assert (rec.identity.workload, rec.identity.variant, rec.identity.size) == (
        "mine",
        "v2",
        [N, 1],
    )
    assert rec.declaration.ai == {"dram": pytest.approx(1 / 6), "l2": pytest.approx(1 / 12)}
    # both levels bound it; l2 (1e11 x 1/12) is above dram (2e10 x 1/6)
    assert (
        rec.roofline.attainable == pytest.approx(2e10 / 6) and rec.roofline.limiting_roof == "dram"
    )
    assert rec.evidence.extra["validation"].startswith("none")  # no reference, nothing checked
    assert rec.valid and not rec.outcome.checked


@pytest.mark.parametrize("fn,output,needle", [
    (lambda a, b, c: np.add(a, b + 1e-3, out=c), "c", "relative error"),
    (lambda a, b, c: np.add(a[: N // 2], b[: N // 2], out=c[: N // 2]), "c",
     f"{N // 2} element(s) of 'output' not written or not finite"),
    (lambda a, b, c: (a + b)[:-1], None, "has shape"),
    (lambda a, b, c: None, None, "returned None"),
    (lambda a, b, c: np.full_like(c, np.inf), None, "not finite"),
])
def test_planted_errors_are_invalid_and_untimed(arrays, fn, output, needle):
    a, b, c = arrays
    rec = roofbench.measure(fn, a, b, c, flops=N, reads=[a, b], writes=c,
                            roofs=roofs_of(cpu_model()),
                            reference=a.astype(np.float64) + b,
                            output=c if output else None)
    assert rec.outcome.status == "invalid" and not rec.valid and needle in rec.outcome.error
    assert (
        rec.measurement.timing is None
        and rec.measurement.median_s is None
        and rec.roofline.efficiency is None
    )


@pytest.mark.parametrize("kw,needle", [
    ({"flops": 0}, "flops=0 and no bytes"),
    ({"flops": -5}, "flops must be >= 0, got -5"),
    ({"flops": 1.5}, "flops must be a whole number >= 0, got 1.5"),
    ({"flops": float("nan")}, "flops must be a whole number >= 0"),
    ({"flops": True, "reads": 8}, "flops must be a whole number >= 0, got True"),
    ({"flops": 0, "reads": 0, "writes": 0}, "flops=0 and no bytes"),
    ({"flops": 1, "reads": -1}, "reads must be >= 0"),
    ({"flops": 1, "reads": "x"}, "reads must be a byte count or arrays"),
    ({"flops": 1}, "no bytes given"),
    ({"flops": 1, "reads": 8, "bytes": {"dram": 8}}, "given twice"),
    ({"flops": 1, "reads": 8, "dtype": "fp128"}, "unknown dtype 'fp128'"),
])
def test_bad_declarations_are_one_line_errors(arrays, kw, needle):
    a, b, c = arrays
    with pytest.raises(MeasureError, match=needle.replace("(", r"\(")):
        roofbench.measure(add, a, b, c, roofs=roofs_of(cpu_model()), **kw)


def test_byte_counts_as_numbers_arrays_and_lists():
    from roofbench.bench.measure.door import byte_count

    x = np.ones((4, 8), np.float32)
    assert byte_count(x, "r") == 128 and byte_count([x, x, 3], "r") == 259
    assert byte_count(np.int64(1000), "r") == 1000 and byte_count(2e3, "r") == 2000
    with pytest.raises(MeasureError, match="must be a byte count"):
        byte_count(True, "r")


def test_dtype_is_needed_without_a_float_array():
    x = np.arange(10)
    with pytest.raises(MeasureError, match="pass dtype="):
        roofbench.measure(np.sum, x, flops=10, reads=x)
    rec = roofbench.measure(np.sum, x, flops=10, reads=x, dtype="fp64",
                            roofs=roofs_of(cpu_model()), precision="fp64")
    assert rec.identity.dtype == "fp64" and rec.outcome.status == "ok"


def test_session_writes_a_run_that_report_plot_and_compare_read(arrays, tmp_path, capsys):
    a, b, c = arrays
    out = tmp_path / "s"
    with roofbench.Session(out=out, roofs=roofs_of(cpu_model()), quick=True) as s:
        roofbench.measure(add, a, b, c, flops=N, reads=[a, b], writes=c, name="add")
        on_disk = load_run(out)  # rewritten after every case
        assert [x.key for x in on_disk.cases] == [f"add/default/fp32/{N}"]
        s.measure(np.multiply, a, b, c, flops=N, reads=[a, b], writes=c, name="mul",
                  reference=a.astype(np.float64) * b, output=c)
        with pytest.raises(MeasureError, match="measured already"):
            s.measure(add, a, b, c, flops=N, reads=[a, b], writes=c, name="add")
    for f in ("results.json", "results.csv", "report.md", "report.html", "roofline.png"):
        assert (out / f).stat().st_size > 0, f
    run = load_run(out)
    assert run.device == cpu_model() and run.backend == "cpu" and not run.interrupted
    assert [x.key for x in run.cases] == [f"add/default/fp32/{N}", f"mul/default/fp32/{N}"]
    assert (
        run.cases[1].measurement.timing.samples == s.cases[1].measurement.timing.samples
    )  # raw, every digit
    md = (out / "report.md").read_text()
    assert "mul" in md
    # the case measured without a reference says so; the checked one does not
    rows = {ln.split("|")[1].strip(): ln for ln in md.splitlines() if ln.startswith("| add")
            or ln.startswith("| mul")}
    assert "not validated: no reference given" in rows["add"]
    assert "not validated" not in rows["mul"]
    assert not run.cases[0].outcome.checked and run.cases[1].outcome.checked  # stored, read back
    csv = (out / "results.csv").read_text().splitlines()
    assert csv[0].split(",")[:12].count("checked") == 1
    for cmd in (["report", str(out), "--out", str(tmp_path / "r.md")],
                ["plot", str(out), "--out", str(tmp_path / "p")],
                ["compare", str(out), str(out), "--fail-on", "slower:5%", "--out",
                 str(tmp_path / "cmp")]):
        assert main(cmd) == 0, cmd
    capsys.readouterr()
    cmp = json.loads((tmp_path / "cmp.json").read_text())
    # the run against itself: `same` where the interval excludes a 5% change, else `uncertain`
    # with the interval named (a timing's spread on a shared machine); never slower/faster
    assert len(cmp["cases"]) == 2 and all(c["ratio"] == 1.0 for c in cmp["cases"])
    for c in cmp["cases"]:
        inside = c["ratio_lo"] >= 1 / 1.05 and c["ratio_hi"] <= 1.05
        assert c["verdict"] == ("same" if inside else "uncertain"), c
        assert inside or "wider than the threshold" in c["reason"], c


def test_a_failing_function_is_recorded_then_raised(arrays, tmp_path):
    a, b, c = arrays

    def broken(a, b, c):
        raise RuntimeError("kernel launch failed")

    with roofbench.Session(out=tmp_path / "f", roofs=roofs_of(cpu_model()), quick=True), \
            pytest.raises(RuntimeError, match="launch failed"):
        roofbench.measure(broken, a, b, c, flops=N, reads=[a, b], writes=c)
    (rec,) = load_run(tmp_path / "f").cases
    assert rec.outcome.status == "error" and "kernel launch failed" in rec.outcome.error


def test_quick_calibration_runs_once_and_is_reused(arrays, tmp_path, monkeypatch):
    """No stored roofs: the quick calibration runs once, its file is written where the
    calibration cache lives, and later calls (and, the cache cleared, later processes) read
    it instead of measuring."""
    calls = []

    def fake_probes(self, quick=False, progress=None, checkpoint=None):
        calls.append(quick)
        return roofs_of(self.device_name())

    monkeypatch.setattr(CpuBackend, "measure_roofs", fake_probes)
    monkeypatch.setattr(roof_source, "_load_probe", Quiet)  # cached: a quiet machine
    monkeypatch.setattr(roof_source, "_ROOFS", {})
    cache = tmp_path / "roofs" / "cpu.json"
    a, b, c = arrays
    kw = dict(flops=N, reads=[a, b], writes=c)
    with roofbench.Session(roofs_cache=cache, quick=True) as s:
        r1 = s.measure(add, a, b, c, name="one", **kw)
        r2 = s.measure(add, a, b, c, name="two", **kw)
    assert calls == [True]  # quick, once
    stored = json.loads(cache.read_text())
    assert stored["schema"] == "roofbench.calibrated-roofs/1"
    assert r1.roofline.limiting_roof == r2.roofline.limiting_roof == "dram"
    monkeypatch.setattr(roof_source, "_ROOFS", {})  # a new process
    r3 = roofbench.Session(roofs_cache=cache, quick=True).measure(add, a, b, c, **kw)
    assert calls == [True] and r3.roofline.attainable == r1.roofline.attainable


def test_default_cache_location_is_the_calibration_cache(monkeypatch, tmp_path):
    """roofs/<slug>.json under $ROOFBENCH_HOME: the file `roofbench calibrate` writes."""
    from roofbench.roofs.files import default_path

    monkeypatch.setenv("ROOFBENCH_HOME", str(tmp_path))
    seen = []
    monkeypatch.setattr(roof_source, "_ROOFS", {})
    monkeypatch.setattr(roof_source, "stored_or_quick_roofs",
                        lambda be, path, progress=None: seen.append(path) or roofs_of("x"))
    roof_source.device_roofs(api.clock_for([np.ones(3)]))
    # The file `roofbench calibrate` writes for these cores (@cores-N under `taskset`).
    assert seen == [roof_source.cache_path(CpuBackend())] and seen[0].parent == tmp_path / "roofs"
    assert seen[0].name.startswith(default_path(cpu_model()).stem)


def test_a_case_of_another_device_is_refused(arrays, tmp_path):
    a, b, c = arrays
    s = roofbench.Session(roofs=roofs_of(cpu_model()), quick=True)
    s.measure(add, a, b, c, flops=N, reads=[a, b], writes=c)
    s.run.device = "Another Device"
    with pytest.raises(MeasureError, match="needs a Session of its own"):
        s.measure(add, a, b, c, flops=N, reads=[a, b], writes=c, name="again")


# -- GPU arrays through stand-ins -----------------------------------------------------------

CUPY_SCRIPT = """
import json, sys
import numpy as np
import cupy
import roofbench
from roofbench.roof_records import Roof, RoofSet

rs = RoofSet(device="Fake Emulated GPU", roofs=[
    Roof("hbm", "memory", 4e12, "measured", level="dram"),
    Roof("fp32", "compute", 6e13, "measured", precision="fp32")])
n = 1 << 16
a = cupy.asarray(np.linspace(0.25, 1.0, n, dtype=np.float32))
b = cupy.asarray(np.linspace(1.0, 0.25, n, dtype=np.float32))
c = cupy.empty(n, dtype=np.float32)
ref = cupy.array(a, dtype=np.float64) + b
cupy.clear_transfers()
from cupy.cuda import RECORDED_ON
stream = cupy.cuda.Stream(non_blocking=True)
with stream, roofbench.Session(out=sys.argv[1], roofs=rs, quick=True):
    rec = roofbench.measure(lambda a, b, c: cupy.add(a, b, out=c), a, b, c, flops=n,
                            reads=[a, b], writes=c, name="vadd", reference=ref, output=c)
    bad = roofbench.measure(lambda a, b, c: cupy.add(a, a, out=c), a, b, c, flops=n,
                            reads=[a, b], writes=c, name="wrong", reference=ref, output=c)
print(json.dumps({"rec": rec.to_dict(), "bad": bad.to_dict(),
                  "transfers": cupy.transfers(),
                  "on_stream": sum(s is stream for s in RECORDED_ON),
                  "elsewhere": sum(s is not stream for s in RECORDED_ON)}))
"""


def test_cupy_arrays_are_timed_with_events_on_the_current_stream(tmp_path):
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(FAKE_CUPY),
                                                       os.environ.get("PYTHONPATH", "")]))
    p = subprocess.run([sys.executable, "-c", CUPY_SCRIPT, str(tmp_path / "gpu")],
                       capture_output=True, text=True, env=env, timeout=patience(300), cwd=ROOT)
    assert p.returncode == 0, p.stderr[-3000:]
    d = json.loads(p.stdout.strip().splitlines()[-1])
    rec, bad = flat_case(d["rec"]), flat_case(d["bad"])
    assert rec["status"] == "ok" and rec["backend"] == "cuda" and rec["valid"]
    assert rec["timing"]["config"]["timer"] == "cuda_events"
    assert rec["timing"]["config"]["budget_s"] == 0.3  # quick, within the GPU case budget
    assert rec["extra"]["array_module"] == "cupy" and rec["rel_error"] < 1e-7
    assert rec["attainable"] == pytest.approx(4e12 / 12)
    assert bad["status"] == "invalid" and "relative error" in bad["error"]
    # validated on the device: only scalars came back, no array went over
    assert all(n <= 1 for way, n in d["transfers"] if way == "d2h")
    assert not [t for t in d["transfers"] if t[0] == "h2d"]
    # every sample's two events on the stream the work was queued on
    assert d["on_stream"] >= 2 * rec["timing"]["n"] and d["elsewhere"] == 0
    run = load_run(tmp_path / "gpu")
    assert run.device == "Fake Emulated GPU" and run.backend == "cuda"
    assert [c.outcome.status for c in run.cases] == ["ok", "invalid"]
    assert (tmp_path / "gpu" / "report.html").exists()


FAKE_TORCH = '''
"""A torch stand-in: CUDA tensors held in numpy, events on the host clock."""
import time
import numpy as np

__version__ = "0.0-fake"
float32 = "float32"


class version:
    cuda = "13.0"


class _Device:
    type, index = "cuda", 0


class Tensor:
    def __init__(self, a):
        self.a = np.asarray(a)
        self.is_cuda, self.device, self.dtype = True, _Device(), f"torch.{self.a.dtype}"
        self.shape, self.nbytes = self.a.shape, self.a.nbytes

    def detach(self):
        return self

    def to(self, where):
        return self

    def double(self):
        return Tensor(self.a.astype(np.float64))

    def numpy(self):
        return self.a

    def fill_(self, v):
        self.a.fill(v)


def add(x, y, out):
    np.add(x.a, y.a, out=out.a)
    return out


class _Event:
    def __init__(self, enable_timing=False):
        assert enable_timing
        self.t = None

    def record(self, stream=None):
        assert stream == "the current stream"
        self.t = time.perf_counter()

    def synchronize(self):
        pass

    def elapsed_time(self, other):
        return (other.t - self.t) * 1e3  # milliseconds, as torch gives them


class cuda:
    Event = _Event

    @staticmethod
    def current_stream(index=None):
        return "the current stream"

    @staticmethod
    def synchronize(index=None):
        pass

    @staticmethod
    def get_device_name(index=0):
        return "Fake Torch GPU"

    @staticmethod
    def current_device():
        return 0
'''

TORCH_SCRIPT = """
import json, sys
import numpy as np
import torch
import roofbench

n = 4096
a, b = torch.Tensor(np.ones(n, np.float32)), torch.Tensor(np.full(n, 2, np.float32))
c = torch.Tensor(np.zeros(n, np.float32))
ref = np.full(n, 3.0)
rec = roofbench.measure(torch.add, a, b, c, flops=n, reads=[a, b], writes=c, reference=ref,
                        output=c, session=roofbench.Session(roofs_cache=sys.argv[1],
                                                            quick=True))
print(json.dumps(rec.to_dict()))
"""


def test_torch_cuda_tensors_are_timed_with_torch_events(tmp_path):
    pkg = tmp_path / "fake_torch" / "torch"
    pkg.mkdir(parents=True)
    (pkg / "__init__.py").write_text(textwrap.dedent(FAKE_TORCH))
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(pkg.parent),
                                                       os.environ.get("PYTHONPATH", "")]))
    cache = tmp_path / "fake-torch-gpu.json"

    def run() -> dict:
        p = subprocess.run([sys.executable, "-c", TORCH_SCRIPT, str(cache)],
                           capture_output=True, text=True, env=env, timeout=patience(300), cwd=ROOT)
        assert p.returncode == 0, p.stderr[-3000:]
        return flat_case(json.loads(p.stdout.strip().splitlines()[-1]))

    rec = run()  # no CuPy to calibrate with and no stored roofs: measured, not placed
    assert rec["status"] == "ok" and rec["backend"] == "cuda" and rec["dtype"] == "fp32"
    assert rec["timing"]["config"]["timer"] == "cuda_events"
    assert rec["extra"]["array_module"] == "torch" and rec["attainable"] is None
    assert all(0 < x < 1 for x in rec["timing"]["samples_s"])  # seconds, not milliseconds
    save_calibrated(roofs_of("Fake Torch GPU"), cache)  # a calibration stored before
    rec = run()
    assert rec["attainable"] == pytest.approx(2e10 / 12) and rec["limiting_roof"] == "dram"


def test_module_attributes():
    assert roofbench.measure is api.measure and roofbench.Session is api.Session
    with pytest.raises(AttributeError):
        roofbench.nothing_here  # noqa: B018


def test_every_public_face_declares_a_call_with_the_same_keywords():
    """One list of a call's keywords (declared.declare): measure(), Session.measure and
    AbSession.measure (which passes them through) name the same ones."""
    import inspect

    from roofbench.bench.measure.declared import DECLARED

    def keywords(fn, *drop):
        return {p.name for p in inspect.signature(fn).parameters.values()
                if p.kind is p.KEYWORD_ONLY} - set(drop)

    assert keywords(api.measure, "session", "roofs") == DECLARED
    assert keywords(api.Session.measure) == DECLARED
    assert {"flops", "reference", "output", "tolerance", "counts"} <= DECLARED
