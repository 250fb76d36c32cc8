"""Bounded messaging between ranks: every wait polls against a deadline, so that none can hang.

A blocking collective that cannot be polled runs under ``watchdog`` instead, which aborts the
job when it outlives its deadline."""

from __future__ import annotations

import contextlib
import sys
import threading
import time
from collections.abc import Iterator
from typing import Any, NoReturn

TAG_HELLO, TAG_VERDICT, TAG_TOKEN, TAG_RESULT, TAG_LINKS, TAG_DONE = 101, 102, 103, 104, 105, 106
POLL_S = 0.01  # sleep between polls: a waiting rank must not steal a core from a calibrating one


class FleetTimeout(RuntimeError):
    """A peer did not answer within the deadline."""


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


def abort_job(comm: Any, why: str) -> NoReturn:
    """Print why on stderr and abort every rank: the only way out once a peer is hung."""
    print(f"roofbench fleet: rank {comm.Get_rank()}: {why}; aborting the job", file=sys.stderr,
          flush=True)
    comm.Abort(124)
    raise SystemExit(124)  # not reached: Abort ends the process


def wait_request(req: Any, timeout: float, comm: Any, what: str) -> None:
    """Wait for a posted send to be delivered, aborting the job past ``timeout``."""
    end = time.monotonic() + timeout
    while not req.Test():
        if time.monotonic() > end:
            abort_job(comm, f"{what} did not complete within {timeout:g} s")
        time.sleep(POLL_S)
