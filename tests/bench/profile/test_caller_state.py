"""The caller's state after a profile (bench/profile/caller_state.py): the arguments, the
module's parameters and buffers and every .grad as they were; a program whose inputs grow
between calls refused in one line."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

from roofbench.bench.profile.inprogram import ProgramChanged  # noqa: E402

import roofbench  # noqa: E402
from roofbench.roof_records import Roof, RoofSet  # noqa: E402
from roofbench.timing import TimerConfig  # noqa: E402

ROOFS = RoofSet(device="test roofs", roofs=[
    Roof("dram stream", "memory", 20e9, "measured", level="dram"),
    Roof("fp32 fma", "compute", 200e9, "measured", precision="fp32")])
FAST = TimerConfig(warmup_s=0.0, warmup_min_runs=1, min_samples=2, max_samples=3,
                   budget_s=0.0)


def test_an_argument_written_in_place_is_left_as_it_was():
    x = torch.zeros(64)
    with torch.no_grad():
        roofbench.profile(lambda t: t.add_(1).mul(2), x, roofs=ROOFS, timer=FAST)
    assert torch.equal(x, torch.zeros(64))


def test_batchnorm_statistics_and_weights_are_restored():
    torch.manual_seed(0)
    net = torch.nn.Sequential(torch.nn.Linear(16, 16), torch.nn.BatchNorm1d(16)).train()
    before = {k: v.clone() for k, v in net.state_dict().items()}
    with torch.no_grad():
        roofbench.profile(net, torch.randn(8, 16), roofs=ROOFS, timer=FAST)
    after = net.state_dict()
    assert all(torch.equal(before[k], after[k]) for k in before)
    assert int(after["1.num_batches_tracked"]) == 0


def test_a_closure_tensor_written_in_place_is_restored():
    acc = torch.zeros(8)

    def step(x):
        acc.add_(x)
        return acc * 2

    with torch.no_grad():
        roofbench.profile(step, torch.ones(8), roofs=ROOFS, timer=FAST)
    assert torch.equal(acc, torch.zeros(8))


def test_gradients_are_left_as_they_were():
    lin = torch.nn.Linear(8, 4)
    lin.weight.grad = torch.full_like(lin.weight, 3.0)
    kept = lin.weight.grad

    class Train(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = lin

        def forward(self, x):
            self.lin(x).sum().backward()
            return x

    model = Train()
    roofbench.profile(model, torch.randn(2, 8), roofs=ROOFS, timer=FAST)
    assert lin.weight.grad is kept and torch.equal(kept, torch.full_like(kept, 3.0))
    assert lin.bias.grad is None


def test_a_cache_that_grows_is_refused_and_the_callers_cache_untouched():
    cache = [torch.ones(1, 4)]

    def step(x, past):
        past.append(x * 2)  # a key/value cache updated on every call
        return torch.cat(past)

    with torch.no_grad(), pytest.raises(ProgramChanged, match="cache that grows"):
        roofbench.profile(step, torch.ones(1, 4), cache, roofs=ROOFS, timer=FAST)
    assert len(cache) == 1


def test_the_refusal_is_one_line_from_the_cli(tmp_path, capsys):
    import json

    from roofbench.bench.cli import main

    script = tmp_path / "grow.py"
    script.write_text(
        "import torch\n"
        "CACHE = [torch.ones(1, 4)]\n"
        "def step(x):\n"
        "    CACHE.append(x)\n"
        "    return torch.cat(CACHE)\n"
        "def program():\n"
        "    return step, (torch.ones(1, 4),)\n")
    roofs = tmp_path / "roofs.json"
    roofs.write_text(json.dumps(ROOFS.to_dict()))
    code = main(["model", str(script), "--roofs", str(roofs), "--out", str(tmp_path / "o")])
    err = capsys.readouterr().err
    assert code != 0 and "cache that grows" in err and "Traceback" not in err
