"""One roofs cache per user and device: where it lives, what keys it, what a read-only home
does, and `roofbench calibrate` on a CPU (the probes stand in: behaviour, not speed)."""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import pytest
from load_reading import Quiet
from roofbench.bench.backends.cpu import CpuBackend, cpu_model
from roofbench.bench.cli import main
from roofbench.bench.errors import UserError
from roofbench.bench.measure import roof_source
from roofbench.roofs.files import default_path
from roofbench.roofs.probes import cpu_env

import roofbench
from roofbench.paths import cache_home, child_env
from roofbench.roof_records import Roof, RoofSet

KEY = {"cpu": "Test CPU", "cores": "0-1", "memory_bytes": "1024", "numpy": "2.0.0",
       "numba": "0.60.0", "llvmlite": "0.43.0", "probes": "a1b2c3d4e5f6"}


def roofs_of(device: str) -> RoofSet:
    return RoofSet(device=device, roofs=[
        # beyond any machine: the tests here are of the cache, never a point above its roof
        Roof("dram stream-add", "memory", 2e13, "measured", level="dram", median=1.5e13),
        Roof("fp64 FMA peak", "compute", 1e14, "measured", precision="fp64", median=9e13)])


@pytest.fixture
def fake_probes(monkeypatch, tmp_path):
    """CPU probes that count their calls; the machine's fingerprint is KEY (changeable)."""
    calls: list[bool] = []
    key = dict(KEY)

    def measure(self, quick=False, progress=None, checkpoint=None):
        calls.append(quick)
        return roofs_of(self.device_name())

    monkeypatch.setattr(CpuBackend, "measure_roofs", measure)
    monkeypatch.setattr(roof_source, "_load_probe", Quiet)  # tests/roofs: under load
    monkeypatch.setattr(roof_source, "cache_key",
                        lambda be: dict(key) if be.kind == "cpu" else None)
    monkeypatch.setattr(roof_source, "_ROOFS", {})
    monkeypatch.setenv("ROOFBENCH_HOME", str(tmp_path / "home"))
    return calls, key


def test_cache_home_is_per_user_never_the_working_folder(monkeypatch, tmp_path):
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("ROOFBENCH_HOME", raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert cache_home() == tmp_path / "xdg" / "roofbench"
    assert default_path("AMD EPYC 9R14") == tmp_path / "xdg" / "roofbench" / "roofs" / \
        "amd-epyc-9r14.json"
    assert default_path("AMD EPYC 9R14", tag="cores-0-3").name == "amd-epyc-9r14@cores-0-3.json"
    monkeypatch.setenv("ROOFBENCH_HOME", str(tmp_path / "home"))  # it still wins
    assert default_path("x").parent == tmp_path / "home" / "roofs"


def test_the_cache_is_reused_until_the_machine_changes(fake_probes):
    calls, key = fake_probes
    be = CpuBackend()
    rs = roof_source.cached_roofs(be, quick=True)
    path = roof_source.cache_path(be)
    assert calls == [True] and path.is_file()
    stored = json.loads(path.read_text())
    assert stored["context"]["environment"]["fingerprint"] == KEY  # keyed by the machine
    assert roof_source.cached_roofs(be, quick=True).roofs[0].value == rs.roofs[0].value
    assert calls == [True]  # reused
    for what, value in (("numpy", "2.1.0"), ("cores", "0"), ("memory_bytes", "2048"),
                        ("cpu", "Other CPU"), ("probes", "0123456789ab")):
        key[what] = value
        again = roof_source.cached_roofs(be, quick=True)
        assert any(n.startswith(f"roofs cache {path} measured again") and what in n
                   for n in again.notes), again.notes
        assert roof_source.cached_roofs(be, quick=True).notes == []  # then reused again
    assert calls == [True] * 6
    assert roof_source.cached_roofs(be, quick=True, recalibrate=True) and len(calls) == 7


def test_the_probes_own_code_keys_the_cache(tmp_path, monkeypatch):
    # A roofbench whose probes measure differently does not read roofs an older probe wrote.
    assert cpu_env.current_fingerprint()["probes"] == cpu_env.probe_code()
    fake = tmp_path / "probes"
    fake.mkdir()
    for f in ("cpu_stream.py", "cpu_cache_sweep.py", "fma_model.py", "notes.txt"):
        (fake / f).write_text("x = 1\n")
    monkeypatch.setattr(cpu_env, "__file__", str(fake / "cpu_env.py"))
    before = cpu_env.probe_code()
    (fake / "notes.txt").write_text("not a probe\n")
    assert cpu_env.probe_code() == before
    (fake / "cpu_cache_sweep.py").write_text("x = 2\n")
    assert cpu_env.probe_code() != before


def test_a_cache_without_a_fingerprint_is_measured_again(fake_probes):
    from roofbench.roofs.files import save_calibrated

    calls, _ = fake_probes
    be = CpuBackend()
    save_calibrated(roofs_of(be.device_name()), roof_source.cache_path(be))  # an older writer
    rs = roof_source.cached_roofs(be)
    assert calls == [False] and "no machine fingerprint" in rs.notes[0]


def test_a_read_only_home_costs_the_cache_never_the_roofs(fake_probes, monkeypatch, tmp_path,
                                                          capsys):
    calls, _ = fake_probes
    blocker = tmp_path / "a-file"
    blocker.write_text("not a folder")
    monkeypatch.setenv("ROOFBENCH_HOME", str(blocker))  # roofs/ cannot be made under it
    rs = roof_source.cached_roofs(CpuBackend(), quick=True)
    assert calls == [True] and rs.roofs
    (note,) = [n for n in rs.notes if "not written" in n]
    assert "these roofs hold for this process only" in note
    a = np.ones(1 << 12)
    b, c = a.copy(), np.empty_like(a)
    rec = roofbench.measure(np.add, a, b, c, flops=a.size, reads=[a, b], writes=c,
                            name="ro-home")
    assert rec.outcome.status == "ok" and rec.roofline.limiting_roof == "dram stream-add"
    err = capsys.readouterr().err
    assert "Traceback" not in err and err.count("not written") == 1  # said once


def test_calibrate_works_on_a_cpu(fake_probes, capsys):
    calls, _ = fake_probes
    assert main(["calibrate", "--backend", "cpu", "--quick", "--no-plot"]) == 0
    out = capsys.readouterr().out
    path = roof_source.cache_path(CpuBackend())  # @cores-N where this test runs restricted
    assert path.parent == default_path(cpu_model()).parent
    assert calls == [True] and f"calibrated {cpu_model()}: {path}" in out and path.is_file()
    assert main(["calibrate", "--backend", "cpu", "--no-plot"]) == 0
    assert calls == [True] and "using calibrated" in capsys.readouterr().out
    assert main(["calibrate", "--backend", "cpu", "--recalibrate", "--no-plot"]) == 0
    assert calls == [True, False]


def test_calibrate_cores_option_names_its_cache_file(fake_probes, monkeypatch, capsys):
    monkeypatch.setattr(cpu_env, "_chosen", None)
    allowed = sorted(cpu_env.machine_cores())
    before = cpu_env.affinity()
    try:
        assert main(["calibrate", "--backend", "cpu", "--cores", str(allowed[0]),
                     "--no-plot"]) == 0
        assert f"@cores-{allowed[0]}.json" in capsys.readouterr().out
    finally:
        cpu_env.pin(before)
        monkeypatch.setattr(cpu_env, "_chosen", None)
    assert main(["calibrate", "--backend", "cpu", "--cores", "100000", "--no-plot"]) == 2
    assert "not allowed here" in capsys.readouterr().err


def test_calibrate_on_a_read_only_home_says_so_in_one_line(tmp_path):
    """The command, as a user runs it, with the per-user cache folder unwritable: the roofs
    are still measured (stand-in probes) and shown, one line says they were not saved."""
    blocker = tmp_path / "xdg"
    blocker.write_text("not a folder")
    code = ("import sys; from roofbench.bench.backends.cpu import CpuBackend; "
            "from roofbench.bench.measure import roof_source; "
            "from roofbench.roof_records import Roof, RoofSet; "
            "CpuBackend.measure_roofs = lambda self, **kw: RoofSet(self.device_name(), "
            "[Roof('dram', 'memory', 1e10, 'measured', level='dram')]); "
            "from roofbench.bench.cli import main; "
            "sys.exit(main(['calibrate', '--backend', 'cpu', '--no-plot']))")
    env = child_env(XDG_CACHE_HOME=str(blocker))
    env.pop("ROOFBENCH_HOME", None)
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env,
                       timeout=120, cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert "Traceback" not in r.stderr and "not saved" in r.stdout
    assert not (tmp_path / "roofs").exists()  # never the working folder


def test_one_policy_per_purpose(fake_probes, tmp_path):
    """roof_source.source is every entry point's policy: a run's CPU roofs are measured and
    kept nowhere (a cache file named or not), `roofbench roofs` ("measure") measures even
    over a cache and writes only a named file on a CPU, "cached" and "calibrate" reuse the
    cache, and a file the user named that cannot be written is one line."""
    calls, _ = fake_probes
    be = CpuBackend()
    named = tmp_path / "named.json"
    got = roof_source.source(be, "run", file=named)
    assert got.path is None and got.measured and not named.exists() and len(calls) == 1
    got = roof_source.source(be, "measure")
    assert got.path is None and not roof_source.cache_path(be).exists() and len(calls) == 2
    first = roof_source.source(be, "cached")
    assert first.measured and first.path == roof_source.cache_path(be) and len(calls) == 3
    again = roof_source.source(be, "calibrate")
    assert not again.measured and again.path == first.path and len(calls) == 3
    got = roof_source.source(be, "measure", file=named)  # measured although one is stored
    assert got.measured and named.is_file() and len(calls) == 4
    assert roof_source.source(be, "calibrate", file=named).measured is False
    given = roof_source.source(be, "run", given=named)
    assert (given.path, given.measured) == (named, False) and len(calls) == 4
    blocked = tmp_path / "a-file" / "x.json"
    (tmp_path / "a-file").write_text("not a folder")
    with pytest.raises(UserError, match=f"^cannot write {blocked}: [^/]"):
        roof_source.source(be, "measure", file=blocked)
    with pytest.raises(UserError, match=f"^cannot write {blocked}: [^/]"):
        roof_source.source(be, "calibrate", file=blocked)
    assert "not written" in roof_source.source(be, "cached", file=blocked, recalibrate=True
                                               ).roofs.notes[0]
