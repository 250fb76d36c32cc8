"""`roofbench trace` on a JAX profiler trace (`.xplane.pb`) recorded here on the CPU: read
through xprof's converters, each XLA op counted by XLA's cost analysis (adding up to the
compiled program's `cost_analysis()`), timed from its events and placed on the roofs; and
the one-line refusals (no xprof, not an xplane)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

jax = pytest.importorskip("jax")

from roofbench.bench.cli import main  # noqa: E402
from roofbench.bench.errors import UserError  # noqa: E402
from roofbench.bench.profile.jax_program import cost_analysis  # noqa: E402
from roofbench.bench.trace.api import trace  # noqa: E402

from roofbench.roof_records import Roof, RoofSet  # noqa: E402

ROOFS = RoofSet("test-cpu", [Roof("dram", "memory", 2e10, "measured", level="dram"),
                             Roof("fp32", "compute", 1e11, "measured", precision="fp32")])
RUNS = 3


@pytest.fixture(scope="module")
def recorded(tmp_path_factory):
    """A jitted matmul, tanh, reduction and add, run RUNS times inside jax.profiler.trace;
    (the log folder, the compiled program's cost analysis)."""
    import jax.numpy as jnp

    @jax.jit
    def f(a, b):
        return jnp.tanh(a @ b).sum(axis=0) + 1.0

    a, b = jnp.ones((256, 512), jnp.float32), jnp.ones((512, 128), jnp.float32)
    f(a, b).block_until_ready()  # compiled outside the trace
    log = tmp_path_factory.mktemp("jax") / "log"
    with jax.profiler.trace(str(log)):
        for _ in range(RUNS):
            f(a, b).block_until_ready()
    return log, cost_analysis(f.lower(a, b).compile())


def test_each_xla_op_is_counted_timed_and_placed(recorded):
    pytest.importorskip("xprof")
    log, xla = recorded
    xplane = next(log.glob("plugins/profile/*/*.xplane.pb"))
    before = sorted(p.name for p in xplane.parent.iterdir())
    tp = trace(log, roofs=ROOFS)  # the log folder: its session's .xplane.pb
    assert tp.analysis.files == [str(xplane)]
    # xprof's caches went to a temporary copy: the user's folder is as it was
    assert sorted(p.name for p in xplane.parent.iterdir()) == before
    assert tp.ops and all(o.counted.distinct is not None for o in tp.analysis.ops)
    # the ops' counts add up to XLA's count of the whole compiled program
    assert sum(p.op.flops for p in tp.ops) == xla["flops"]
    assert sum(p.op.bytes for p in tp.ops) == xla["bytes accessed"]
    # each op ran once per run, its calls' times are its events'; nothing else is an op
    assert all(p.op.calls == RUNS for p in tp.ops)
    assert tp.ops_s == pytest.approx(tp.trace_s) and tp.ops_s > 0
    mm = next(p for p in tp.ops if p.op.family == "matmul/conv/attention")
    assert mm.op.flops >= 2 * 256 * 512 * 128 and mm.case.identity.precision == "fp32"
    assert mm.case.measurement.median_s and mm.case.roofline.efficiency is not None
    assert any("HloCostAnalysis" in n for n in tp.notes)


def test_a_jax_trace_writes_a_run(recorded, tmp_path):
    pytest.importorskip("xprof")
    import json

    log, _ = recorded
    tp = trace(log, roofs=ROOFS, out=tmp_path / "out")
    d = json.loads((tmp_path / "out" / "results.json").read_text())
    names = {c["identity"]["workload"] for c in d["cases"]}
    assert {p.op.name for p in tp.ops} | {"program"} == names
    md = (tmp_path / "out" / "trace.md").read_text()
    # its conventions are XLA's, not the aten rules' table
    assert "HloCostAnalysis" in md.split("Counting conventions")[1]
    assert "torch.utils.flop_counter" not in md


def test_without_xprof_a_jax_trace_is_refused_naming_the_extra(recorded, monkeypatch,
                                                                  capsys, tmp_path):
    log, _ = recorded
    for m in [m for m in sys.modules if m == "xprof" or m.startswith("xprof.")]:
        monkeypatch.delitem(sys.modules, m)
    monkeypatch.setitem(sys.modules, "xprof", None)  # import xprof: ImportError
    with pytest.raises(UserError, match=r"roofbench\[trace-jax\]"):
        trace(log, roofs=ROOFS)
    assert main(["trace", str(log), "--out", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err
    assert "pip install 'roofbench[trace-jax]'" in err and len(err.strip().splitlines()) == 1
    assert not (tmp_path / "out").exists()


def test_a_file_that_is_not_an_xplane_is_one_line(tmp_path, capsys):
    pytest.importorskip("xprof")
    bad = tmp_path / "host.xplane.pb"
    bad.write_bytes(b"\xff\x00 not a protobuf \x13\x37" * 10)
    assert main(["trace", str(bad), "--out", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err
    assert "not a JAX profiler trace" in err and len(err.strip().splitlines()) == 1
    assert not (tmp_path / "out").exists()


def test_a_jax_and_a_pytorch_trace_together_are_refused(recorded, tmp_path):
    log, _ = recorded
    xplane = next(log.glob("plugins/profile/*/*.xplane.pb"))
    other = Path(__file__).resolve().parents[2] / "fixtures" / "traces" / "gpt2-tiny-cpu" / \
        "trace.json.gz"
    with pytest.raises(UserError, match="one at a time"):
        trace(xplane, other, roofs=ROOFS)


def test_an_op_event_holding_others_is_their_container_not_an_op():
    """A `while` whose body's ops ran inside it on its line (the first from its very start):
    its time is theirs, so only they are ops; a device plane's events before the host's."""
    from types import SimpleNamespace as NS

    from roofbench.bench.trace.xplane import _events

    def ev(name, t0, dur):
        return NS(name=name, start_ns=t0, duration_ns=dur,
                  stats=(("hlo_op", "1"), ("program_id", "7")))

    host = NS(name="/host:CPU", lines=[NS(name="launch", events=[ev("while.1", 0, 900)])])
    dev = NS(name="/device:GPU:0", lines=[NS(name="XLA Ops", events=[
        ev("body_fusion", 0, 400), ev("while.1", 0, 1000), ev("cond", 500, 300),
        NS(name="no hlo", start_ns=0, duration_ns=5, stats=())])])
    tr = _events(Path("h.xplane.pb"), NS(planes=[host, dev]))
    assert tr.device and tr.planes == ["/device:GPU:0"] and tr.containers == 1
    assert list(tr.calls) == [("7", "body_fusion"), ("7", "cond")]
    assert tr.calls[("7", "body_fusion")] == [pytest.approx(400e-9)]
    assert tr.calls[("7", "cond")] == [pytest.approx(300e-9)]
