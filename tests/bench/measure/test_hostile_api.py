"""A hostile user of the Python API and of roofs files, in-process: every entry of a table is
one attempt that must end cleanly. A malformed call of `roofbench.measure` or `Session` is a
MeasureError (a Refusal and a ValueError) of one line naming the argument, raised before
anything is timed or written; a roofs file that is not a roof set is one line naming the file
and the roof; a session never writes over a run; torch tensors are validated through the
tensor API. ``pytest tests/bench/measure/test_hostile_api.py -k count -s`` prints the count.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import sys
import types
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from roofbench.bench.backends.cpu import cpu_model
from roofbench.bench.measure.door import MeasureError
from roofbench.bench.results import load_run
from roofbench.roofs.files import RoofsFileError, load_roofs, read_bounded

import roofbench
from roofbench.boundary import Refusal
from roofbench.roof_records import Roof, RoofSet
from roofbench.timing import TimerConfig

N = 1 << 12


def roofs() -> RoofSet:
    return RoofSet(device=cpu_model(), roofs=[
        Roof("dram", "memory", 2e10, "measured", level="dram"),
        Roof("fp32", "compute", 2e11, "measured", precision="fp32"),
        Roof("fp64", "compute", 1e11, "measured", precision="fp64")])


@pytest.fixture
def arrays():
    a = np.full(N, 0.5, np.float32)
    return a, np.full(N, 0.25, np.float32), np.empty_like(a)


def add(a, b, c):
    np.add(a, b, out=c)
    return c


class _NegBytes:
    nbytes, shape, dtype = -8, (1,), np.dtype(np.float32)


OK = {"flops": N, "reads": 8 * N, "writes": 4 * N}
REF = {"reference": np.full(N, 0.75), "output": "c"}

# id, the keywords changed from a well-formed call, words of the one line
MALFORMED: list[tuple[str, dict[str, Any], str]] = [
    ("flops-zero-bytes-zero", {"flops": 0, "reads": 0, "writes": 0}, "flops=0 and no bytes"),
    ("flops-negative", {"flops": -5}, "flops must be >= 0"),
    ("flops-fraction", {"flops": 1.5}, "flops must be"),
    ("flops-nan", {"flops": math.nan}, "flops must be"),
    ("flops-inf", {"flops": math.inf}, "flops must be"),
    ("flops-1e300", {"flops": 1e300}, "more than 2^63-1"),
    ("flops-10^400", {"flops": 10**400}, "more than 2^63-1"),
    ("flops-bool", {"flops": True}, "flops must be"),
    ("flops-str", {"flops": "1000"}, "flops must be"),
    ("flops-none", {"flops": None}, "flops must be"),
    ("flops-numpy-bool", {"flops": np.True_}, "flops must be"),
    ("reads-negative", {"reads": -1}, "reads must be >= 0"),
    ("reads-numpy-negative-float", {"reads": np.float64(-1)}, "reads must be >= 0"),
    ("reads-numpy-nan", {"reads": np.float64("nan")}, "reads must be"),
    ("reads-inf", {"reads": math.inf}, "reads must be"),
    ("reads-10^400", {"reads": 10**400}, "more than 2^63-1"),
    ("reads-str", {"reads": "8"}, "reads must be a byte count or arrays"),
    ("reads-dict", {"reads": {"a": 1}}, "reads must be a byte count or arrays"),
    ("reads-bool", {"reads": True}, "reads must be a byte count"),
    ("reads-list-with-negative", {"reads": [8, -16]}, "reads must be >= 0"),
    ("reads-negative-nbytes", {"reads": _NegBytes()}, "reads (an array's nbytes)"),
    ("writes-none", {"writes": None}, "writes must be a byte count"),
    ("sum-past-int64", {"reads": 2**62, "writes": 2**62}, "more than 2^63-1"),
    ("no-bytes", {"reads": 0, "writes": 0}, "no bytes given"),
    ("bytes-a-list", {"bytes": [1, 2]}, "bytes= must be a dict"),
    ("bytes-unknown-level", {"bytes": {"l9": 8}}, "unknown memory level 'l9'"),
    ("bytes-level-not-a-string", {"bytes": {3: 8}}, "unknown memory level 3"),
    ("bytes-given-twice", {"bytes": {"dram": 8}}, "given twice"),
    ("bytes-negative", {"reads": 0, "writes": 0, "bytes": {"l2": -1}}, "must be >= 0"),
    ("dtype-unknown", {"dtype": "fp128"}, "unknown dtype 'fp128'"),
    ("dtype-a-list", {"dtype": ["fp32"]}, "unknown dtype list"),
    ("dtype-a-numpy-dtype", {"dtype": np.float32}, "unknown dtype"),
    ("precision-unknown", {"precision": "fp99"}, "unknown precision 'fp99'"),
    ("precision-int", {"precision": 5}, "unknown precision 5"),
    ("name-int", {"name": 5}, "name= must be a string"),
    ("name-empty", {"name": ""}, "name= must be"),
    ("name-three-parts", {"name": "a/b/c"}, "name= must be"),
    ("name-empty-variant", {"name": "a/"}, "name= must be"),
    ("name-newline", {"name": "a\nb"}, "name= must be"),
    ("size-negative", {"size": [-4]}, "size[0] must be a positive"),
    ("size-zero", {"size": [0, 4]}, "size[0] must be a positive"),
    ("size-str", {"size": "abc"}, "size= must be a list"),
    ("size-int", {"size": 5}, "size= must be a list"),
    ("size-fraction", {"size": [1.5]}, "size[0] must be"),
    ("size-2^60x2^60", {"size": [2**60, 2**60]}, "too large"),
    ("size-bool", {"size": [True]}, "size[0] must be"),
    ("size-empty", {"size": []}, "at least one dimension"),
    ("tolerance-nan", {"tolerance": math.nan, **REF}, "tolerance= must be"),
    ("tolerance-negative", {"tolerance": -1, **REF}, "tolerance= must be"),
    ("tolerance-str", {"tolerance": "x", **REF}, "tolerance= must be"),
    ("tolerance-bool", {"tolerance": True, **REF}, "tolerance= must be"),
    ("tolerance-inf", {"tolerance": math.inf, **REF}, "tolerance= must be"),
    ("output-a-number", {"reference": np.full(N, 0.75), "output": 5}, "output= must be"),
    ("output-a-list-with-a-str", {"reference": np.full(N, 0.75), "output": ["x"]},
     "output= must be"),
    ("reference-a-str", {"reference": "x", "output": "c"}, "reference= must be arrays"),
    ("reference-objects", {"reference": [object()], "output": "c"}, "reference= must be"),
    ("roofs-int", {"roofs": 5}, "roofs= must be a RoofSet"),
    ("roofs-missing-file", {"roofs": "/nonexistent/roofs.json"}, "no such roofs file"),
    ("roofs-empty-path", {"roofs": ""}, "roofs= is an empty path"),
    ("roofs-dev-zero", {"roofs": "/dev/zero"}, "not a regular file"),
    ("session-int", {"session": 5}, "session= must be a roofbench.Session"),
]


@pytest.mark.parametrize("kw,needle", [(kw, n) for _, kw, n in MALFORMED],
                         ids=[i for i, _, _ in MALFORMED])
def test_a_malformed_call_is_one_line_naming_it(arrays, kw, needle):
    a, b, c = arrays
    call = {**OK, "roofs": roofs(), **kw}
    if call.get("output") == "c":
        call["output"] = c
    with pytest.raises(MeasureError) as e:
        roofbench.measure(add, a, b, c, **call)
    assert needle in str(e.value) and "\n" not in str(e.value)
    assert isinstance(e.value, Refusal) and isinstance(e.value, ValueError)


def test_a_function_that_is_not_callable(arrays):
    with pytest.raises(MeasureError, match="must be callable"):
        roofbench.measure(42, *arrays, **OK, roofs=roofs())


def test_a_closure_with_its_counts_is_recorded_and_read_back(tmp_path):
    """The most common call: a closure over its arrays with the counts given. No array
    argument, so no dimensions: recorded with size [] and read back by the run's reader,
    never refused (a regression of 1a91fc4), and held against the DRAM bytes it declares,
    not placed in L1 as if its data were 0 B."""
    a = np.full(N, 0.5, np.float32)
    b, c = a.copy(), np.empty_like(a)
    with roofbench.Session(out=tmp_path / "run", roofs=roofs(),
                           timer=TimerConfig.quick()) as s:
        rec = roofbench.measure(lambda: np.add(a, b, out=c), flops=N, reads=2 * a.nbytes,
                                writes=a.nbytes, dtype="fp32", name="my_add")
    assert rec.outcome.status == "ok" and rec.identity.size == []
    assert rec.roofline.placement is None or rec.roofline.placement.level == "dram"
    back = load_run(s.out)
    assert [c.key for c in back.cases] == ["my_add/default/fp32/"]
    assert back.cases[0].measurement.median_s == rec.measurement.median_s
    rec = roofbench.measure(lambda: None, flops=8, reads=64, dtype="fp32", roofs=roofs(),
                            size=[8])
    assert rec.outcome.status == "ok" and rec.identity.size == [8]


@pytest.mark.parametrize("kw,needle", [
    ({"out": 5}, "out= must be a folder path"), ({"out": ""}, "out= must be"),
    ({"out": "/dev/null/x"}, "under a file"), ({"roofs": 3.5}, "roofs= must be"),
    ({"timer": "quick"}, "timer= must be a TimerConfig"), ({"quick": "yes"}, "quick="),
    ({"out": "a\0b"}, "out="),
], ids=["out-int", "out-empty", "out-under-a-file", "roofs-float", "timer-str", "quick-str",
        "out-nul"])
def test_a_malformed_session_is_one_line(kw, needle):
    with pytest.raises(MeasureError, match=None) as e:
        roofbench.Session(**kw)
    assert needle in str(e.value) and "\n" not in str(e.value)


SESSION_ATTEMPTS = 7 + 2  # the parametrized list above, no function, no size


# -- no output replaces a run ---------------------------------------------------------------

def _digest(folder: Path) -> dict[str, str]:
    return {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in folder.iterdir()
            if p.is_file()}


def _session_case(out: Any, arrays, name: str = "add") -> roofbench.Session:
    a, b, c = arrays
    with roofbench.Session(out=out, roofs=roofs(), timer=TimerConfig.quick()) as s:
        roofbench.measure(add, a, b, c, **OK, name=name)
    return s


def test_a_session_on_a_folder_holding_a_run_writes_a_sibling(arrays, tmp_path, capsys):
    first = _session_case(tmp_path / "out", arrays)
    assert first.out == tmp_path / "out"
    before = _digest(tmp_path / "out")
    second = _session_case(tmp_path / "out", arrays)
    assert second.out == tmp_path / "out-2"
    assert "holds a run already" in capsys.readouterr().err
    assert _digest(tmp_path / "out") == before  # the first run untouched
    assert [c.key for c in load_run(second.out).cases] == [c.key for c in first.cases]


def test_a_users_own_results_json_is_never_overwritten(arrays, tmp_path):
    (tmp_path / "mine").mkdir()
    (tmp_path / "mine" / "results.json").write_text("my own notes\n")
    s = _session_case(tmp_path / "mine", arrays)
    assert (tmp_path / "mine" / "results.json").read_text() == "my own notes\n"
    assert s.out == tmp_path / "mine-2" and (s.out / "results.json").is_file()


def test_a_relative_out_is_resolved_when_the_session_starts(arrays, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    a, b, c = arrays
    with roofbench.Session(out="rel", roofs=roofs(), timer=TimerConfig.quick()) as s:
        (tmp_path / "elsewhere").mkdir()
        os.chdir(tmp_path / "elsewhere")
        roofbench.measure(add, a, b, c, **OK)
    assert s.out == tmp_path / "rel" and (tmp_path / "rel" / "results.json").is_file()
    assert not (tmp_path / "elsewhere" / "rel").exists()


def test_a_stop_while_the_plot_is_drawn_still_writes_the_report(arrays, tmp_path, monkeypatch):
    import roofbench.bench.present.plot as plot

    def stop(*a: Any, **k: Any) -> list[Path]:
        raise KeyboardInterrupt
    monkeypatch.setattr(plot, "plot_run", stop)
    with pytest.raises(KeyboardInterrupt):
        _session_case(tmp_path / "o", arrays)
    run = load_run(tmp_path / "o")
    assert run.interrupted and (tmp_path / "o" / "report.md").is_file()


# -- torch tensors through measure() --------------------------------------------------------

@pytest.fixture
def torch() -> Any:
    return pytest.importorskip("torch")  # the dev extra pins torch==2.13.0 (the CPU build)


@pytest.mark.parametrize("dt,name", [("float32", "fp32"), ("bfloat16", "bf16"),
                                     ("float16", "fp16")])
def test_torch_cpu_tensors_are_validated_through_a_float64_upcast(dt, name, torch):
    g = torch.Generator().manual_seed(1)
    a, b = (torch.rand(N, generator=g).to(getattr(torch, dt)) for _ in range(2))
    rec = roofbench.measure(torch.add, a, b, flops=N, reads=[a, b], writes=a.nbytes,
                            roofs=roofs(), reference=lambda a, b: a.double() + b.double())
    assert rec.outcome.status == "ok" and rec.identity.dtype == name and rec.outcome.checked
    assert (
        rec.outcome.rel_error <= rec.declaration.tolerance
        and rec.evidence.extra["array_module"] == "numpy"
    )


def test_an_output_that_requires_grad_is_detached(torch):
    w = torch.rand(N, requires_grad=True)
    rec = roofbench.measure(lambda x: x * 2, w, flops=N, reads=w, writes=w.nbytes,
                            roofs=roofs(), reference=lambda x: x.detach().double() * 2)
    assert rec.outcome.status == "ok" and rec.outcome.rel_error == 0.0


def test_in_place_with_output_is_poisoned_and_checked(torch):
    a, c = torch.rand(N), torch.empty(N)
    rec = roofbench.measure(torch.mul, a, 3.0, out=c, flops=N, reads=a, writes=c,
                            roofs=roofs(), output=c,
                            reference=lambda a, s, out: a.double() * s)
    assert rec.outcome.status == "ok" and rec.outcome.rel_error < 1e-6
    half = roofbench.measure(lambda a, c: c[: N // 2].copy_(a[: N // 2]), a, c, flops=N,
                             reads=a, writes=c, roofs=roofs(), output=c,
                             reference=lambda a, c: a.double())
    assert (
        half.outcome.status == "invalid" and f"{N // 2} element(s)" in half.outcome.error
    )  # NaN stayed


def test_a_leaf_that_requires_grad_is_poisoned_through_a_detached_view(torch):
    w = torch.zeros(N, requires_grad=True)
    rec = roofbench.measure(lambda w: None, w, flops=N, reads=w, writes=w, roofs=roofs(),
                            output=w, reference=np.zeros(N))
    assert rec.outcome.status == "invalid" and "not written" in rec.outcome.error


def test_keyword_arguments_pass_through_to_the_function():
    x = np.ones((64, 32), np.float32)
    rec = roofbench.measure(np.sum, x, axis=0, flops=x.size, reads=x, writes=128,
                            roofs=roofs(), reference=lambda x, axis: x.sum(axis=axis))
    assert rec.outcome.status == "ok" and rec.outcome.rel_error == 0.0


def test_keyword_arguments_pass_through_to_a_torch_function(torch):
    t = torch.ones(64, 32)
    rec = roofbench.measure(torch.sum, t, dim=1, flops=t.numel(), reads=t, writes=256,
                            roofs=roofs(), reference=np.full(64, 32.0))
    assert rec.outcome.status == "ok"


@pytest.mark.parametrize("var,module", [("TRITON_INTERPRET", "triton"),
                                        ("NUMBA_ENABLE_CUDASIM", "numba.cuda")])
def test_an_interpreter_or_simulator_is_refused_for_timing(var, module, monkeypatch, arrays):
    monkeypatch.setenv(var, "1")
    monkeypatch.setitem(sys.modules, module, sys.modules.get(module) or types.ModuleType(module))
    with pytest.raises(MeasureError, match=var):
        roofbench.measure(add, *arrays, **OK, roofs=roofs())


# -- roofs files ----------------------------------------------------------------------------

def _roof(**kw: Any) -> dict[str, Any]:
    return {"name": "dram", "kind": "memory", "level": "dram", "value": 2e10,
            "source": "measured", **kw}


FP32 = {"name": "fp32", "kind": "compute", "precision": "fp32", "value": 2e11,
        "source": "measured"}

# id, the file's content (a roof set's roofs list, or raw text), words of the one line
ROOFS_FILES: list[tuple[str, Any, str]] = [
    ("value-bool", [_roof(value=True)], "value must be a number, got bool"),
    ("value-str", [_roof(value="2e10")], "value must be a number, got str"),
    ("value-negative", [_roof(value=-1.0)], "positive finite"),
    ("value-zero", [_roof(value=0)], "positive finite"),
    ("value-huge", [_roof(value=1e400)], "positive finite"),  # json reads Infinity-ish 1e400
    ("value-missing", [{"name": "dram", "kind": "memory", "level": "dram",
                        "source": "measured"}], "value must be a number"),
    ("misspelled-field", [_roof(levle="dram")], "unknown field 'levle'"),
    ("kind-unknown", [_roof(kind="memroy")], "kind 'memroy' is not one of"),
    ("kind-bool", [_roof(kind=True)], "kind True"),
    ("level-unknown", [_roof(level="l9")], "memory level 'l9'"),
    ("level-missing", [_roof(level=None)], "memory level None"),
    ("precision-unknown", [dict(FP32, precision="fp99")], "precision 'fp99'"),
    ("precision-on-memory", [_roof(precision="fp32")], "has no precision"),
    ("level-on-compute", [dict(FP32, level="dram")], "has no level"),
    ("source-unknown", [_roof(source="guessed")], "source 'guessed'"),
    ("name-empty", [_roof(name="")], "name must be a non-empty string"),
    ("name-int", [_roof(name=3)], "name must be"),
    ("names-twice", [_roof(), _roof(value=3e10)], "two roofs are named 'dram'"),
    ("roof-a-list", [[1, 2]], "not an object"),
    ("evidence-a-list", [_roof(evidence=[1])], "evidence must be an object"),
    ("interconnect-no-level", [{"name": "nv", "kind": "interconnect", "value": 1e11,
                                "source": "measured"}], "needs a level"),
    ("not-json", "{roofs", "corrupt roofs file"),
    ("nested-deeply", "[" * 100_000 + "]" * 100_000, "roofs"),
    ("binary", b"\xff\xfe\x00", "corrupt roofs file"),
]


def _write(path: Path, content: Any) -> Path:
    if isinstance(content, bytes):
        path.write_bytes(content)
    elif isinstance(content, str):
        path.write_text(content)
    else:
        path.write_text(json.dumps({"device": cpu_model(), "roofs": content}))
    return path


@pytest.mark.parametrize("content,needle", [(c, n) for _, c, n in ROOFS_FILES],
                         ids=[i for i, _, _ in ROOFS_FILES])
def test_a_bad_roofs_file_is_one_line_naming_the_file(content, needle, tmp_path, arrays):
    path = _write(tmp_path / "roofs.json", content)
    with pytest.raises(RoofsFileError) as e:
        load_roofs(path)
    line = str(e.value)
    assert str(path) in line and needle in line and "\n" not in line
    with pytest.raises(MeasureError, match="roofs="):  # the same through the API
        roofbench.measure(add, *arrays, **OK, roofs=path)


@pytest.mark.parametrize("kind", ["dev-zero", "fifo", "folder", "over-the-bound"])
def test_a_roofs_file_that_never_ends_is_refused_before_it_is_read(kind, tmp_path):
    path = {"dev-zero": Path("/dev/zero"), "folder": tmp_path}.get(kind, tmp_path / "f")
    if kind == "fifo":
        os.mkfifo(path)  # no writer: opening it must not hang
    if kind == "over-the-bound":
        path.write_bytes(b" " * 64)
        with pytest.raises(RoofsFileError, match="no roofs file"):
            read_bounded(path, limit=16)
        return
    with pytest.raises(RoofsFileError, match="a roofs file is a regular file"):
        load_roofs(path)


def test_a_results_file_whose_figures_contradict_its_roofs_is_named(arrays, tmp_path):
    _session_case(tmp_path / "o", arrays)
    d = json.loads((tmp_path / "o" / "results.json").read_text())
    d["roofs"]["roofs"][0]["value"] *= 10  # the dram roof edited after the run
    (tmp_path / "o" / "results.json").write_text(json.dumps(d))
    run = load_run(tmp_path / "o")
    (note,) = [n for n in run.notes if "contradict" in n]
    assert "add/default/fp32" in note and "'dram' gives" in note
    from roofbench.bench.cli import main

    assert main(["report", str(tmp_path / "o"), "--out", str(tmp_path / "r.md")]) == 0
    assert "contradict this file's roofs" in (tmp_path / "r.md").read_text()


@pytest.mark.parametrize("given,named", [("array", "output="), ("tuple", "output[0]"),
                                         ("dict", "output['c']")])
def test_a_read_only_output_is_one_line_naming_it(arrays, given, named):
    """Issue 57 #18: roofbench poisons output= with NaN before the checked call; a read-only
    array there was numpy's own ValueError from that fill, not the argument named."""
    a, b, c = arrays
    c.flags.writeable = False
    out = {"array": c, "tuple": (c,), "dict": {"c": c}}[given]
    with pytest.raises(MeasureError, match="read-only array") as e:
        roofbench.measure(np.add, a, b, c, **OK, reference=np.full(N, 0.75), output=out,
                          roofs=roofs())
    assert str(e.value).startswith(named) and "\n" not in str(e.value)


# the tables, the files that never end, the sessions, torch (3 dtypes), grad, in-place,
# keywords, simulators, the contradicting results file, a read-only output (3 forms)
ATTEMPTS = (len(MALFORMED) + SESSION_ATTEMPTS + len(ROOFS_FILES) + 4 + 4 + 3 + 2 + 2 + 2 + 2
            + 1 + 3)


def test_count(capsys):
    """The attempts of this file (printed with -s)."""
    with capsys.disabled():
        print(f"\nhostile API and roofs-file attempts: {ATTEMPTS}")
    assert ATTEMPTS > 100
