"""A profile's own report (bench/profile/report.py, fusion.py, compiled.py): a fusion
prediction bounded by what the bytes and launches explain (the rest said with its cause),
fusion groups' replays under the ops' validity rule, the compiled program timed once its
calls settle and a line when it is more than 2x off its prediction, a low-precision op held
against the nearest measured roof by name, bound labels naming the level, the noisy flag and
the under-load mark shown; `roofbench model` writes report.html; `roofbench report` and
`roofbench plot` on a profile's folder rebuild that report (no whole-run Amdahl of the
program beside its ops)."""

from __future__ import annotations

import copy

import pytest

torch = pytest.importorskip("torch")

from roof_sets import model_files  # noqa: E402
from roofbench.bench.present.amdahl import run_shares  # noqa: E402
from roofbench.bench.profile.compiled import Compiled, GroupTiming, Warmup, _flagged, warm_up  # noqa: E402
from roofbench.bench.profile.fusion import Group  # noqa: E402
from roofbench.bench.profile.report import (  # noqa: E402
    bound_text,
    compiled_lines,
    flags_text,
    group_rows,
    op_rows,
    precision_notes,
    predicted_compiled_s,
)

from roofbench.cache_records import Placement  # noqa: E402

from .test_torch_program import ROOFS, run  # noqa: E402


def bn_relu(eager_s: float, launch_calls: int = 2) -> Group:
    """BatchNorm + ReLU as the issue saw it: 2.5x fewer bytes fused, its eager ops far
    below their roof (1 ms for 3 kB at 20 GB/s: 150 ns at the roof)."""
    return Group((0, 1)[:launch_calls], [0, 1][:launch_calls], ["batch_norm", "relu"], 1000,
                 3000, 1200, eager_s, "fp32")


def test_the_prediction_is_bounded_by_the_bytes_ratio_where_the_bytes_set_the_time():
    g = bn_relu(1e-3)
    at_roof = g.predicted_speedup(ROOFS, 1e-7)
    assert at_roof > 100  # the unbounded figure the issue saw (105x-680x)
    bounded = g.bounded_speedup(ROOFS, 1e-7)
    assert bounded == pytest.approx(g.explained_speedup(1e-7))
    assert 2.4 < bounded <= g.ratio * 1.001  # 2.5x: what the bytes explain


def test_launches_explain_more_than_the_bytes_only_when_they_dominate():
    g = bn_relu(2.2e-6)  # two launches of 1 us each and 0.2 us of work
    got = g.explained_speedup(1e-6)
    assert got == pytest.approx(2.2e-6 / (0.2e-6 * 0.4 + 1e-6))
    # a mediant of the bytes ratio and the launches made one: never beyond either
    assert 1 < got <= max(g.ratio, len(g.distinct))
    assert g.bounded_speedup(ROOFS, 1e-6) <= got


def test_a_group_row_states_what_the_roof_adds_beyond_the_bytes_and_why():
    prof = run(lambda a, b: torch.sqrt(a * a + b * b), torch.randn(4096), torch.randn(4096))
    prof.groups[0].eager_s = 1e-3  # its ops far below their roof
    row = group_rows(prof)[0]
    g = prof.groups[0]
    assert row["predicted bound"] == f"{g.bounded_speedup(prof.roofs, prof.extra['launch_s']):.3g}x"
    assert float(row["predicted bound"][:-1]) <= max(g.ratio, len(g.distinct)) * 1.001
    beyond = row["beyond the bytes"]
    assert beyond.startswith(f"{g.predicted_speedup(prof.roofs, prof.extra['launch_s']):.3g}x "
                             "at the roof: the eager ops ran at ")
    assert "a faster kernel, not fusion, would explain the rest" in beyond


def test_a_group_replay_above_its_roof_is_not_valid_and_not_drawn():
    from roofbench.bench.present.figure_data import valid_points

    prof = run(lambda a, b: torch.sqrt(a * a + b * b), torch.randn(4096), torch.randn(4096))
    eager, comp = copy.deepcopy(prof.program), copy.deepcopy(prof.program)
    eager.identity.workload = comp.identity.workload = "group0"
    comp.roofline.efficiency = 3.08  # the 308%
    comp.roofline.limiting_roof = "dram stream"
    eager, comp = _flagged(prof, eager, comp)
    assert eager.outcome.status == "ok" and comp.outcome.status == "invalid"
    assert "308% of dram stream, above its roof" in comp.outcome.error
    assert valid_points([eager, comp], roofs=ROOFS) == valid_points([eager], roofs=ROOFS)
    prof.compiled = Compiled(copy.deepcopy(prof.program), eager_bytes=1, fused_bytes=1)
    prof.compiled.groups = [GroupTiming(0, eager, comp, ["k"])]
    assert "compiled: not valid: 308% of dram stream" in group_rows(prof)[0]["replay flags"]


def fake_calls(seconds: list[float], compiles: set[int]):
    """A compiled program's calls: each takes its ``seconds`` on a fake clock, and the calls
    numbered in ``compiles`` compile a graph again (a recompile)."""
    state = {"t": 0.0, "n": 0, "graphs": 1}

    def call() -> None:
        if state["n"] in compiles:
            state["graphs"] += 1
        state["t"] += seconds[state["n"]]
        state["n"] += 1

    return call, (lambda: state["t"]), (lambda: state["graphs"])


def test_warm_up_waits_out_recompiles_and_says_when_calls_never_settle():
    call, now, graphs = fake_calls([5, 4, 0.1, 0.05, 0.05], compiles={0, 1})
    w = warm_up(call, now=now, graphs=graphs)
    assert w == Warmup((5, 4, pytest.approx(0.1)), 2, True)  # a faster call: settled
    # a recompile on a fast call is waited out too: not settled until a call compiles nothing
    call, now, graphs = fake_calls([1, 1, 1, 1], compiles={1})
    w = warm_up(call, now=now, graphs=graphs)
    assert w.recompiles == 1 and w.call_s == (1, 1, 1) and w.settled
    call, now, graphs = fake_calls([1, 2, 4, 8], compiles=set())
    w = warm_up(call, limit=4, now=now, graphs=graphs)
    assert not w.settled and w.call_s == (1, 2, 4, 8) and w.recompiles == 0


def test_a_compiled_program_2x_off_its_prediction_gets_a_line_with_its_causes():
    prof = run(lambda a, b: torch.sqrt(a * a + b * b), torch.randn(4096), torch.randn(4096))
    case = copy.deepcopy(prof.program)
    case.identity.variant = "compiled"
    case.measurement.median_s = prof.program_s / 0.0472  # the "speedup 0.0472x"
    prof.compiled = Compiled(case, kernels=["cpp_fused_0"], eager_bytes=3, fused_bytes=1,
                             warmup=Warmup((9.0, 0.9, 0.05), 1, False))
    lines = compiled_lines(prof)
    assert any(x.startswith("Timed after 3 warm-up call(s) (9 s, 900 ms, 50 ms), 1 "
                            "recompile(s): the calls had NOT settled") for x in lines)
    pred = predicted_compiled_s(prof)
    assert pred is not None and pred <= prof.program_s
    off = [x for x in lines if x.startswith("Predicted and measured disagree")]
    assert len(off) == 1
    assert f"{case.measurement.median_s / pred:.3g}x the" in off[0]
    assert "inductor's code ran 21.2x slower than the eager program's" in off[0]
    assert "1 recompile(s) in the warm-up, the calls unsettled" in off[0]
    case.measurement.median_s = pred * 1.5  # within 2x: no line
    assert not any(x.startswith("Predicted and measured") for x in compiled_lines(prof))
    # far faster than predicted: the compiled kernels nearer their roof than the eager ops
    case.measurement.median_s = pred / 10
    prof.program.roofline.efficiency, case.roofline.efficiency = 0.002, 0.086
    (off,) = [x for x in compiled_lines(prof) if x.startswith("Predicted and measured")]
    assert ("the eager program ran at 0.2% of its roof, the compiled one at 8.6%: inductor's "
            "kernels run nearer the roof than the eager ops") in off


def test_the_compiled_prediction_keeps_the_programs_own_scale():
    """Groups timed in slower runs than the program (a busy machine) save a share of the
    ops' time, never more than the program's own time."""
    prof = run(lambda a, b: torch.sqrt(a * a + b * b), torch.randn(4096), torch.randn(4096))
    prof.compiled = Compiled(copy.deepcopy(prof.program), eager_bytes=3, fused_bytes=1)
    prof.extra["ops_run_s"] = [4e-3]  # the ops' sum in their runs: 4 ms
    prof.program.measurement.median_s = 1e-3  # the program alone: 1 ms
    (g,) = prof.groups
    g.eager_s = 4e-3  # the whole of the ops' time, 3x fewer bytes fused
    b = g.bounded_speedup(prof.roofs, prof.extra["launch_s"])
    assert predicted_compiled_s(prof) == pytest.approx(1e-3 / b)


def test_a_bf16_op_on_a_cpu_names_the_roof_it_is_held_against():
    from roofbench.bench.present.sections import above_roof_cause

    a = torch.randn(64, 64, dtype=torch.bfloat16)
    prof = run(torch.mm, a, a)
    mm = next(p for p in prof.ops if p.op.packet == "mm")
    assert mm.case.identity.dtype == "bf16" and mm.case.identity.precision == "fp32"
    (note,) = precision_notes(prof)
    assert note.startswith("1 bf16 op(s) (mm): no bf16 compute roof was measured on this "
                           "device; held against fp32 fma, the nearest measured roof")
    c = copy.deepcopy(mm.case)
    c.roofline.bound, c.roofline.limiting_roof = "compute", "fp32 fma"
    assert above_roof_cause(c, ROOFS).startswith("held against fp32 fma, the nearest measured "
                                                 "roof: no bf16 roof was measured here")
    fp32 = run(torch.mm, a.float(), a.float())
    assert precision_notes(fp32) == []


def test_a_bound_held_against_a_cache_level_names_it():
    prof = run(lambda t: t * 2, torch.randn(32))
    c = copy.deepcopy(prof.ops[0].case)
    c.roofline.bound = "compute"
    c.roofline.placement = Placement("l1", 256, 32768, 1)
    assert bound_text(c) == "compute, against L1 (data in L1)"
    c.roofline.placement = Placement("dram", 256, None, None)
    assert bound_text(c) == "compute"


def test_the_noisy_flag_and_its_cause_are_in_the_op_table():
    prof = run(lambda t: t * 2, torch.randn(32))
    t = prof.ops[0].case.measurement.timing
    t.flags = ["noisy: cv 31.0% > 5%", "noise cause: not the roof (dram stream steady)"]
    assert flags_text(prof.ops[0].case) == ("noisy: cv 31.0% > 5%; noise cause: not the roof "
                                            "(dram stream steady)")
    assert op_rows(prof)[0]["flags"] == flags_text(prof.ops[0].case)
    assert flags_text(prof.ops[0].case.__class__(
        prof.ops[0].case.identity, prof.ops[0].case.declaration,
        prof.ops[0].case.outcome)) == "-"


def test_the_profile_writes_report_html_and_report_rebuilds_its_own(tmp_path, capsys):
    from roofbench.bench.cli import main
    from roofbench.bench.results import load_run

    prof = run(lambda a, b: torch.cat([torch.relu(a * b), a], 0), torch.randn(64),
               torch.randn(64), name="catty")
    prof.extra["under_load"] = "load average 6.1 on 2 cores"
    # as the profile says it (this machine may be busy now: its own mark replaced)
    prof.notes = [n for n in prof.notes if not n.startswith("taken under load")]
    prof.notes.append("taken under load: load average 6.1 on 2 cores")
    prof.write(tmp_path)
    md = (tmp_path / "profile.md").read_text()
    html = (tmp_path / "report.html").read_text()
    assert "> **taken under load: load average 6.1 on 2 cores**" in md
    assert "> taken under load" not in md  # the mark once at the top, not again as a note
    assert "Fusion opportunities" in html and "<svg" in html and "catty" in html
    assert "<strong>taken under load: load average 6.1 on 2 cores</strong>" in html
    for f in ("profile.md", "report.html", "roofline.png", "roofline.svg"):
        (tmp_path / f).unlink()
    assert main(["report", str(tmp_path)]) == 0
    again = (tmp_path / "profile.md").read_text()
    assert again == md  # the profile's own report, rebuilt from the folder
    assert "Whole run" not in again and (tmp_path / "report.html").is_file()
    assert (tmp_path / "roofline.png").is_file()
    assert main(["plot", str(tmp_path), "--out", str(tmp_path / "p")]) == 0
    assert (tmp_path / "p.png").is_file()
    capsys.readouterr()
    # the suite's report of the same cases never ranks the program beside its ops
    shares = run_shares(load_run(tmp_path))
    assert shares and not any("program" in s.name for s in shares)


def test_a_broken_profile_json_is_one_line_and_a_nonzero_exit(tmp_path, capsys):
    from roofbench.bench.cli import main

    prof = run(lambda t: t * 2, torch.randn(32))
    prof.write(tmp_path)
    (tmp_path / "profile.json").write_text("{")
    code = main(["report", str(tmp_path)])
    err = capsys.readouterr().err
    assert code != 0 and err.count("\n") == 1 and "not a profile report" in err


def test_a_rank_that_does_not_hold_over_the_runs_is_said_in_the_table_and_the_key():
    from roofbench.bench.profile.report import annotate, order_text

    prof = run(lambda a, b: torch.sqrt(a * a + b * b), torch.randn(256), torch.randn(256))
    first, second = prof.ranking()[:2]
    first.case.evidence.extra["rank_tie_with"] = [2]  # its interval overlaps #2's
    second.case.evidence.extra["rank_tie_with"] = []
    assert order_text(first.case) == "tie with #2" and order_text(second.case) == "sure"
    rows = op_rows(prof)
    assert (rows[0]["order"], rows[1]["order"]) == ("tie with #2", "sure")
    del first.case.evidence.extra["rank_tie_with"]
    assert order_text(first.case) == "-"  # not judged: never called sure
    first.case.evidence.extra["rank_tie_with"] = [2]
    annotate(prof)
    assert first.case.evidence.extra["plot_label"].endswith("(tie with #2)")
    assert "tie" not in second.case.evidence.extra["plot_label"]


def test_the_same_run_ratio_is_given_with_its_spread():
    from roofbench.bench.profile.report import _sum_lines

    prof = run(lambda t: t * 2, torch.randn(32))
    prof.extra.update(ops_over_program=1.02, ops_over_program_spread=[0.97, 1.08],
                      ops_over_program_runs=[0.97, 1.02, 1.08])
    (line,) = [x for x in _sum_lines(prof) if x.startswith("the ops over the program in")]
    assert line.endswith("median 1.020, [0.970, 1.080] over 3 runs")


def test_roofbench_model_writes_report_html_as_a_run_does(tmp_path, capsys):
    from roofbench.bench.cli import main

    script, roofs = model_files(tmp_path, "(lambda a: torch.relu(a * 2)), (torch.randn(256),)",
                                ROOFS.to_dict())
    out = tmp_path / "o"
    assert main(["model", str(script), "--roofs", str(roofs), "--out", str(out)]) == 0
    said = capsys.readouterr().out
    assert f"wrote {out / 'report.html'}" in said
    page = (out / "report.html").read_text()
    assert "roofbench profile: prog.program" in page and "Ops (Amdahl ranking)" in page


def test_roofbench_model_prints_the_same_run_ratio_with_its_spread(tmp_path, capsys):
    """The command's summary gives the ratio profile.md gives (each run's ops over that
    run's program), its spread and the profiler overhead taken out; not the eager pairing
    a busy machine breaks."""
    import re

    from roofbench.bench.cli import main

    script, roofs = model_files(tmp_path, "(lambda a: torch.relu(a * 2)), (torch.randn(256),)",
                                ROOFS.to_dict())
    out = tmp_path / "o"
    assert main(["model", str(script), "--roofs", str(roofs), "--out", str(out)]) == 0
    said = capsys.readouterr().out
    assert "over the eager program" not in said
    got = re.search(r"ops over the program, same run: median (\S+) \[(\S+), (\S+)\] over "
                    r"(\d+) runs; profiler overhead taken out: \S+ s per run", said)
    assert got is not None, said
    median, lo, hi, n = got.groups()
    md = (out / "profile.md").read_text()
    assert f"median {median}, [{lo}, {hi.rstrip(']')}] over {n} runs" in md
    assert "profiler overhead (the timing mode's entry into Python" in md


def test_an_ops_record_is_one_rule_for_profile_and_trace():
    """common.op_case: profile's op record (op<index>, replayed) and trace's (its own variant,
    timed in the trace) differ only in the variant and how the op was timed."""
    from roofbench.bench.profile.common import op_case
    from roofbench.bench.profile.recording import Distinct
    from roofbench.bench.profile.torch_program import op_case as profile_op_case

    op = Distinct(index=3, name="aten.mm.default", packet="mm", family="matmul", flops=64,
                  flops_by="torch flop registry", reads=24, writes=8, signature="s", calls=2,
                  dtype="bfloat16", device="cpu", outputs="o")
    mine = profile_op_case(op, False, "cpu")
    theirs = op_case(op, False, "cpu", "op-x", "roofbench.trace", {"timed": "in the trace"})
    assert (mine.identity.variant, theirs.identity.variant) == ("op3", "op-x")
    assert mine.identity.dtype == "bf16" and mine.identity.size == [2]
    assert mine.declaration == theirs.declaration
    assert mine.declaration.bytes == {"dram": 32} and mine.declaration.ai == {"dram": 2.0}
    a, b = mine.evidence.extra, theirs.evidence.extra
    assert a.pop("replayed").startswith("alone") and b.pop("timed") == "in the trace"
    assert (a.pop("measured_by"), b.pop("measured_by")) == ("roofbench.profile", "roofbench.trace")
    assert a == b == {"family": "matmul", "calls": 2, "signature": "s", "outputs": "o",
                      "device": "cpu", "read_bytes": 24, "written_bytes": 8}
    none = op_case(Distinct(0, "aten.view.default", "view", "view", 0, "", 0, 0, "s"), False,
                   "cpu", "op0", "roofbench.profile", {})
    assert none.declaration.bytes == {} and none.declaration.ai == {}
