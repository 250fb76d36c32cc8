"""The run session: sizes as typed, the selection of cases and its one-line refusals, the
default sizes' rule, the timer settings of a GPU run."""

from __future__ import annotations

import pytest
from roofbench.bench.backends.cpu import CpuBackend
from roofbench.bench.errors import UserError
from roofbench.bench.suite.session import parse_size, select_cases
from roofbench.kernels.registry import workloads

from roofbench.timing import TimerConfig


def test_gpu_sampling_is_bounded_per_case_and_per_launch():
    from roofbench.bench.suite.session import RunOptions, timer_configs

    from roofbench.timing import GPU_CASE_BUDGET_S, GPU_LAUNCH_BUDGET_S

    case, launch = timer_configs(RunOptions(), "gpu")
    assert case.budget_s == GPU_CASE_BUDGET_S and launch.budget_s == GPU_LAUNCH_BUDGET_S
    case, launch = timer_configs(RunOptions(), "cpu")
    assert case.budget_s == launch.budget_s == TimerConfig().budget_s


@pytest.mark.parametrize("text,size", [("1048576", (1048576,)), ("16M", (16 << 20,)),
                                       ("2^10", (1024,)), ("4096x1024", (4096, 1024)),
                                       ("7x5x3", (7, 5, 3))])
def test_parse_size(text, size):
    assert parse_size(text) == size


@pytest.mark.parametrize("text", ["0", "-5", "abc", "4096x", "1.5"])
def test_parse_size_rejects_bad_input(text):
    with pytest.raises(UserError):
        parse_size(text)


def test_select_rejects_unknown_names_and_wrong_dimensions():
    be = CpuBackend()
    with pytest.raises(UserError, match="choose from"):
        select_cases(be, workloads=["nope"])
    with pytest.raises(UserError, match="choose from"):
        select_cases(be, workloads=["l2norm"], variant="nope")
    with pytest.raises(UserError, match="choose from"):
        select_cases(be, dtypes=["fp7"])
    with pytest.raises(UserError, match="dimension"):
        select_cases(be, workloads=["gemm"], size=(100,))


def test_too_large_size_is_refused_before_allocating():
    with pytest.raises(UserError, match="more than"):
        select_cases(CpuBackend(), workloads=["vector_add"], size=(1 << 40,))


def test_default_sizes_are_at_least_four_times_the_last_level_cache():
    # The rule in whole bytes (kernels.spec.SizeContext.count): each main array >= 4x LLC and
    # 64 MiB, unless one more element would push the largest variant (naive: 6 arrays for
    # l2norm, 3 for vector_add) past the budget. tests/roofs/test_simulated_machines.py checks the
    # same on machines unlike this one.
    be = CpuBackend()
    budget = be.memory_budget()
    be.memory_budget = lambda: budget  # free memory moves while other work runs: pin it
    cases, skipped = select_cases(be, workloads=["vector_add", "l2norm"])
    assert not [s for s in skipped if "budget" in (s.outcome.error or "")]
    for c in cases:
        main, item = c.buffers()["a"].nbytes, c.buffers()["a"].nbytes // c.size[0]
        arrays = 6 if c.workload.name == "l2norm" else 3
        assert main >= max(4 * be.last_level_cache(), 64 << 20) or \
            (main + item) * arrays > budget, c.key
        assert c.footprint() <= budget


def test_cpu_backend_runs_only_fp32_and_fp64():
    cases, skipped = select_cases(CpuBackend(), workloads=["vector_add"], quick=True)
    assert {c.dtype for c in cases} <= {"fp32", "fp64"}


def test_a_workload_sweep_gives_one_case_per_size_and_size_overrides_it():
    # Workload.sweep: the default run measures every size of the sweep (attention over N);
    # --size measures that one size; a workload without a sweep keeps its one default.
    be = CpuBackend()
    w = workloads()["attention"]
    cases, _ = select_cases(be, workloads=["attention"], variant="flash", dtypes=["fp32"])
    from roofbench.kernels.attention import CPU_SWEEP
    assert [c.size[2] for c in cases] == list(CPU_SWEEP)
    assert [c.size for c in cases] == w.default_sizes(_ctx(be, "fp32"))
    one, _ = select_cases(be, workloads=["attention"], variant="flash", dtypes=["fp32"],
                          size=(1, 2, 300, 64))
    assert [c.size for c in one] == [(1, 2, 300, 64)]
    quick, _ = select_cases(be, workloads=["attention"], variant="flash", dtypes=["fp32"],
                            quick=True)
    assert [c.size for c in quick] == [w.quick_size]
    plain = workloads()["vector_add"]
    assert plain.sweep is None
    assert plain.default_sizes(_ctx(be, "fp32")) == [plain.default_size(_ctx(be, "fp32"))]


def _ctx(be, dtype):
    from roofbench.kernels.spec import SizeContext

    return SizeContext(kind=be.kind, llc_bytes=be.last_level_cache(),
                       budget_bytes=be.memory_budget(), dtype=dtype)


def test_a_run_whose_code_changed_while_it_ran_says_so(tmp_path, monkeypatch):
    # The commit is read when the run starts and again when its cases end: an edit or a commit
    # in between (here: the tree became dirty) is a note in the record, read back from disk.
    from roofbench.bench.results import load_run
    from roofbench.bench.suite import session

    commits = iter(["abc123", "abc123+dirty"])
    monkeypatch.setattr(session, "git_commit", lambda *a: next(commits))
    opts = session.RunOptions(workloads=("vector_add",), dtypes=("fp64",), size="4096",
                              quick=True, seed=1)
    s = session.RunSession(opts, CpuBackend(), tmp_path)
    s.set_roofs(None)

    class Quiet:
        def start(self, key):
            pass

        def say(self, line):
            pass

    s.run_cases(Quiet())
    run = load_run(s.out)
    assert run.git_commit == "abc123"
    assert [n for n in run.notes if "changed during the run" in n] == [
        "the code changed during the run: abc123 when it started, abc123+dirty when its "
        "cases ended"]
    # unchanged: nothing said
    commits = iter(["abc123", "abc123"])
    s = session.RunSession(opts, CpuBackend(), tmp_path / "same")
    s.set_roofs(None)
    s.run_cases(Quiet())
    assert not [n for n in load_run(s.out).notes if "changed during" in n]


def test_samples_fixes_the_count_of_every_case_and_launch_and_compare_cannot_judge_it(
        tmp_path, capsys):
    """`--samples N`: exactly N timed samples a case and a launch, on a real CPU run; fewer
    than the gate's minimum, and compare says `uncertain` (no interval), never `same`."""
    import json

    from flat_cases import flat_cases
    from roof_sets import write_roofs
    from roofbench.bench.cli import main
    from roofbench.bench.suite.session import RunOptions, timer_configs

    for kind in ("cpu", "gpu"):
        case, launch = timer_configs(RunOptions(quick=True, samples=3), kind)
        assert case.min_samples == case.max_samples == launch.max_samples == 3
    roofs = write_roofs(tmp_path / "roofs.json")
    assert main(["run", "--backend", "cpu", "--quick", "--samples", "3", "--workload",
                 "l2norm", "--dtype", "fp32", "--size", "4099", "--roofs", str(roofs),
                 "--out", str(tmp_path / "r")]) == 0
    (res,) = (tmp_path / "r").glob("*/*/results.json")
    cases = flat_cases(json.loads(res.read_text()))
    assert {c["variant"] for c in cases} == {"naive", "fused"}
    for c in cases:
        assert c["timing"]["n"] == 3 and len(c["timing"]["samples_s"]) == 3, c["timing"]
        assert all(la["timing"]["n"] == 3 for la in c["launches"] if la["timing"])
    capsys.readouterr()
    assert main(["compare", str(res.parent), str(res.parent), "--out",
                 str(tmp_path / "c")]) == 0
    verdicts = [c["verdict"] for c in json.loads((tmp_path / "c.json").read_text())["cases"]]
    assert verdicts and set(verdicts) == {"uncertain"}, verdicts
