"""`roofbench fleet` under a real `mpirun -n 2 --oversubscribe` (Open MPI, shared memory).

One run on the real CPU backend in quick mode checks the gathered report and the MPI
interconnect roofs; the fault runs use tests/bench/fleet/fleet_rank_main.py's fixture backend so
that they
take a second each. Every subprocess is bounded by a timeout; the file stays under ~60 s on
2 cores. Skipped with the reason when mpirun or mpi4py is missing.
"""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from patience import patience

from roofbench.readers import read_roofset

pytestmark = pytest.mark.mpi

HERE = Path(__file__).resolve().parent
MPIRUN = shutil.which("mpirun")
if MPIRUN is None:
    pytest.skip("mpirun not found (install openmpi-bin)", allow_module_level=True)
if importlib.util.find_spec("mpi4py") is None:
    pytest.skip("mpi4py not installed (pip install 'roofbench[mpi]')", allow_module_level=True)


def mpirun(n: int, args: list[str], env: dict[str, str] | None = None,
           timeout: float = 90, fixture: bool = True) -> subprocess.CompletedProcess[str]:
    e = dict(os.environ)
    # CI runs as root: Open MPI refuses to start as root without both of these.
    e.update(OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1",
             OMPI_MCA_rmaps_base_oversubscribe="1", PYTHONUNBUFFERED="1")
    # Containers often forbid the cross-memory-attach single copy (ptrace): Open MPI then
    # prints "Read -1, expected ..." (open-mpi/ompi#4948). Copy-in/copy-out works everywhere.
    e.setdefault("OMPI_MCA_btl_vader_single_copy_mechanism", "none")
    e.update(env or {})
    entry = [str(HERE / "fleet_rank_main.py")] if fixture else ["-m", "roofbench.bench.cli"]
    cmd = [MPIRUN, "-n", str(n), "--oversubscribe", sys.executable, *entry, *args]
    try:
        return subprocess.run(cmd, env=e, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired as x:
        pytest.fail(f"mpirun hung past {timeout} s: {' '.join(cmd)}\n{x.stdout}\n{x.stderr}")


FAST = ["--quick", "--link-max-size", "256k"]


@pytest.mark.slow
def test_cpu_fleet_of_two_ranks(tmp_path):
    out = tmp_path / "fleet"
    p = mpirun(2, ["fleet", "calibrate", "--backend", "cpu", *FAST, "--timeout",
                   str(round(patience(60))), "--out", str(out)], fixture=False,
               timeout=patience(120))
    assert p.returncode == 0, p.stdout + p.stderr
    assert f"report in {out}/fleet.md" in p.stdout
    d = json.loads((out / "fleet.json").read_text())
    assert d["world_size"] == 2 and d["launcher"] == "mpirun (Open MPI)"
    assert [r["status"] for r in d["ranks"]] == ["ok", "ok"]
    assert [r["local_rank"] for r in d["ranks"]] == [0, 1]
    assert any("measured after them, in turn" in n for n in d["ranks"][1]["notes"])
    for r in d["ranks"]:
        rs = read_roofset(r["roofs"])
        assert rs.memory("dram", "measured").value > 0
        assert rs.compute("fp64", "measured").value > 0
    assert {row["rank"] for row in d["comparison"]} == {0, 1}
    assert all(row["peers"] == 1 for row in d["comparison"])
    # The MPI interconnect roofs: p2p and all-reduce, busbw = algbw x 2(n-1)/n = algbw (n = 2)
    roofs = {r["level"]: r for r in d["interconnect"]["roofs"]}
    assert set(roofs) == {"mpi_p2p", "mpi_allreduce"}
    for r in roofs.values():
        assert r["kind"] == "interconnect" and r["source"] == "measured" and r["value"] > 0
        assert r["evidence"]["ranks"] == 2 and max(r["evidence"]["sizes_bytes"]) == 256 << 10
    ar = next(m for m in d["interconnect"]["measurements"] if m["op"] == "allreduce")
    for pt in ar["points"]:
        assert pt["busbw"] == pytest.approx(pt["algbw"] * 2 * (2 - 1) / 2)
    assert roofs["mpi_allreduce"]["value"] == pytest.approx(max(p["busbw"] for p in ar["points"]))
    assert (out / "fleet.png").stat().st_size > 10_000
    assert "## Interconnect (MPI)" in (out / "fleet.md").read_text()
    # Each rank's file carries its roofs and the links: the distributed model reads it.
    rank0 = next(out.glob("rank0-*.json"))
    assert read_roofset(json.loads(rank0.read_text())).interconnect("mpi_allreduce")
    q = subprocess.run([sys.executable, "-m", "roofbench.bench.cli", "tp", "--roofs",
                        str(rank0), "--precision", "fp64", "--dtype", "fp64", "-p", "2"],
                       capture_output=True, text=True, timeout=patience(60))
    assert q.returncode == 0, q.stderr
    assert "link: measured mpi_allreduce roof" in q.stdout


def test_sick_rank_flagged_and_failing_rank_kept(tmp_path):
    out = tmp_path / "f"
    p = mpirun(3, ["fleet", "calibrate", "--backend", "fake", *FAST, "--timeout", "30",
                   "--out", str(out)],
               env={"FLEET_FAKE_SLOW_RANK": "1", "FLEET_FAKE_FAIL_RANK": "2"})
    assert p.returncode != 0  # a rank failed: the job says so
    assert (out / "fleet.json").exists(), p.stdout + p.stderr
    d = json.loads((out / "fleet.json").read_text())
    st = {r["rank"]: r for r in d["ranks"]}
    assert st[0]["status"] == "ok" and st[1]["status"] == "ok"
    assert st[2]["status"] == "error" and "planted probe failure" in st[2]["error"]
    assert [(o["rank"], o["roof"]) for o in d["outliers"]] == [(1, "triad")]
    assert d["interconnect"]["roofs"]  # the failed rank still took part in the link probes
    assert "OUTLIER rank 1" in p.stdout


def test_version_mismatch_is_one_message(tmp_path):
    p = mpirun(2, ["fleet", "calibrate", "--backend", "fake", *FAST, "--timeout", "30",
                   "--out", str(tmp_path / "v")], env={"FLEET_FAKE_VERSION_RANK": "1"})
    assert p.returncode == 2
    lines = [ln for ln in p.stderr.splitlines() if ln.startswith("roofbench")]
    assert len(lines) == 1 and "roofbench versions differ between ranks" in lines[0]
    assert "0.0.0+other on rank(s) 1" in lines[0] and "Traceback" not in p.stderr
    assert not (tmp_path / "v" / "fleet.json").exists()


def test_hung_rank_times_out_and_report_is_kept(tmp_path):
    out = tmp_path / "h"
    p = mpirun(2, ["fleet", "calibrate", "--backend", "fake", *FAST, "--timeout", "2",
                   "--out", str(out)], env={"FLEET_FAKE_HANG_RANK": "1"}, timeout=patience(60))
    assert p.returncode != 0
    assert "a rank did not answer; aborting the job" in p.stderr
    d = json.loads((out / "fleet.json").read_text())
    assert [r["status"] for r in d["ranks"]] == ["ok", "timeout"]
    assert "no answer from rank 1 within" in d["ranks"][1]["error"]
    assert "skipped" in d["interconnect"]["note"]


def test_cuda_backend_without_gpu(tmp_path):
    out = tmp_path / "c"
    p = mpirun(2, ["fleet", "calibrate", "--backend", "cuda", "--no-links", *FAST,
                   "--timeout", "30", "--out", str(out)],
               env={"CUDA_VISIBLE_DEVICES": ""})
    assert p.returncode == 2
    assert "no rank could calibrate" in p.stderr and "cannot see a GPU" in p.stderr
    d = json.loads((out / "fleet.json").read_text())
    assert all(r["status"] == "error" and "cannot see a GPU" in r["error"] for r in d["ranks"])


def test_watchdog_aborts_a_hung_collective(tmp_path):
    script = tmp_path / "wd.py"
    script.write_text(
        "import time\n"
        "from mpi4py import MPI\n"
        "from roofbench.bench.fleet.messaging import watchdog\n"
        "c = MPI.COMM_WORLD\n"
        "if c.Get_rank() == 1:\n"
        "    time.sleep(120)  # never joins the barrier\n"
        "with watchdog(c, 2, 'test barrier'):\n"
        "    c.Barrier()\n")
    e = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")
    e.setdefault("OMPI_MCA_btl_vader_single_copy_mechanism", "none")
    p = subprocess.run([MPIRUN, "-n", "2", "--oversubscribe", sys.executable, str(script)],
                       env=e, capture_output=True, text=True, timeout=patience(60))
    assert p.returncode != 0
    assert "rank 0: test barrier did not finish within 2 s" in p.stderr


def test_unwritable_out_dir_stops_every_rank(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("")
    p = mpirun(2, ["fleet", "calibrate", "--backend", "fake", *FAST, "--timeout", "30",
                   "--out", str(blocker / "sub")])
    assert p.returncode == 2
    lines = [ln for ln in p.stderr.splitlines() if ln.startswith("roofbench")]
    assert len(lines) == 1 and "cannot write the fleet report" in lines[0]


def _rank_pid(root_pid: int, rank: int) -> int | None:
    """The pid of ``rank`` among mpirun's descendants (Open MPI sets OMPI_COMM_WORLD_RANK)."""
    for p in Path("/proc").iterdir():
        if not p.name.isdigit() or int(p.name) == root_pid:
            continue
        try:
            env = (p / "environ").read_bytes().split(b"\0")
        except OSError:
            continue
        if f"OMPI_COMM_WORLD_RANK={rank}".encode() in env and \
                any(b"fleet_rank_main" in a for a in (p / "cmdline").read_bytes().split(b"\0")):
            return int(p.name)
    return None


def test_a_killed_rank_leaves_the_others_results_and_names_the_lost(tmp_path):
    """SIGKILL to rank 1: Open MPI aborts the whole job; rank 0's roofs and a record naming
    rank 1 as lost are on disk already."""
    import signal
    import time

    out = tmp_path / "fleet"
    e = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1",
             OMPI_MCA_rmaps_base_oversubscribe="1", PYTHONUNBUFFERED="1",
             FLEET_FAKE_HANG_RANK="1")
    e.setdefault("OMPI_MCA_btl_vader_single_copy_mechanism", "none")
    proc = subprocess.Popen([MPIRUN, "-n", "2", "--oversubscribe", sys.executable,
                             str(HERE / "fleet_rank_main.py"), "fleet", "calibrate", "--backend",
                             "fake", "--no-links", "--timeout", "120", "--out", str(out)],
                            env=e, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    progress = out / "fleet-progress.json"

    def gathering() -> bool:  # the file is claimed at the handshake, then rewritten whole
        return progress.exists() and json.loads(progress.read_text())["state"] == "gathering"

    t0 = time.monotonic()
    while not gathering() or _rank_pid(proc.pid, 1) is None:
        assert proc.poll() is None, proc.communicate()
        assert time.monotonic() - t0 < patience(60), "rank 0 never recorded its progress"
        time.sleep(0.1)
    os.kill(_rank_pid(proc.pid, 1), signal.SIGKILL)
    try:
        _, err = proc.communicate(timeout=patience(60))
    except subprocess.TimeoutExpired:
        proc.kill()
        pytest.fail("mpirun outlived its killed rank by 60 s")
    assert proc.returncode != 0
    rec = json.loads(progress.read_text())
    assert rec["received"] == [0] and rec["pending"] == [1]
    assert rec["state"] in ("gathering", "stopped")
    if rec["state"] == "stopped":  # rank 0 heard mpirun's SIGTERM before the end
        assert rec["lost"] == [1] and "SIGTERM" in rec["why"]
    (roofs0,) = out.glob("rank0-*.json")
    assert read_roofset(json.loads(roofs0.read_text())).memory("dram", "measured").value > 0
    assert not (out / "fleet.json").exists()
