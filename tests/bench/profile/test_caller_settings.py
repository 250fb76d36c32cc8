"""The caller's process settings after every entry point (bench/measure/caller_settings.py
``kept``): ``roofbench.profile``, `roofbench model`, ``roofbench.measure`` and the pytest
``roofline`` fixture each leave torch's threads, the default dtype, grad mode, the RNG
states, torch's math flags and the environment as found, whether the program returns,
raises or is interrupted (KeyboardInterrupt). One test per piece of state per entry point
per ending; the program itself changes the state, as a program that seeds, draws random
numbers or sets threads does (the profile runs it hundreds of times)."""

from __future__ import annotations

import json
import os
import random

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from roofbench.bench.measure.api import Session  # noqa: E402
from roofbench.bench.pytest.state import STATE  # noqa: E402

import roofbench  # noqa: E402

from .test_caller_state import FAST, ROOFS  # noqa: E402

ENV = "CALLER_STATE_TEST_VARIABLE"

# Each piece of state: the statement a program runs that changes it, and what reads it.
STATE_OF = {
    "threads": ("torch.set_num_threads(torch.get_num_threads() + 1)",
                lambda: torch.get_num_threads()),
    "default_dtype": ("torch.set_default_dtype(torch.float64)",
                      lambda: torch.get_default_dtype()),
    "grad_mode": ("torch.set_grad_enabled(not torch.is_grad_enabled())",
                  lambda: torch.is_grad_enabled()),
    "torch_rng": ("torch.rand(3)", lambda: torch.get_rng_state().tolist()),
    "numpy_rng": ("np.random.rand(3)", lambda: repr(np.random.get_state()[1][:8])
                  + str(np.random.get_state()[2])),
    "python_rng": ("random.random()", lambda: random.getstate()),
    "cudnn_flags": ("torch.backends.cudnn.benchmark = not torch.backends.cudnn.benchmark;"
                    "torch.backends.cudnn.allow_tf32 = not torch.backends.cudnn.allow_tf32",
                    lambda: (torch.backends.cudnn.benchmark, torch.backends.cudnn.allow_tf32)),
    "tf32_matmul": ("torch.backends.cuda.matmul.allow_tf32 = "
                    "not torch.backends.cuda.matmul.allow_tf32;"
                    "torch.set_float32_matmul_precision('medium')",
                    lambda: (torch.backends.cuda.matmul.allow_tf32,
                             torch.get_float32_matmul_precision())),
    "environment": (f"os.environ['{ENV}'] = 'changed'; os.environ['{ENV}_NEW'] = '1'",
                    lambda: (os.environ.get(ENV), os.environ.get(f"{ENV}_NEW"))),
}
ENDINGS = ("returns", "raises", "interrupted")


def program(change: str, ending: str):
    """A program that changes one piece of state on every call, then ends as ``ending``
    says (raising from its first call, so from the recording's run)."""
    def step(a):
        exec(change, {"torch": torch, "np": np, "random": random, "os": os})
        if ending == "raises":
            raise ValueError("the program failed")
        if ending == "interrupted":
            raise KeyboardInterrupt
        return a * 2
    return step


@pytest.fixture
def caller(monkeypatch):
    """The caller's own settings, unlike the defaults, all restored after the test."""
    monkeypatch.setenv(ENV, "the caller's")
    monkeypatch.delenv(f"{ENV}_NEW", raising=False)
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    torch.manual_seed(7)
    np.random.seed(7)
    random.seed(7)
    yield
    torch.set_num_threads(threads)
    torch.set_default_dtype(torch.float32)
    torch.set_float32_matmul_precision("highest")


def _ends(ending: str):
    return {"returns": None, "raises": Exception, "interrupted": KeyboardInterrupt}[ending]


def _call(run, ending: str) -> None:
    kind = _ends(ending)
    if kind is None:
        run()
    else:
        with pytest.raises(kind):
            run()


@pytest.mark.parametrize("ending", ENDINGS)
@pytest.mark.parametrize("piece", list(STATE_OF))
def test_profile_leaves_it(caller, piece, ending):
    change, read = STATE_OF[piece]
    before = read()
    _call(lambda: roofbench.profile(program(change, ending), torch.ones(64), roofs=ROOFS,
                                    timer=FAST), ending)
    assert read() == before


@pytest.mark.parametrize("ending", ENDINGS)
@pytest.mark.parametrize("piece", list(STATE_OF))
def test_measure_leaves_it(caller, piece, ending):
    change, read = STATE_OF[piece]
    before = read()
    x = torch.ones(64)
    with Session(roofs=ROOFS, timer=FAST) as s:
        _call(lambda: roofbench.measure(program(change, ending), x, flops=64, reads=x,
                                        writes=x, session=s), ending)
    assert read() == before


@pytest.mark.parametrize("ending", ENDINGS)
@pytest.mark.parametrize("piece", list(STATE_OF))
def test_the_roofline_fixture_leaves_it(caller, piece, ending, request, monkeypatch):
    change, read = STATE_OF[piece]
    state = request.config.stash[STATE]
    monkeypatch.setattr(state, "_session", Session(roofs=ROOFS, timer=FAST))
    has = request.config.pluginmanager.has_plugin  # pytest-benchmark's own runs: not ours
    monkeypatch.setattr(request.config.pluginmanager, "has_plugin",
                        lambda name: name != "benchmark" and has(name))
    measure = request.getfixturevalue("roofline")
    before = read()
    x = torch.ones(64)
    _call(lambda: measure(program(change, ending), x, flops=64, reads=x, writes=x,
                          name=f"fixture-{piece}-{ending}"), ending)
    assert read() == before


@pytest.mark.parametrize("ending", ENDINGS)
@pytest.mark.parametrize("piece", list(STATE_OF))
def test_model_leaves_it(caller, piece, ending, tmp_path):
    from roofbench.bench.cli import main

    change, read = STATE_OF[piece]
    raise_line = {"returns": "", "raises": "    raise ValueError('failed')\n",
                  "interrupted": "    raise KeyboardInterrupt\n"}[ending]
    script = tmp_path / "prog.py"
    script.write_text("import os, random\nimport numpy as np\nimport torch\n"
                      "def step(a):\n"
                      f"    {change}\n{raise_line}"
                      "    return a * 2\n"
                      "def program():\n"
                      "    return step, (torch.ones(64),)\n")
    roofs = tmp_path / "roofs.json"
    roofs.write_text(json.dumps(ROOFS.to_dict()))
    before = read()
    argv = ["model", str(script), "--roofs", str(roofs), "--out", str(tmp_path / "o")]
    assert (main(argv) == 0) == (ending == "returns")  # a stop: exit code 130, said once
    assert read() == before


def test_model_threads_are_the_callers_again_after_threads_n(caller, tmp_path):
    """`--threads N` holds for the profile only; the count the roofs are for is the one
    torch ran the ops on, one figure in the record."""
    from roofbench.bench.cli import main

    script = tmp_path / "prog.py"
    script.write_text("import torch\ndef program():\n"
                      "    return (lambda a: (a * 2).sum()), (torch.ones(64),)\n")
    roofs = tmp_path / "roofs.json"
    roofs.write_text(json.dumps(ROOFS.to_dict()))
    assert torch.get_num_threads() == 1
    assert main(["model", str(script), "--roofs", str(roofs), "--threads", "2",
                 "--out", str(tmp_path / "o")]) == 0
    assert torch.get_num_threads() == 1
    text = (tmp_path / "o" / "results.json").read_text()
    assert "torch intra-op threads" not in text  # one figure: the profile's, read


def test_ops_run_on_the_threads_the_roofs_are_for(caller, monkeypatch):
    """A roof sample that moves torch's threads (as Numba's first launch does) is undone
    before the next timed run: every run of the program and every op starts on the
    caller's count, read there; the compute roof is scaled for that count."""
    from roofbench.bench.measure import pairs
    from roofbench.bench.profile import torch_program

    from roofbench.roof_records import Roof, RoofSet
    from roofbench.timing import RoofPair

    def moving_pair(*a, **k):
        return RoofPair("memory:dram:fake", lambda: (torch.set_num_threads(2), 1e10)[1])

    monkeypatch.setattr(torch_program, "pair_for", moving_pair)
    monkeypatch.setattr(pairs, "pair_for", moving_pair)
    seen: list[int] = []

    def step(a):
        seen.append(torch.get_num_threads())
        return (a * 2).sum()

    roofs = RoofSet(device="test roofs", roofs=[
        Roof("dram stream", "memory", 20e9, "measured", level="dram"),
        Roof("fp32 fma", "compute", 200e9, "measured", precision="fp32",
             evidence={"threads": 2})])
    prof = roofbench.profile(step, torch.ones(64), roofs=roofs, timer=FAST)
    assert set(seen) == {1} and len(seen) > 3
    assert prof.extra["torch_threads"] == 1 and prof.extra["torch_threads_read"] == [1]
    assert prof.extra["torch_threads_reset"] > 0  # the fake probe did move them
    assert prof.roofs.compute("fp32").value == 100e9
    assert torch.get_num_threads() == 1


def test_interop_threads_are_put_back(caller, monkeypatch):
    """torch's inter-op count can be set only before its first parallel work (so never in
    this process): its getter and setter stand in for it."""
    got = {"n": 3}
    monkeypatch.setattr(torch, "get_num_interop_threads", lambda: got["n"])
    monkeypatch.setattr(torch, "set_num_interop_threads", lambda n: got.update(n=n))

    def step(a):
        torch.set_num_interop_threads(9)
        return a * 2

    roofbench.profile(step, torch.ones(8), roofs=ROOFS, timer=FAST)
    assert got["n"] == 3


def test_reading_the_settings_launches_no_numba_threads():
    """The bug as found: Numba's first thread launch sets OpenMP's count (torch's) to its
    own, and asking Numba its thread count launches them; read in a fresh process, the
    settings leave torch's count and Numba's pool as they were."""
    import subprocess
    import sys

    code = ("import torch, numba\n"
            "torch.set_num_threads(1)\n"
            "from roofbench.bench.measure.caller_settings import Settings\n"
            "s = Settings.read()\n"
            "import numba.np.ufunc.parallel as par\n"
            "print(torch.get_num_threads(), par._is_initialized, s.numba_threads)\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=300, check=True).stdout.split()
    assert out == ["1", "False", "None"]
