"""A hostile user, in real processes: the signal matrix (SIGINT and SIGTERM at start-up, in the
roof probes, between cases and while the report is written), SIGKILL of a run while its FMA
probe child runs, two runs into one --out at the same instant, a real full disk (a tmpfs of a
few hundred KiB), a file-size limit (`ulimit -f`), and non-UTF-8 output encodings.

Every run uses --quick, one tiny case and a roofs file unless the probes are what is tested.
"""

from __future__ import annotations

import json
import os
import resource
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from patience import patience
from roofbench.bench.results import load_run
from testpaths import REAL_CPU_RUN, ROOT

RUN = [sys.executable, "-m", "roofbench.bench.cli", "run", "--backend", "cpu", "--quick",
       "--kernel", "vector_add", "--dtype", "fp32", "--size", "1k"]
ENV = {**os.environ, "PYTHONPATH": str(ROOT), "PYTHONUNBUFFERED": "1"}
PHASES = ["start-up", "probes", "cases", "report"]
SIGNALS = [signal.SIGINT, signal.SIGTERM]
# How many attempts this file makes: the signal matrix, the FMA child, two concurrent runs, the
# full disk (a run, a report), the file-size limit, two encodings
PROCESS_ATTEMPTS = len(PHASES) * len(SIGNALS) + 1 + 1 + 2 + 1 + 2
FLEET_ATTEMPTS = 1  # a rank SIGKILLed under mpirun (tests/bench/fleet/test_fleet_mpi.py)

# A report written slowly enough to be stopped in the middle (the stand-in's marker line says
# when): the run is real, only write_outputs waits first.
SLOW_REPORT = """
import sys, time
import roofbench.bench.present.outputs as o
real = o.write_outputs
def slow(run, folder):
    print("WRITING-REPORT", file=sys.stderr, flush=True)
    time.sleep(30)
    return real(run, folder)
o.write_outputs = slow
from roofbench.bench.cli import main
sys.exit(main(sys.argv[1:]))
"""


def _wait_line(proc: subprocess.Popen, words: str, limit_s: float = 180) -> list[str]:
    seen: list[str] = []
    t0 = time.monotonic()
    assert proc.stderr is not None
    while time.monotonic() - t0 < patience(limit_s):
        line = proc.stderr.readline()
        if not line:
            break
        seen.append(line)
        if words in line:
            return seen
    proc.kill()
    pytest.fail(f"never said {words!r}: {''.join(seen)[-2000:]}")


def _wait_caught(pid: int, limit_s: float = 60) -> None:
    """Until process ``pid`` catches SIGTERM (its SigCgt mask in /proc): roofbench's entry
    point installs its stop handler (SIGTERM, SIGHUP and SIGINT at once) before anything else;
    Python catches SIGINT itself from its first steps, so SIGTERM is the sign. Before it the
    interpreter is starting, and a signal there is Python's, not roofbench's; after it, the
    command line's modules are still being imported (a fixed 0.8 s sleep landed before it on
    a loaded machine)."""
    bit = 1 << (int(signal.SIGTERM) - 1)
    t0 = time.monotonic()
    while time.monotonic() - t0 < patience(limit_s):
        try:
            status = Path(f"/proc/{pid}/status").read_text()
        except OSError:
            break
        caught = next(int(ln.split()[1], 16) for ln in status.splitlines()
                      if ln.startswith("SigCgt:"))
        if caught & bit:
            return
        time.sleep(0.002)
    pytest.fail(f"process {pid} never caught SIGTERM")


def _ctrl_c_as_a_terminal() -> None:
    """In the child: SIGINT as a terminal delivers it. A test run started in the background of
    a shell (`make test &`, nohup) inherits SIGINT ignored, and Python then rightly ignores it."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


@pytest.mark.slow
@pytest.mark.parametrize("sig", SIGNALS, ids=lambda s: s.name)
@pytest.mark.parametrize("phase", PHASES)
def test_signal_matrix(phase: str, sig: signal.Signals, tmp_path: Path, roofs_file: Path):
    out = tmp_path / "o"
    cmd = [*RUN, "--out", str(out)] + ([] if phase == "probes" else ["--roofs", str(roofs_file)])
    if phase == "cases":  # more than one case: the signal lands between two of them
        cmd = [*RUN[:8], "l2norm", "--kernel", "vector_add", *cmd[9:]]
    if phase == "report":
        cmd = [sys.executable, "-c", SLOW_REPORT, *cmd[3:]]
    else:  # report.md is what a stop must leave; the figures are the report phase's to cut
        cmd += ["--no-figures"]
    proc = subprocess.Popen(cmd, cwd=tmp_path, env=ENV, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, preexec_fn=_ctrl_c_as_a_terminal)
    seen: list[str] = []
    if phase == "start-up":  # Python is importing the command line's modules
        _wait_caught(proc.pid)
    elif phase == "probes":
        seen = _wait_line(proc, "roofs")
        time.sleep(1.0)
    elif phase == "cases":
        seen = _wait_line(proc, "[1/")  # the first case is done, the next ones run
    else:
        seen = _wait_line(proc, "WRITING-REPORT")
    proc.send_signal(sig)
    _, err = proc.communicate(timeout=patience(120))
    err = "".join(seen) + err
    assert "Traceback" not in err, err[-3000:]
    assert proc.returncode == 130, err[-3000:]
    stopped = [ln for ln in err.splitlines() if "stopped by" in ln or "interrupted" in ln]
    assert stopped and sig.name in stopped[-1], err[-3000:]
    files = list(out.glob("*/*/results.json"))
    if phase == "start-up":
        assert len(files) <= 1  # stopped before the folder or just after: never half a file
        return
    (path,) = files
    run = load_run(path)
    assert run.interrupted and run.stop is not None
    assert run.stop.cause == "signal" and run.stop.detail == sig.name
    assert run.stop.phase == {"probes": "roofs"}.get(phase, phase)
    assert (path.parent / "report.md").is_file()  # the report is still written
    assert not [p for p in path.parent.iterdir() if p.name.endswith(".tmp")]


def _children(pid: int) -> list[int]:
    kids = []
    for p in Path("/proc").iterdir():
        if p.name.isdigit():
            try:
                fields = (p / "stat").read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue
            if int(fields[1]) == pid:
                kids.append(int(p.name))
    return kids


def _cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
    except OSError:
        return ""


@pytest.mark.slow
def test_sigkill_during_the_fma_probe_leaves_no_child(tmp_path: Path):
    proc = subprocess.Popen([*RUN[:3], "roofs", "--backend", "cpu", "--quick"], cwd=tmp_path,
                            env=ENV, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    child = None
    t0 = time.monotonic()
    while child is None and time.monotonic() - t0 < patience(180):
        # the FMA probe runs under the CPU roofs' own probe process (cpu_roofs_child)
        kids = _children(proc.pid)
        kids += [g for k in kids for g in _children(k)]
        child = next((k for k in kids if "cpu_fma_child" in _cmdline(k)), None)
        time.sleep(0.05)
        assert proc.poll() is None
    assert child is not None, "the FMA probe child never started"
    proc.kill()
    proc.wait(timeout=patience(30))
    t0 = time.monotonic()
    while Path(f"/proc/{child}").exists() and "cpu_fma_child" in _cmdline(child):
        assert time.monotonic() - t0 < patience(10), "the FMA child outlived its parent's SIGKILL"
        time.sleep(0.05)


@pytest.mark.slow
def test_two_runs_into_one_out_at_the_same_instant(tmp_path: Path, roofs_file: Path):
    out = tmp_path / "o"
    go = tmp_path / "go"
    # Both wait on one file, then start their run in the same instant (same second stamp);
    # the folders and records are checked, not a time nor a figure.
    wait = f"import os,time\nwhile not os.path.exists({str(go)!r}): time.sleep(0.001)\n"
    procs = [subprocess.Popen([sys.executable, "-c", wait + (
        "import sys; from roofbench.bench.cli import main; sys.exit(main(sys.argv[1:]))"),
        *RUN[3:8], kernel, "--dtype", "fp32", "--size", "1k", "--roofs", str(roofs_file),
        "--samples", "2", "--no-figures", "--out", str(out)], cwd=tmp_path, env=ENV,
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        for kernel in ("vector_add", "l2norm")]
    time.sleep(3)
    go.write_text("")
    outs = [p.communicate(timeout=patience(240)) for p in procs]
    assert [p.returncode for p in procs] == [0, 0], outs
    printed = [next(ln for ln in o.splitlines() if ln.startswith("results:")) for o, _ in outs]
    assert len(set(printed)) == 2
    folders = sorted(out.glob("*/*/results.json"))
    assert len(folders) == 2
    got = {c.identity.workload for f in folders for c in load_run(f).cases}
    assert got == {"vector_add", "l2norm"}
    assert set(printed) == {f"results: {f}" for f in folders}  # printed is what was written


@pytest.fixture
def tiny_disk(tmp_path: Path):
    mnt = tmp_path / "disk"
    mnt.mkdir()
    r = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=160k", "tmpfs", str(mnt)],
                       capture_output=True, text=True)
    if r.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here ({r.stderr.strip()}): the injected ENOSPC "
                    "of test_hostile.py stands in")
    yield mnt
    subprocess.run(["umount", "-l", str(mnt)], check=False)


@pytest.mark.slow
def test_a_full_disk_during_a_run_stops_it_with_one_line(tiny_disk: Path, roofs_file: Path):
    # 160 KiB: results.json of the first cases fits; the report and plot do not.
    p = subprocess.run([*RUN, "--roofs", str(roofs_file), "--out",
                        str(tiny_disk)], cwd=tiny_disk.parent, env=ENV, capture_output=True,
                       text=True, timeout=patience(300))
    assert "Traceback" not in p.stderr, p.stderr[-3000:]
    assert p.returncode == 3, p.stderr[-3000:]
    (line,) = [ln for ln in p.stderr.splitlines() if ln.startswith("roofbench")]
    assert "ENOSPC" in line and str(tiny_disk) in line
    (path,) = tiny_disk.glob("*/*/results.json")
    json.loads(path.read_text())  # what was saved is whole
    assert not list(path.parent.glob(".*.tmp"))


@pytest.mark.slow
def test_a_full_disk_in_report_is_one_line(tiny_disk: Path, tmp_path: Path):
    src = REAL_CPU_RUN
    p = subprocess.run([*RUN[:3], "report", str(src), "--out", str(tiny_disk / "r.md")],
                       env=ENV, capture_output=True, text=True, timeout=patience(300))
    assert p.returncode == 3 and "Traceback" not in p.stderr, p.stderr[-3000:]
    assert "ENOSPC" in p.stderr and not list(tiny_disk.glob(".*.tmp"))


@pytest.mark.slow
def test_a_file_size_limit_is_one_line(tmp_path: Path):
    src = REAL_CPU_RUN

    def limit() -> None:
        resource.setrlimit(resource.RLIMIT_FSIZE, (64 << 10, 64 << 10))

    p = subprocess.run([*RUN[:3], "report", str(src), "--out", str(tmp_path / "r.md")],
                       env=ENV, capture_output=True, text=True, timeout=patience(300),
                       preexec_fn=limit)
    assert p.returncode == 3 and "Traceback" not in p.stderr, p.stderr[-3000:]
    assert "EFBIG" in p.stderr


@pytest.mark.slow
@pytest.mark.parametrize("env", [{"PYTHONIOENCODING": "latin-1"},
                                 {"LC_ALL": "C", "PYTHONUTF8": "0", "PYTHONIOENCODING": ""}],
                         ids=["latin-1", "C-locale"])
def test_output_encodings_that_are_not_utf8(env: dict, tmp_path: Path):
    src = REAL_CPU_RUN
    folder = tmp_path / "rün ✓"
    folder.mkdir()
    d = json.loads(src.read_text())
    d["cases"] = d["cases"][:2]
    (folder / "results.json").write_text(json.dumps(d))
    p = subprocess.run([*RUN[:3], "report", str(folder)], env={**ENV, **env},
                       capture_output=True, timeout=patience(300))
    assert p.returncode == 0 and b"Traceback" not in p.stderr, p.stderr[-3000:]
    assert (folder / "report.md").is_file()
