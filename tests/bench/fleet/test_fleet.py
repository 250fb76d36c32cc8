"""Fleet logic that needs no mpirun: the no-MPI message, GPU pinning by local rank, version
check, outlier rule, report writing. The MPI runs themselves are in test_fleet_mpi.py."""

from __future__ import annotations

import json
import sys

import pytest
from roofbench.bench.cli import main
from roofbench.bench.errors import UserError
from roofbench.bench.fleet import environment, fleet_records, output, plan
from roofbench.bench.fleet import outliers as compare
from roofbench.bench.fleet import rank as calibrate

from roofbench.readers import read_roofset
from roofbench.roof_records import Roof, RoofSet


def test_no_mpi_is_one_clear_message(monkeypatch, capsys):
    monkeypatch.setitem(sys.modules, "mpi4py", None)  # import mpi4py -> ImportError
    monkeypatch.delitem(sys.modules, "mpi4py.MPI", raising=False)
    assert main(["fleet", "calibrate", "--backend", "cpu", "--quick"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("roofbench: error: MPI is not available: mpi4py is not installed")
    assert "mpirun" in err and "Traceback" not in err and len(err.strip().splitlines()) == 1


@pytest.mark.parametrize("cvd, local, want, why", [
    ("0,1,2,3", 2, "2", None),
    ("5", 3, "5", None),  # the scheduler gave this task its own GPU
    ("0,1", 2, None, "has 2 visible GPU(s)"),
    ("", 0, None, "cannot see a GPU"),
    ("-1", 0, None, "cannot see a GPU"),
])
def test_gpu_by_local_rank(monkeypatch, cvd, local, want, why):
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", cvd)
    dev, err = environment.assign_gpu(local, "node7", 9)
    assert dev == want
    if why:
        assert why in err and "rank 9 (host node7" in err
    else:
        assert err is None and environment.os.environ["CUDA_VISIBLE_DEVICES"] == want


def test_rank_without_gpu_is_recorded_not_fatal(monkeypatch):
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")
    place = fleet_records.Place(rank=3, size=4, host="n1", pid=1, version="x", python="3",
                        launcher="t", local_rank=0)
    res = calibrate.measure_rank(place, fleet_records.FleetConfig(backend="cuda", quick=True))
    assert res.status == "error" and "rank 3 (host n1, local rank 0) cannot see a GPU" in res.error


def test_local_rank_from_launcher_env(monkeypatch):
    for v in environment.LOCAL_RANK_VARS:
        monkeypatch.delenv(v, raising=False)
    assert environment.env_local_rank() == (None, "")
    monkeypatch.setenv("SLURM_LOCALID", "3")
    assert environment.env_local_rank() == (3, "SLURM_LOCALID")
    monkeypatch.setenv("OMPI_COMM_WORLD_LOCAL_RANK", "1")
    assert environment.env_local_rank() == (1, "OMPI_COMM_WORLD_LOCAL_RANK")


def _place(r: int, host: str, version: str = "1.0") -> fleet_records.Place:
    return fleet_records.Place(rank=r, size=4, host=host, pid=r, version=version, python="3",
                       launcher="t")


def test_version_mismatch_message_names_ranks_and_hosts():
    places = {0: _place(0, "a"), 1: _place(1, "a"), 2: _place(2, "b", "0.9")}
    msg = plan.version_problem(places)
    assert "versions differ" in msg and "1.0 on rank(s) 0, 1 (host(s) a)" in msg
    assert "0.9 on rank(s) 2 (host(s) b)" in msg
    assert plan.version_problem({0: _place(0, "a"), 1: _place(1, "b")}) is None


def test_local_ranks_and_cpu_turns():
    places = {0: _place(0, "a"), 1: _place(1, "b"), 2: _place(2, "a"), 3: _place(3, "a")}
    plan.fill_local_ranks(places)
    assert [places[r].local_rank for r in range(4)] == [0, 0, 1, 2]
    assert places[3].local_size == 3
    assert plan.turn_order(places, "cpu") == {0: [], 2: [0], 3: [0, 2], 1: []}
    assert plan.turn_order(places, "cuda") == {}


def _result(rank: int, triad: float, device: str = "GPU X") -> fleet_records.RankResult:
    rs = RoofSet(device=device)
    rs.add(Roof("triad", "memory", triad, "measured", level="dram"))
    rs.add(Roof("hbm ds", "memory", 4e12, "datasheet", level="dram"))
    return fleet_records.RankResult(rank=rank, host=f"h{rank}", status="ok", device=device,
                            roofs=rs.to_dict())


def test_outlier_is_below_the_median_of_its_peers():
    res = {0: _result(0, 3.6e12), 1: _result(1, 3.5e12), 2: _result(2, 3.0e12),
           3: _result(3, 1.0e12, device="Other GPU"),
           4: fleet_records.RankResult(rank=4, host="h4", status="error", error="boom")}
    rows = {r["rank"]: r for r in compare.comparison_rows(res, margin=0.1)}
    assert rows[2]["outlier"] and rows[2]["peer_median"] == pytest.approx(3.55e12)
    assert not rows[0]["outlier"] and not rows[1]["outlier"]
    assert rows[3]["peers"] == 0 and not rows[3]["outlier"]  # no same-name peer
    assert rows[0]["ratio"] == pytest.approx(0.9)  # measured vs datasheet
    assert 4 not in rows
    assert not any(r["outlier"] for r in compare.comparison_rows(res, margin=0.2))


def test_report_files_are_complete_and_atomic(tmp_path):
    res = {0: _result(0, 3.6e12), 1: _result(1, 2.0e12),
           2: fleet_records.RankResult(rank=2, host="h2", status="timeout", error="no answer")}
    places = {r: _place(r, f"h{r}") for r in res}
    cfg = fleet_records.FleetConfig(backend="cuda", margin=0.1, argv=["roofbench", "fleet"])
    rep = compare.build_report(cfg, places, res, [], "MPI link probes skipped")
    output.write_report(rep, tmp_path)
    names = sorted(p.name for p in tmp_path.iterdir())
    assert names == ["fleet.json", "fleet.md", "fleet.png", "rank0-gpu-x.json",
                     "rank1-gpu-x.json"]  # no temporary file left behind
    d = json.loads((tmp_path / "fleet.json").read_text())
    assert d["schema"] == fleet_records.SCHEMA and d["world_size"] == 3
    assert [o["rank"] for o in d["outliers"]] == [1]
    assert compare.exit_code(d) == 1
    md = (tmp_path / "fleet.md").read_text()
    assert "| 2 | h2 |" in md and "timeout" in md and "no answer" in md
    assert "**rank 1 (h1, GPU X)**" in md


def test_unwritable_out_dir_is_user_error(tmp_path):
    f = tmp_path / "file"
    f.write_text("")
    with pytest.raises(UserError, match="cannot write the fleet report"):
        plan.prepare_out(str(f / "sub"))


def test_gpu_links_without_gpu(tmp_path, capsys):
    from roofbench.roofs.probes import gpu_links as gl

    if gl.gpu_count() > 0:
        pytest.skip("a GPU is present: see test_gpu_links_on_this_node")
    assert main(["fleet", "gpu-links", "--out", str(tmp_path / "g.json")]) == 2
    err = capsys.readouterr().err
    assert err.startswith("roofbench: error: no GPU") and len(err.strip().splitlines()) == 1


@pytest.mark.gpu
def test_gpu_links_on_this_node(tmp_path, capsys):
    out = tmp_path / "g.json"
    assert main(["fleet", "gpu-links", "--quick", "--out", str(out)]) == 0
    rs = read_roofset(json.loads(out.read_text()))
    text = capsys.readouterr().out
    if rs.info["p2p"]["devices"] == 1:
        assert "one device" in text and rs.roofs == []  # nothing crosses a link
    else:
        assert rs.interconnect("nccl_allreduce").value > 0


@pytest.mark.parametrize("env, want", [
    ({"OMPI_COMM_WORLD_SIZE": "4"}, "mpirun (Open MPI)"),
    ({"SLURM_STEP_ID": "0", "SLURM_PROCID": "3"}, "srun (Slurm)"),
    ({"PMI_RANK": "1"}, "PMI (MPICH hydra or similar)"),
    ({}, "none (singleton: started without mpirun/srun)"),
])
def test_launcher_detection(monkeypatch, env, want):
    for v in ("OMPI_COMM_WORLD_SIZE", "SLURM_STEP_ID", "SLURM_PROCID", "PMI_RANK", "PMI_SIZE"):
        monkeypatch.delenv(v, raising=False)
    for k, v in env.items():
        monkeypatch.setenv(k, v)
    assert environment.launcher() == want


def test_a_folder_is_one_jobs(tmp_path):
    """--out given: the first job claims it (an exclusive progress record); a second job
    given it while the first runs, or after a job that ended before its report, or after a
    finished report, is refused with one line, and nothing there is touched."""
    d = tmp_path / "f"
    assert plan.prepare_out(str(d)) == d
    first = json.loads((d / output.PROGRESS_FILE).read_text())
    assert first["state"] == "starting" and first["schema"] == output.PROGRESS_SCHEMA
    before = (d / output.PROGRESS_FILE).read_bytes()
    with pytest.raises(UserError, match="holds another fleet job's progress record"):
        plan.prepare_out(str(d))
    assert (d / output.PROGRESS_FILE).read_bytes() == before
    # the job's report replaces its progress record; the folder is then a finished report's
    res = {0: _result(0, 3.6e12)}
    cfg = fleet_records.FleetConfig(backend="cuda", margin=0.1, argv=["roofbench", "fleet"])
    output.write_report(compare.build_report(cfg, {0: _place(0, "h0")}, res, [], ""), d)
    assert not (d / output.PROGRESS_FILE).exists()
    report = (d / "fleet.json").read_bytes()
    with pytest.raises(UserError, match="holds an earlier fleet report"):
        plan.prepare_out(str(d))
    assert (d / "fleet.json").read_bytes() == report
