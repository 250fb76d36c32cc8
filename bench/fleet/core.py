"""Fleet calibration over MPI: every rank calibrates its device, rank 0 writes one report.

Started by an MPI launcher (``mpirun -n N roofbench fleet calibrate`` or ``srun -n N ...``):
one rank per GPU, or one per node on CPU-only hosts. The protocol is rank 0 as coordinator and
point-to-point messages polled against a deadline, so that no wait can hang:

1. handshake: every rank sends its place (host, local rank, roofbench version) to rank 0; rank 0
   checks the versions and the output directory and answers go / stop;
2. calibrate: each rank opens its backend and measures its roofs (ranks sharing one host take
   turns on the CPU backend, so that they do not contend for the same cores and memory);
   a failure is recorded as that rank's error, the others carry on;
3. gather: each rank sends its result; rank 0 waits at most ``timeout`` for each;
4. links: when every rank answered, MPI point-to-point and all-reduce bandwidth are measured
   (blocking collectives, each under a watchdog that aborts the job after ``timeout``);
5. rank 0 writes fleet.json, fleet.md, fleet.png and one roofs file per rank, atomically.

A rank that never answers is recorded as timed out, the report is written from the others, and
rank 0 then aborts the job so that the hung rank cannot keep ``mpirun`` alive.
"""

from __future__ import annotations

import contextlib
import datetime as _dt
import json
import math
import os
import re
import socket
import statistics
import sys
import threading
import time
import traceback
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from roofbench.roofs import interconnect as ic
from roofbench.roofs.model import device_slug

from roofbench.fileio import atomic_write_bytes
from roofbench.schema import Roof, RoofSet

from ..errors import UserError

SCHEMA = "roofbench.fleet/1"
GPU_BACKENDS = ("cuda", "pycuda", "numba")
# Environment variables that give a rank's index on its node, by launcher.
LOCAL_RANK_VARS = ("OMPI_COMM_WORLD_LOCAL_RANK", "SLURM_LOCALID", "MPI_LOCALRANKID",
                   "PMI_LOCAL_RANK", "PALS_LOCAL_RANKID", "LOCAL_RANK")
TAG_HELLO, TAG_VERDICT, TAG_TOKEN, TAG_RESULT, TAG_LINKS, TAG_DONE = 101, 102, 103, 104, 105, 106
POLL_S = 0.01  # sleep between polls: a waiting rank must not steal a core from a calibrating one


class FleetTimeout(RuntimeError):
    """A peer did not answer within the deadline."""


# ------------------------------------------------------------------------------ environment


def import_mpi() -> Any:
    """mpi4py's MPI module, or one clear UserError saying what is missing."""
    try:
        import mpi4py
    except ImportError:
        raise UserError("MPI is not available: mpi4py is not installed. Install an MPI library "
                        "(Debian/Ubuntu: apt-get install openmpi-bin libopenmpi-dev) and "
                        "`pip install 'roofbench[mpi]'`, then start with `mpirun -n N roofbench "
                        "fleet ...` (or `srun -n N ...` under Slurm)") from None
    try:
        from mpi4py import MPI
    except Exception as e:  # the wheel is there but no libmpi can be loaded or initialised
        msg = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        raise UserError(f"MPI is not available: mpi4py {mpi4py.__version__} cannot load or "
                        f"start an MPI library ({msg}); install openmpi-bin (or another MPI) "
                        f"and start with mpirun/srun") from None
    return MPI


def launcher() -> str:
    env = os.environ
    if "OMPI_COMM_WORLD_SIZE" in env:
        return "mpirun (Open MPI)"
    if "SLURM_STEP_ID" in env and "SLURM_PROCID" in env:
        return "srun (Slurm)"
    if "PMI_RANK" in env or "PMI_SIZE" in env:
        return "PMI (MPICH hydra or similar)"
    return "none (singleton: started without mpirun/srun)"


def env_local_rank() -> tuple[int | None, str]:
    for var in LOCAL_RANK_VARS:
        v = os.environ.get(var)
        if v is not None and v.strip().isdigit():
            return int(v), var
    return None, ""


def visible_gpus() -> list[str]:
    """GPU ids this process may use, without initialising CUDA (CUDA_VISIBLE_DEVICES wins,
    else the /dev/nvidiaN device files)."""
    cvd = os.environ.get("CUDA_VISIBLE_DEVICES")
    if cvd is not None:
        return [d.strip() for d in cvd.split(",") if d.strip() and d.strip() != "-1"]
    try:
        names = os.listdir("/dev")
    except OSError:
        return []
    return sorted((n[len("nvidia"):] for n in names if re.fullmatch(r"nvidia\d+", n)), key=int)


def assign_gpu(local_rank: int, host: str, rank: int) -> tuple[str | None, str | None]:
    """Pin this rank to one GPU by its local rank: (device id, None) or (None, why not).

    One visible GPU means the scheduler already gave this task its own (srun --gpus-per-task);
    several mean one per local rank. Must run before anything initialises CUDA."""
    devs = visible_gpus()
    if not devs:
        return None, (f"rank {rank} (host {host}, local rank {local_rank}) cannot see a GPU: "
                      "no CUDA device visible (CUDA_VISIBLE_DEVICES empty or no /dev/nvidiaN)")
    if len(devs) == 1:
        pick = devs[0]
    elif local_rank < len(devs):
        pick = devs[local_rank]
    else:
        return None, (f"rank {rank} (host {host}, local rank {local_rank}) cannot see a GPU: "
                      f"the host has {len(devs)} visible GPU(s) and local ranks 0-"
                      f"{len(devs) - 1} take them; start at most one rank per GPU")
    os.environ["CUDA_VISIBLE_DEVICES"] = pick
    return pick, None


def _version() -> str:
    import roofbench  # read at call time: a test may stand in another version

    return str(roofbench.__version__)


# ---------------------------------------------------------------------------- records


@dataclass
class Place:
    rank: int
    size: int
    host: str
    pid: int
    version: str
    python: str
    launcher: str
    local_rank: int | None = None
    local_rank_source: str = ""
    local_size: int = 1


@dataclass
class RankResult:
    rank: int
    host: str
    status: str  # "ok", "error", "timeout"
    backend: str = ""
    device: str = ""
    gpu: str | None = None  # CUDA_VISIBLE_DEVICES id this rank was pinned to
    local_rank: int | None = None
    elapsed_s: float = 0.0
    error: str = ""
    roofs: dict[str, Any] | None = None  # RoofSet.to_dict()
    notes: list[str] = field(default_factory=list)


@dataclass
class FleetConfig:
    backend: str = "auto"
    quick: bool = False
    out: str | None = None
    margin: float = 0.1
    timeout: float = 600.0
    calibrate: bool = True
    links: bool = True
    link_max_bytes: int | None = None  # cap on MPI probe message size (small test runs)
    argv: list[str] = field(default_factory=list)


# -------------------------------------------------------------------- bounded messaging


class Messenger:
    """Point-to-point pickled messages, every wait bounded by a deadline."""

    def __init__(self, comm: Any) -> None:
        self.comm = comm
        self.rank = comm.Get_rank()

    def send(self, obj: Any, dest: int, tag: int, timeout: float, what: str) -> None:
        req = self.comm.isend(obj, dest=dest, tag=tag)
        end = time.monotonic() + timeout
        while not req.Test():
            if time.monotonic() > end:
                raise FleetTimeout(f"{what}: rank {dest} did not take the message within "
                                   f"{timeout:g} s")
            time.sleep(POLL_S)

    def post(self, obj: Any, dest: int, tag: int) -> Any:
        """Send without waiting; the caller keeps the request until the receiver has it."""
        return self.comm.isend(obj, dest=dest, tag=tag)

    def recv(self, source: int, tag: int, timeout: float, what: str) -> Any:
        end = time.monotonic() + timeout
        while not self.comm.Iprobe(source=source, tag=tag):
            if time.monotonic() > end:
                raise FleetTimeout(f"{what}: no answer from rank {source} within {timeout:g} s")
            time.sleep(POLL_S)
        return self.comm.recv(source=source, tag=tag)  # arrived: completes at once


@contextlib.contextmanager
def watchdog(comm: Any, timeout: float, what: str) -> Iterator[None]:
    """Abort the whole job if the block (a blocking collective) outlives ``timeout``."""

    def fire() -> None:
        print(f"roofbench fleet: rank {comm.Get_rank()}: {what} did not finish within "
              f"{timeout:g} s (a peer hung or died); aborting the job", file=sys.stderr,
              flush=True)
        comm.Abort(124)

    t = threading.Timer(timeout, fire)
    t.daemon = True
    t.start()
    try:
        yield
    finally:
        t.cancel()


# ------------------------------------------------------------------------------- calibrate


def _one_line(e: BaseException) -> str:
    msg = " ".join(str(e).split()) or type(e).__name__
    return f"{type(e).__name__}: {msg}" if not isinstance(e, UserError) else msg


def calibrate_local(place: Place, cfg: FleetConfig,
                    opener: Callable[[str], Any] | None = None) -> RankResult:
    """Open this rank's backend and measure its roofs; any failure becomes the result's error."""
    res = RankResult(rank=place.rank, host=place.host, status="error",
                     local_rank=place.local_rank)
    t0 = time.monotonic()
    try:
        name = cfg.backend
        lr = place.local_rank or 0
        if name in GPU_BACKENDS:
            res.gpu, why = assign_gpu(lr, place.host, place.rank)
            if why:
                raise UserError(why)
        elif name == "auto" and visible_gpus():
            res.gpu, why = assign_gpu(lr, place.host, place.rank)
            if why:  # more ranks than GPUs on this host: this one calibrates nothing
                raise UserError(why)
        if opener is None:
            from ..backends.base import open_backend as opener
        be = opener(name)
        res.backend = getattr(be, "name", name)
        res.device = be.device_name()
        rs: RoofSet = be.measure_roofs(quick=cfg.quick)
        rs.info.setdefault("host", place.host)
        res.roofs = rs.to_dict()
        res.device = rs.device or res.device
        res.status = "ok"
        with contextlib.suppress(Exception):
            be.close()
    except Exception as e:  # a failing rank must not take the fleet down
        res.error = _one_line(e)
        if not isinstance(e, UserError) and os.environ.get("ROOFBENCH_DEBUG"):
            traceback.print_exc()
    res.elapsed_s = time.monotonic() - t0
    return res


# ------------------------------------------------------------------------------- the run


def run_fleet(cfg: FleetConfig, opener: Callable[[str], Any] | None = None) -> int:
    """Entry point on every rank. Returns the exit code (same on every rank when all answer)."""
    MPI = import_mpi()
    comm = MPI.COMM_WORLD
    try:
        return _run(MPI, comm, cfg, opener)
    except FleetTimeout as e:
        _die(comm, str(e))
        return 124


def _run(MPI: Any, comm: Any, cfg: FleetConfig, opener: Callable[[str], Any] | None) -> int:
    rank, size = comm.Get_rank(), comm.Get_size()
    msg = Messenger(comm)
    lr, lr_src = env_local_rank()
    place = Place(rank=rank, size=size, host=MPI.Get_processor_name() or socket.gethostname(),
                  pid=os.getpid(), version=_version(), python=sys.version.split()[0],
                  launcher=launcher(), local_rank=lr, local_rank_source=lr_src)
    T = cfg.timeout

    # 1. handshake ------------------------------------------------------------------------
    if rank == 0:
        places: dict[int, Place] = {0: place}
        missing: dict[int, str] = {}
        for r in range(1, size):
            try:
                places[r] = msg.recv(r, TAG_HELLO, T, "handshake")
            except FleetTimeout as e:
                missing[r] = str(e)
        _fill_local_ranks(places)
        stop = _version_problem(places)
        out_dir: Path | None = None
        if stop is None:
            try:
                out_dir = _prepare_out(cfg.out)
            except UserError as e:
                stop = str(e)
        verdict = {"stop": stop, "places": places, "missing": sorted(missing)}
        for r in places:
            if r != 0:
                msg.send(verdict, r, TAG_VERDICT, T, "handshake verdict")
        if stop:
            if missing:  # a silent rank would never hear the verdict: take it down too
                print(f"roofbench: error: {stop}", file=sys.stderr, flush=True)
                comm.Abort(2)
            raise UserError(stop)
    else:
        try:
            msg.send(place, 0, TAG_HELLO, T, "handshake")
            verdict = msg.recv(0, TAG_VERDICT, T, "handshake verdict")
        except FleetTimeout as e:
            _die(comm, f"{e}; rank 0 is hung or dead")
        if verdict["stop"]:
            return 2  # rank 0 prints the one message for everybody
        places = verdict["places"]
        missing = {}
    place = places[rank]

    # 2. calibrate --------------------------------------------------------------------------
    if cfg.calibrate:
        turn = _turn_order(places, cfg.backend)
        before = turn.get(rank, [])
        notes: list[str] = []
        if before:  # wait for the previous rank on this host to finish (CPU backend)
            try:
                msg.recv(before[-1], TAG_TOKEN, T * len(before), "turn on shared host")
            except FleetTimeout as e:
                notes.append(f"measured concurrently with rank {before[-1]} ({e})")
        result = calibrate_local(place, cfg, opener)
        result.notes += notes
        if before:
            result.notes.append(f"shares host {place.host} with rank(s) "
                                f"{', '.join(map(str, before))}: measured after them, in turn")
        after = [r for r, prev in turn.items() if prev and prev[-1] == rank]
        pending = [msg.post(True, r, TAG_TOKEN) for r in after]
    else:
        result = RankResult(rank=rank, host=place.host, status="ok", local_rank=place.local_rank,
                            notes=["calibration skipped (links only)"])
        pending = []

    # 3. gather -----------------------------------------------------------------------------
    if rank == 0:
        results: dict[int, RankResult] = {0: result}
        for r in range(1, size):
            if r in missing:
                results[r] = RankResult(rank=r, host="?", status="timeout", error=missing[r])
                continue
            # A peer may still be waiting for its turn on a shared host: allow for those.
            wait = T * (1 + len(_turn_order(places, cfg.backend).get(r, [])))
            try:
                results[r] = msg.recv(r, TAG_RESULT, wait, "calibration result")
            except FleetTimeout as e:
                results[r] = RankResult(rank=r, host=places[r].host, status="timeout",
                                        local_rank=places[r].local_rank, error=str(e))
        alive = all(res.status != "timeout" for res in results.values())
    else:
        pending.append(msg.post(result, 0, TAG_RESULT))

    # 4. links ----------------------------------------------------------------------------
    links: list[ic.LinkMeasurement] = []
    link_note = ""
    if rank == 0:
        do_links = cfg.links and alive and size > 1
        if not cfg.links:
            link_note = "MPI link probes skipped (--no-links)"
        elif size == 1:
            link_note = "one rank: no interconnect to measure (start with mpirun -n 2 or more)"
        elif not alive:
            link_note = "MPI link probes skipped: a rank did not report (see its error)"
        if alive:
            for r in range(1, size):
                msg.send(do_links, r, TAG_LINKS, T, "link-probe go")
    else:
        # Rank 0 may still be calibrating and then waiting for the slowest peer.
        wait = T * (2 + len(places))
        try:
            do_links = msg.recv(0, TAG_LINKS, wait, "link-probe go")
        except FleetTimeout as e:
            _die(comm, f"{e}; rank 0 is hung or dead")
    if do_links:
        links = measure_links(comm, cfg)

    for req in pending:  # our messages must be delivered before we may exit
        _wait_req(req, T, comm, "delivering results to rank 0")

    # 5. report --------------------------------------------------------------------------------
    if rank != 0:
        try:
            code = msg.recv(0, TAG_DONE, T * 2, "final status")
        except FleetTimeout as e:
            _die(comm, f"{e}; rank 0 is hung or dead")
        return int(code)

    rep = build_report(cfg, places, results, links, link_note)
    assert out_dir is not None
    try:
        write_report(rep, out_dir)
    except OSError as e:  # disk full, directory removed: tell the peers, then the user
        for r in range(1, size):
            msg.send(2, r, TAG_DONE, T, "final status")
        raise UserError(f"cannot write the fleet report to {out_dir}: {e.strerror or e}") \
            from None
    code = _exit_code(rep)
    print(summary_text(rep, out_dir))
    if not alive:
        # The report is safe on disk; a hung rank would keep mpirun alive forever.
        print("roofbench fleet: a rank did not answer; aborting the job so that it cannot "
              "hang (its error is in the report)", file=sys.stderr, flush=True)
        comm.Abort(1)
    for r in range(1, size):
        msg.send(code, r, TAG_DONE, T, "final status")
    if code == 2:
        errs = "; ".join(f"rank {r.rank}: {r.error}" for r in results.values())
        raise UserError(f"no rank could calibrate ({errs}); report in {out_dir}")
    return code


def _die(comm: Any, why: str) -> None:
    print(f"roofbench fleet: rank {comm.Get_rank()}: {why}; aborting the job", file=sys.stderr,
          flush=True)
    comm.Abort(124)
    raise SystemExit(124)  # not reached: Abort ends the process


def _wait_req(req: Any, timeout: float, comm: Any, what: str) -> None:
    end = time.monotonic() + timeout
    while not req.Test():
        if time.monotonic() > end:
            _die(comm, f"{what} did not complete within {timeout:g} s")
        time.sleep(POLL_S)


def _fill_local_ranks(places: dict[int, Place]) -> None:
    # Launcher variables first; otherwise the order of ranks on each host.
    by_host: dict[str, list[int]] = {}
    for r in sorted(places):
        by_host.setdefault(places[r].host, []).append(r)
    for ranks in by_host.values():
        for i, r in enumerate(ranks):
            p = places[r]
            p.local_size = len(ranks)
            if p.local_rank is None:
                p.local_rank, p.local_rank_source = i, "order of ranks on the host"


def _version_problem(places: dict[int, Place]) -> str | None:
    versions: dict[str, list[int]] = {}
    for r, p in sorted(places.items()):
        versions.setdefault(p.version, []).append(r)
    if len(versions) <= 1:
        return None
    parts = "; ".join(f"{v} on rank(s) {_ranges(rs)} (host(s) "
                      f"{', '.join(sorted({places[r].host for r in rs}))})"
                      for v, rs in versions.items())
    return (f"roofbench versions differ between ranks: {parts}. Install the same roofbench "
            "on every node and start again")


def _ranges(rs: list[int]) -> str:
    return ", ".join(map(str, rs)) if len(rs) <= 6 else f"{rs[0]}-{rs[-1]} ({len(rs)} ranks)"


def _turn_order(places: dict[int, Place], backend: str) -> dict[int, list[int]]:
    """rank -> ranks on the same host that calibrate before it. CPU backends only: GPUs are
    separate devices, but two CPU calibrations on one host would share cores and memory."""
    if backend in GPU_BACKENDS or (backend == "auto" and visible_gpus()):
        return {}
    by_host: dict[str, list[int]] = {}
    for r in sorted(places):
        by_host.setdefault(places[r].host, []).append(r)
    return {r: rs[:i] for rs in by_host.values() for i, r in enumerate(rs)}


def _prepare_out(out: str | None) -> Path:
    stamp = _dt.datetime.now(_dt.timezone.utc).strftime("%Y%m%dT%H%M%SZ")
    d = Path(out) if out else Path("results") / "fleet" / stamp
    try:
        d.mkdir(parents=True, exist_ok=True)
        probe = d / f".write-test-{os.getpid()}"
        probe.write_text("")
        probe.unlink()
    except OSError as e:
        raise UserError(f"cannot write the fleet report to {d}: {e.strerror or e}") from None
    return d


def measure_links(comm: Any, cfg: FleetConfig) -> list[ic.LinkMeasurement]:
    """MPI p2p and all-reduce bandwidth; blocking collectives, each under the watchdog."""
    sizes = ic.QUICK_MPI_SIZES if cfg.quick else ic.DEFAULT_MPI_SIZES
    if cfg.link_max_bytes:
        sizes = tuple(s for s in sizes if s <= cfg.link_max_bytes) or (sizes[0],)
    target = 16 * ic.MiB if cfg.quick else 64 * ic.MiB
    samples = 3 if cfg.quick else 5
    out = []
    with watchdog(comm, cfg.timeout, "MPI point-to-point probe"):
        out.append(ic.mpi_pingpong(comm, sizes, samples=samples, target_bytes=target))
    with watchdog(comm, cfg.timeout, "MPI all-reduce probe"):
        out.append(ic.mpi_allreduce(comm, sizes, samples=samples, target_bytes=target))
    return out


# ---------------------------------------------------------------------------------- report


def _roof_key(r: Roof) -> str:
    return f"{r.kind}:{r.level or r.precision}:{r.name}"


def comparison_rows(results: dict[int, RankResult], margin: float) -> list[dict[str, Any]]:
    """One row per measured roof of every device: datasheet ratio and peer comparison.

    Peers are the other devices with the same name; a device is an outlier on a roof when its
    value is more than ``margin`` below the median of its peers' values of that roof."""
    sets = {r: RoofSet.from_dict(res.roofs) for r, res in results.items()
            if res.status == "ok" and res.roofs}
    groups: dict[tuple[str, str], dict[int, float]] = {}
    for r, rs in sets.items():
        for roof in rs.roofs:
            if roof.source == "measured":
                g = groups.setdefault((rs.device, _roof_key(roof)), {})
                g[r] = max(roof.value, g.get(r, 0.0))
    rows = []
    for r, rs in sorted(sets.items()):
        seen = set()
        for roof in rs.roofs:
            if roof.source != "measured" or _roof_key(roof) in seen:
                continue
            seen.add(_roof_key(roof))
            group = groups[(rs.device, _roof_key(roof))]
            value = group[r]
            others = [v for q, v in group.items() if q != r]
            med = statistics.median(others) if others else value
            ds = (rs.compute(roof.precision, "datasheet") if roof.kind == "compute"
                  else rs.memory(roof.level, "datasheet") if roof.kind == "memory" else None)
            outlier = bool(others) and value < (1.0 - margin) * med
            rows.append({
                "rank": r, "host": results[r].host, "device": rs.device, "roof": roof.name,
                "kind": roof.kind, "key": roof.level or roof.precision, "unit": roof.unit,
                "measured": value, "datasheet": ds.value if ds else None,
                "ratio": value / ds.value if ds else None, "peers": len(others),
                "peer_median": med, "vs_peers": value / med if med else None,
                "outlier": outlier})
    return rows


def build_report(cfg: FleetConfig, places: dict[int, Place], results: dict[int, RankResult],
                 links: list[ic.LinkMeasurement], link_note: str) -> dict[str, Any]:
    rows = comparison_rows(results, cfg.margin)
    link_roofs = [r for r in (m.to_roof() for m in links) if r is not None]
    notes = [m.note for m in links if m.note]
    outliers = [{"rank": x["rank"], "host": x["host"], "device": x["device"], "roof": x["roof"],
                 "measured": x["measured"], "peer_median": x["peer_median"],
                 "vs_peers": x["vs_peers"]} for x in rows if x["outlier"]]
    return {
        "schema": SCHEMA,
        "created_utc": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
        "command": cfg.argv, "roofbench_version": places[0].version,
        "world_size": len(results), "launcher": places[0].launcher,
        "backend_requested": cfg.backend, "quick": cfg.quick, "margin": cfg.margin,
        "timeout_s": cfg.timeout,
        "places": [asdict(places[r]) for r in sorted(places)],
        "ranks": [asdict(results[r]) for r in sorted(results)],
        "interconnect": {"measurements": [m.to_dict() for m in links],
                         "roofs": [r.to_dict() for r in link_roofs],
                         "note": "; ".join(filter(None, [link_note, *notes]))},
        "comparison": rows, "outliers": outliers,
    }


def _exit_code(rep: dict[str, Any]) -> int:
    st = [r["status"] for r in rep["ranks"]]
    if all(s == "ok" for s in st):
        return 0
    return 2 if not any(s == "ok" for s in st) else 1


def write_atomic(path: Path, data: str | bytes) -> None:
    atomic_write_bytes(path, data.encode() if isinstance(data, str) else data)


def write_report(rep: dict[str, Any], out: Path) -> None:
    write_atomic(out / "fleet.json", json.dumps(rep, indent=1, default=str) + "\n")
    write_atomic(out / "fleet.md", fleet_markdown(rep))
    link_roofs = rep["interconnect"]["roofs"]
    for res in rep["ranks"]:
        if res["status"] == "ok" and res["roofs"]:
            rs = dict(res["roofs"])
            # Each device's calibrated roofs with the links it was measured over, ready for
            # `roofbench distributed --roofs FILE`.
            rs["roofs"] = list(rs["roofs"]) + link_roofs
            name = f"rank{res['rank']}-{device_slug(rs['device'])}.json"
            write_atomic(out / name, json.dumps(rs, indent=1, default=str) + "\n")
    if link_roofs:
        write_atomic(out / "links.json", json.dumps(
            {"device": "interconnect", "roofs": link_roofs,
             "info": {"measured_by": "roofbench fleet"}}, indent=1) + "\n")
    png = fleet_plot(rep)
    if png is not None:
        write_atomic(out / "fleet.png", png)


def _si(v: float | None, unit: str = "") -> str:
    if v is None or (isinstance(v, float) and not math.isfinite(v)):
        return "-"
    for scale, pre in ((1e15, "P"), (1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k")):
        if abs(v) >= scale:
            return f"{v / scale:.3g} {pre}{unit}"
    return f"{v:.3g} {unit}".strip()


def md_table(header: list[str], rows: list[list[Any]]) -> str:
    def cell(x: Any) -> str:
        return str(x).replace("|", "\\|").replace("\n", " ")

    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(cell(c) for c in r) + " |" for r in rows]
    return "\n".join(lines)


def fleet_markdown(rep: dict[str, Any]) -> str:
    out = [f"# Fleet calibration ({rep['world_size']} ranks)", "",
           f"- created {rep['created_utc']}, roofbench {rep['roofbench_version']}, "
           f"launcher: {rep['launcher']}",
           f"- backend requested: {rep['backend_requested']}, quick: {rep['quick']}, "
           f"outlier margin: {rep['margin']:.0%} below the median of the other same-name "
           f"devices, "
           f"timeout per wait: {rep['timeout_s']:g} s", ""]
    out += ["## Ranks", "", md_table(
        ["rank", "host", "local rank", "gpu", "backend", "device", "status", "time", "error"],
        [[r["rank"], r["host"], r["local_rank"], r["gpu"] or "-", r["backend"] or "-",
          r["device"] or "-", r["status"], f"{r['elapsed_s']:.1f} s", r["error"] or ""]
         for r in rep["ranks"]]), ""]
    notes = [f"- rank {r['rank']}: {n}" for r in rep["ranks"] for n in r["notes"]]
    if notes:
        out += notes + [""]
    if rep["outliers"]:
        out += ["## Outliers", ""]
        out += [f"- **rank {o['rank']} ({o['host']}, {o['device']})**: {o['roof']} "
                f"{_si(o['measured'])} is {o['vs_peers']:.0%} of its peers' median "
                f"{_si(o['peer_median'])}" for o in rep["outliers"]] + [""]
    else:
        out += ["No outliers: every device is within the margin of its peers' median "
                "(or has no peer of the same name).", ""]
    by_rank: dict[int, list[dict[str, Any]]] = {}
    for row in rep["comparison"]:
        by_rank.setdefault(row["rank"], []).append(row)
    for r, rows in sorted(by_rank.items()):
        out += [f"## Rank {r}: {rows[0]['device']} on {rows[0]['host']}", "", md_table(
            ["roof", "kind", "level/precision", "measured", "datasheet", "ratio",
             "vs peers", "outlier"],
            [[x["roof"], x["kind"], x["key"], _si(x["measured"], x["unit"]),
              _si(x["datasheet"], x["unit"]),
              f"{x['ratio']:.1%}" if x["ratio"] else "- (no datasheet figure)",
              f"{x['vs_peers']:.1%} of {x['peers']}" if x["peers"] else "- (no peer)",
              "**yes**" if x["outlier"] else ""] for x in rows]), ""]
    ic_ = rep["interconnect"]
    out += ["## Interconnect (MPI)", ""]
    if ic_["measurements"]:
        for m in ic_["measurements"]:
            out += [f"### MPI {m['op']} over {m['ranks']} ranks "
                    f"({', '.join(m['info'].get('hosts', []))})", "", md_table(
                        ["bytes", "median time", "cv", "algbw", "busbw"],
                        [[p["bytes"], f"{statistics.median(p['samples_s']) * 1e6:.1f} us",
                          f"{_cv(p['samples_s']):.1%}", _si(p["algbw"], "B/s"),
                          _si(p["busbw"], "B/s")] for p in m["points"]]), ""]
        for roof in ic_["roofs"]:
            ev = roof["evidence"]
            out.append(f"- roof **{roof['name']}** ({roof['level']}): {_si(roof['value'], 'B/s')}"
                       f" at {ev['best_size_bytes']} B, cv {ev.get('cv_at_best', 0):.1%}"
                       f" ({_si(ev.get('busbw_at_largest_Bps'), 'B/s')} at the largest size,"
                       f" {ev.get('largest_size_bytes')} B)"
                       + ("".join(f"; {f}" for f in ev.get("flags", []))))
        out.append("- busbw = algbw x 2(n-1)/n for all-reduce (nccl-tests); p2p = bytes / "
                   "(round trip / 2)")
    if ic_["note"]:
        out.append(f"- {ic_['note']}")
    return "\n".join(out) + "\n"


def _cv(xs: list[float]) -> float:
    return statistics.stdev(xs) / statistics.fmean(xs) if len(xs) > 1 else 0.0


def fleet_plot(rep: dict[str, Any]) -> bytes | None:
    """Every device's measured roofs on one log-log chart, one colour per rank."""
    import io

    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    sets = [(r["rank"], r["host"], RoofSet.from_dict(r["roofs"])) for r in rep["ranks"]
            if r["status"] == "ok" and r["roofs"]]
    links = [Roof.from_dict(d) for d in rep["interconnect"]["roofs"]]
    if not sets and not links:
        return None
    fig, ax = plt.subplots(figsize=(9, 6))
    x = np.logspace(-3, 4, 300)
    colors = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    styles = ["-", "--", "-.", ":"]
    ymax = 1.0
    for i, (rank, host, rs) in enumerate(sets):
        col = colors[i % len(colors)]
        mem = rs.memory("dram", "measured")
        comps = sorted({r.precision for r in rs.roofs if r.kind == "compute"
                        and r.source == "measured"})
        if mem is not None and not comps:  # bandwidth only: draw the slope alone
            ax.plot(x, mem.value * x, "-", color=col, lw=1.6,
                    label=f"rank {rank} {host}: {rs.device} {mem.level}")
        for j, prec in enumerate(comps):
            c = rs.compute(prec, "measured")
            if c is None:
                continue
            y = np.minimum(c.value, mem.value * x) if mem else np.full_like(x, c.value)
            ymax = max(ymax, c.value)
            ax.plot(x, y, styles[j % len(styles)], color=col, lw=1.6,
                    label=f"rank {rank} {host}: {rs.device} {prec}")
    for lk in links:
        ax.plot(x, lk.value * x, ":", color="0.3", lw=1.2,
                label=f"link {lk.name} {_si(lk.value, 'B/s')}")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_ylim(top=ymax * 3, bottom=max(ymax * 1e-5, 1.0))
    ax.set_xlabel("arithmetic intensity (FLOP/byte)")
    ax.set_ylabel("attainable FLOP/s")
    ax.set_title(f"Fleet roofs: {len(sets)} device(s), measured")
    ax.grid(True, which="both", alpha=0.3)
    if ax.get_legend_handles_labels()[0]:
        ax.legend(fontsize=7, loc="lower right")
    buf = io.BytesIO()
    fig.tight_layout()
    fig.savefig(buf, format="png", dpi=110)
    plt.close(fig)
    return buf.getvalue()


def summary_text(rep: dict[str, Any], out: Path) -> str:
    lines = [f"fleet: {rep['world_size']} rank(s), report in {out}/fleet.md"]
    for r in rep["ranks"]:
        lines.append(f"  rank {r['rank']} {r['host']}: {r['status']} {r['device'] or ''} "
                     f"{r['error'] or ''}".rstrip())
    for roof in rep["interconnect"]["roofs"]:
        flags = roof["evidence"].get("flags", [])
        lines.append(f"  link {roof['name']}: {_si(roof['value'], 'B/s')}"
                     + (f" ({'; '.join(flags)})" if flags else ""))
    if rep["interconnect"]["note"]:
        lines.append(f"  {rep['interconnect']['note']}")
    for o in rep["outliers"]:
        lines.append(f"  OUTLIER rank {o['rank']} {o['host']}: {o['roof']} at "
                     f"{o['vs_peers']:.0%} of peers")
    return "\n".join(lines)
