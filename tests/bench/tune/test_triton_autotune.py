"""The drop-in for ``triton.autotune`` under Triton's interpreter (TRITON_INTERPRET=1: the
kernel really runs, in numpy) with the simulated machine's clock (tune_simulated.py: each
configuration's ``pre_hook`` spends its simulated time): the same configs and key, tuned on a
key's first call and stopped at the target, the best launched then and after, counts of each
configuration from Triton's meta, and the interpreter without a clock launching untuned."""

from __future__ import annotations

import os
import sys

import pytest

_WAS = os.environ.get("TRITON_INTERPRET")
os.environ["TRITON_INTERPRET"] = "1"  # before triton is imported (its decorators read it)
try:
    triton = pytest.importorskip("triton", reason="triton is not installed")
    tl = pytest.importorskip("triton.language")
finally:
    if _WAS is None:
        os.environ.pop("TRITON_INTERPRET", None)
    else:
        os.environ["TRITON_INTERPRET"] = _WAS
torch = pytest.importorskip("torch", reason="torch is not installed (the kernels' arrays)")

from roofbench.bench.tune.search import TuneError  # noqa: E402
from roofbench.bench.tune.triton_autotune import autotune  # noqa: E402


@pytest.fixture(scope="module", autouse=True)
def _interpreter_for_this_module_only():
    was = os.environ.get("TRITON_INTERPRET")
    os.environ["TRITON_INTERPRET"] = "1"
    yield
    if was is None:
        os.environ.pop("TRITON_INTERPRET", None)
    else:
        os.environ["TRITON_INTERPRET"] = was


def add_kernel():
    @triton.jit
    def add(x, y, out, n, BLOCK: tl.constexpr):
        offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        mask = offs < n
        tl.store(out + offs, tl.load(x + offs, mask=mask) + tl.load(y + offs, mask=mask),
                 mask=mask)

    return add


def configs(machine, effs):
    """One config per BLOCK; its pre_hook spends the simulated time of one launch."""
    def hook(block):
        return lambda meta: machine.spend(effs[block])

    return [triton.Config({"BLOCK": b}, num_warps=w, pre_hook=hook(b))
            for b, w in zip(effs, (1, 2, 4, 8), strict=False)]


def grid(meta):
    return (triton.cdiv(meta["n"], meta["BLOCK"]),)


def setup(sim, effs, **kw):
    ts = sys.modules["tune_simulated"]
    s = sim()
    tuned = autotune(configs(s.machine, effs), key=["n"], flops=lambda meta: meta["n"],
                     bytes=kw.pop("bytes", {"dram": ts.NBYTES}), output="out",
                     reference=lambda x, y, out, n: x + y, roofs=ts.roofs(), timer=ts.TIMER,
                     clock=s.clock, now=s.machine.clock, **kw)(add_kernel())
    return s, tuned


def arrays(n):
    x = torch.arange(n, dtype=torch.float32)
    return x, torch.full((n,), 0.5), torch.empty(n)


def test_the_first_call_of_a_key_tunes_stops_at_the_target_and_launches_the_best(sim):
    s, add = setup(sim, {32: 0.5, 64: 0.95, 128: 0.6, 256: 0.7})
    x, y, out = arrays(1000)
    add[grid](x, y, out, 1000)
    assert torch.equal(out, x + y)
    (key, rec), = add.records.items()
    assert key == (1000, "torch.float32", "torch.float32", "torch.float32")
    assert rec.stop == "target"
    assert [t.status for t in rec.trials] == ["ok", "ok", "untried", "untried"]
    assert add.best_config.kwargs == {"BLOCK": 64} and add.best_config.num_warps == 2
    assert rec.trials[1].label == "BLOCK=64,num_warps=2,num_stages=3"
    assert rec.trials[1].efficiency is not None  # placed on the roofline
    before = s.machine.now
    out.zero_()
    add[grid](x, y, out, 1000)  # the same key: no tuning, one launch of the best
    assert len(add.records) == 1 and torch.equal(out, x + y)
    assert s.machine.now - before < 0.01  # one simulated launch, not a search


def test_a_new_key_tunes_again(sim):
    s, add = setup(sim, {32: 0.95, 64: 0.5})
    for n in (1000, 777):
        x, y, out = arrays(n)
        add[grid](x, y, out, n)
        assert torch.equal(out, x + y)
    assert sorted(k[0] for k in add.records) == [777, 1000]


def test_counts_of_each_configuration_come_from_meta(sim):
    ts = sys.modules["tune_simulated"]
    s, add = setup(sim, {32: 0.5, 64: 0.5}, exhaustive=True,
                   bytes=lambda meta: {"dram": ts.NBYTES * (2 if meta["BLOCK"] == 32 else 1)})
    x, y, out = arrays(1000)
    add[grid](x, y, out, 1000)
    rec = next(iter(add.records.values()))
    assert [t.bytes["dram"] for t in rec.trials] == [2 * ts.NBYTES, ts.NBYTES]
    assert [t.flops for t in rec.trials] == [1000, 1000]


def test_under_the_interpreter_without_a_clock_the_first_config_runs_untuned(capsys):
    add = autotune([triton.Config({"BLOCK": 64}), triton.Config({"BLOCK": 128})], key=["n"],
                   flops=lambda meta: meta["n"], reads=0, bytes={"dram": 12000})(add_kernel())
    x, y, out = arrays(300)
    add[grid](x, y, out, 300)
    assert torch.equal(out, x + y) and add.best_config.kwargs == {"BLOCK": 64}
    assert add.records == {} and "launched untuned" in capsys.readouterr().err


def test_a_key_or_output_not_an_argument_is_one_line():
    with pytest.raises(TuneError, match=r"key names \['m'\]"):
        autotune([triton.Config({"BLOCK": 64})], key=["m"], flops=1)(add_kernel())
    with pytest.raises(TuneError, match="output= names"):
        autotune([triton.Config({"BLOCK": 64})], key=["n"], flops=1, output="c")(add_kernel())
