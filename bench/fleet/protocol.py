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

While it gathers, rank 0 keeps ``fleet-progress.json`` and each arrived rank's roofs file on
disk: a rank killed by a signal makes mpirun abort the whole job, and what had arrived stays,
with the ranks it was waiting for (``lost`` when rank 0 was stopped itself).

A rank that never answers is recorded as timed out, the report is written from the others, and
rank 0 then aborts the job so that the hung rank cannot keep ``mpirun`` alive.
"""

from __future__ import annotations

import os
import socket
import sys
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from roofbench.bench.fleet.outliers import build_report, exit_code
from roofbench.bench.fleet.rank import measure_links, measure_rank
from roofbench.roofs.probes import links as ic

from roofbench.boundary import signal_name

from ..errors import UserError
from .environment import env_local_rank, import_mpi, launcher, roofbench_version
from .fleet_records import FleetConfig, Place, RankResult
from .messaging import (
    TAG_DONE,
    TAG_HELLO,
    TAG_LINKS,
    TAG_RESULT,
    TAG_TOKEN,
    TAG_VERDICT,
    FleetTimeout,
    Messenger,
    abort_job,
    wait_request,
)
from .output import summary_text, write_progress, write_report
from .plan import fill_local_ranks, prepare_out, turn_order, version_problem

START_S = 30.0  # the least the handshake waits for a rank (see _Rank.T_start)


def run_fleet(cfg: FleetConfig, opener: Callable[[str], Any] | None = None) -> int:
    """Entry point on every rank. Returns the exit code (same on every rank when all answer)."""
    MPI = import_mpi()
    comm = MPI.COMM_WORLD
    try:
        return _run(MPI, comm, cfg, opener)
    except FleetTimeout as e:
        abort_job(comm, str(e))
        return 124


@dataclass
class _Rank:
    """This rank's side of the run: its communicator, its messenger and the run's settings."""

    comm: Any
    msg: Messenger
    cfg: FleetConfig
    rank: int
    size: int

    @property
    def T(self) -> float:  # every single wait is bounded by this (or a multiple of it)
        return self.cfg.timeout

    @property
    def T_start(self) -> float:
        """The handshake's bound: ranks reach it after their own start-up (an interpreter and
        its imports, seconds apart on a busy node), which a short --timeout meant for a hung
        probe must not call a hang."""
        return max(self.cfg.timeout, START_S)

    def peers(self) -> range:
        return range(1, self.size)


@dataclass
class _Handshake:
    """What the handshake settled: every rank's place and, on rank 0, the silent ranks and the
    output folder."""

    places: dict[int, Place]
    missing: dict[int, str] = field(default_factory=dict)  # rank -> why it never said hello
    out_dir: Path | None = None


def _run(MPI: Any, comm: Any, cfg: FleetConfig, opener: Callable[[str], Any] | None) -> int:
    me = _Rank(comm=comm, msg=Messenger(comm), cfg=cfg, rank=comm.Get_rank(),
               size=comm.Get_size())
    place = _my_place(MPI, me)
    hs = _handshake_coordinator(me, place) if me.rank == 0 else _handshake_peer(me, place)
    if hs is None:
        return 2  # rank 0 prints the one message for everybody
    result, pending = _calibrate_step(me, hs, opener)
    if me.rank == 0:
        results = _gather(me, hs, result)
        alive = all(res.status != "timeout" for res in results.values())
        do_links, link_note = _links_verdict(me, alive)
        if do_links and hs.out_dir is not None:
            # every arrived rank's roofs file was written as it arrived (_gather)
            write_progress(hs.out_dir, [asdict(results[r]) for r in sorted(results)], [],
                           "links", rewrite_roofs=False)
    else:
        pending.append(me.msg.post(result, 0, TAG_RESULT))
        do_links, link_note = _links_go(me, hs), ""
    links: list[ic.LinkMeasurement] = measure_links(comm, cfg) if do_links else []

    for req in pending:  # our messages must be delivered before we may exit
        wait_request(req, me.T, comm, "delivering results to rank 0")
    if me.rank != 0:
        return _final_status(me)
    return _report(me, hs, results, links, link_note, alive)


def _my_place(MPI: Any, me: _Rank) -> Place:
    lr, lr_src = env_local_rank()
    return Place(rank=me.rank, size=me.size,
                 host=MPI.Get_processor_name() or socket.gethostname(), pid=os.getpid(),
                 version=roofbench_version(), python=sys.version.split()[0],
                 launcher=launcher(), local_rank=lr, local_rank_source=lr_src)


# 1. handshake ---------------------------------------------------------------------------------


def _handshake_coordinator(me: _Rank, place: Place) -> _Handshake:
    """Rank 0: hear every rank, check versions and the output folder, answer go / stop."""
    hs = _Handshake(places={0: place})
    for r in me.peers():
        try:
            hs.places[r] = me.msg.recv(r, TAG_HELLO, me.T_start, "handshake")
        except FleetTimeout as e:
            hs.missing[r] = str(e)
    fill_local_ranks(hs.places)
    stop = version_problem(hs.places)
    if stop is None:
        try:
            hs.out_dir = prepare_out(me.cfg.out)
        except UserError as e:
            stop = str(e)
    verdict = {"stop": stop, "places": hs.places, "missing": sorted(hs.missing)}
    for r in hs.places:
        if r != 0:
            me.msg.send(verdict, r, TAG_VERDICT, me.T_start, "handshake verdict")
    if stop:
        if hs.missing:  # a silent rank would never hear the verdict: take it down too
            print(f"roofbench: error: {stop}", file=sys.stderr, flush=True)
            me.comm.Abort(2)
        raise UserError(stop)
    return hs


def _handshake_peer(me: _Rank, place: Place) -> _Handshake | None:
    """Any other rank: say hello and wait for rank 0's verdict; None when told to stop."""
    try:
        me.msg.send(place, 0, TAG_HELLO, me.T_start, "handshake")
        # rank 0 answers once it heard every rank: allow for the slowest one's start-up
        verdict = me.msg.recv(0, TAG_VERDICT, me.T_start * me.size, "handshake verdict")
    except FleetTimeout as e:
        abort_job(me.comm, f"{e}; rank 0 is hung or dead")
    if verdict["stop"]:
        return None
    return _Handshake(places=verdict["places"])


# 2. calibrate ---------------------------------------------------------------------------------


def _calibrate_step(me: _Rank, hs: _Handshake,
                    opener: Callable[[str], Any] | None) -> tuple[RankResult, list[Any]]:
    """This rank's result, taking its turn on a shared host; and the turn tokens it posted."""
    place = hs.places[me.rank]
    if not me.cfg.calibrate:
        return RankResult(rank=me.rank, host=place.host, status="ok",
                          local_rank=place.local_rank,
                          notes=["calibration skipped (links only)"]), []
    turn = turn_order(hs.places, me.cfg.backend)
    before = turn.get(me.rank, [])
    notes: list[str] = []
    if before:  # wait for the previous rank on this host to finish (CPU backend)
        try:
            me.msg.recv(before[-1], TAG_TOKEN, me.T * len(before), "turn on shared host")
        except FleetTimeout as e:
            notes.append(f"measured concurrently with rank {before[-1]} ({e})")
    result = measure_rank(place, me.cfg, opener)
    result.notes += notes
    if before:
        result.notes.append(f"shares host {place.host} with rank(s) "
                            f"{', '.join(map(str, before))}: measured after them, in turn")
    after = [r for r, prev in turn.items() if prev and prev[-1] == me.rank]
    return result, [me.msg.post(True, r, TAG_TOKEN) for r in after]


# 3. gather ------------------------------------------------------------------------------------


def _gather(me: _Rank, hs: _Handshake, own: RankResult) -> dict[int, RankResult]:
    """Rank 0: every rank's result, a silent one recorded as timed out. Each result is on
    disk as it arrives (write_progress), so a job aborted meanwhile keeps what arrived."""
    results: dict[int, RankResult] = {0: own}
    out_dir = hs.out_dir
    assert out_dir is not None

    def record(state: str = "gathering", why: str = "") -> None:
        pending = [r for r in me.peers() if r not in results]
        write_progress(out_dir, [asdict(results[r]) for r in sorted(results)], pending,
                       state, why)

    record()
    try:
        for r in me.peers():
            if r in hs.missing:
                results[r] = RankResult(rank=r, host="?", status="timeout",
                                        error=hs.missing[r])
                continue
            # A peer may still be waiting for its turn on a shared host: allow for those.
            wait = me.T * (1 + len(turn_order(hs.places, me.cfg.backend).get(r, [])))
            try:
                results[r] = me.msg.recv(r, TAG_RESULT, wait, "calibration result")
            except FleetTimeout as e:
                results[r] = RankResult(rank=r, host=hs.places[r].host, status="timeout",
                                        local_rank=hs.places[r].local_rank, error=str(e))
            record()
    except KeyboardInterrupt as e:  # mpirun's SIGTERM when a peer died, or the user's Ctrl-C
        record("stopped", f"rank 0 stopped by {signal_name(e)} while waiting")
        raise
    return results


# 4. links -------------------------------------------------------------------------------------


def _links_verdict(me: _Rank, alive: bool) -> tuple[bool, str]:
    """Rank 0: whether the link probes run (told to every peer when all are alive), and why
    not."""
    do_links = me.cfg.links and alive and me.size > 1
    link_note = ""
    if not me.cfg.links:
        link_note = "MPI link probes skipped (--no-links)"
    elif me.size == 1:
        link_note = "one rank: no interconnect to measure (start with mpirun -n 2 or more)"
    elif not alive:
        link_note = "MPI link probes skipped: a rank did not report (see its error)"
    if alive:
        for r in me.peers():
            me.msg.send(do_links, r, TAG_LINKS, me.T, "link-probe go")
    return do_links, link_note


def _links_go(me: _Rank, hs: _Handshake) -> bool:
    """Any other rank: rank 0's word on the link probes."""
    # Rank 0 may still be calibrating and then waiting for the slowest peer.
    wait = me.T * (2 + len(hs.places))
    try:
        return bool(me.msg.recv(0, TAG_LINKS, wait, "link-probe go"))
    except FleetTimeout as e:
        abort_job(me.comm, f"{e}; rank 0 is hung or dead")


# 5. report ------------------------------------------------------------------------------------


def _final_status(me: _Rank) -> int:
    """Any other rank: the exit code rank 0 settled on."""
    try:
        code = me.msg.recv(0, TAG_DONE, me.T * 2, "final status")
    except FleetTimeout as e:
        abort_job(me.comm, f"{e}; rank 0 is hung or dead")
    return int(code)


def _report(me: _Rank, hs: _Handshake, results: dict[int, RankResult],
            links: list[ic.LinkMeasurement], link_note: str, alive: bool) -> int:
    """Rank 0: write the report, then tell every peer the exit code."""
    rep = build_report(me.cfg, hs.places, results, links, link_note)
    out_dir = hs.out_dir
    assert out_dir is not None
    try:
        write_report(rep, out_dir)
    except OSError as e:  # disk full, directory removed: tell the peers, then the user
        for r in me.peers():
            me.msg.send(2, r, TAG_DONE, me.T, "final status")
        raise UserError(f"cannot write the fleet report to {out_dir}: {e.strerror or e}") \
            from None
    code = exit_code(rep)
    print(summary_text(rep, out_dir))
    if not alive:
        # The report is safe on disk; a hung rank would keep mpirun alive forever.
        print("roofbench fleet: a rank did not answer; aborting the job so that it cannot "
              "hang (its error is in the report)", file=sys.stderr, flush=True)
        me.comm.Abort(1)
    for r in me.peers():
        me.msg.send(code, r, TAG_DONE, me.T, "final status")
    if code == 2:
        errs = "; ".join(f"rank {r.rank}: {r.error}" for r in results.values())
        raise UserError(f"no rank could calibrate ({errs}); report in {out_dir}")
    return code
