"""The one error boundary of every command: whatever ends it becomes one line and an exit code.

``guarded(fn)`` runs a command and turns what can end it into one line on stderr and a
documented exit code (``EXIT_CODES``, README "Exit codes"), never a traceback: a refusal of
the input (``Refusal`` and its subclasses), anything the operating system refuses (OSError:
a full disk, a file-size limit, permissions, a path that is a folder or under a file), memory
exhausted, input nested too deep, text the terminal cannot encode, and a stop (Ctrl-C,
SIGTERM, SIGHUP) at any moment; anything else is a bug, said as one "internal error" line
(exit 70; ``ROOFBENCH_DEBUG=1`` prints its traceback). ``stop_signals()`` makes SIGTERM and
SIGHUP stop the process as Ctrl-C does, so that whoever runs (a session) saves what it has.

Part of the shared root: importable by any command, the measure API and the pytest plugin.
"""

from __future__ import annotations

import contextlib
import errno
import os
import signal
import sys
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

EXIT_OK = 0
EXIT_FAILED = 1  # the command ran, and something it measured failed (a case invalid or raised)
EXIT_USAGE = 2  # bad input or settings, refused before any work: nothing written
EXIT_OS = 3  # the operating system refused a read or a write (disk full, permissions, ...)
EXIT_MEMORY = 4  # out of memory (a limit such as `ulimit -v`, or an input far too large)
EXIT_INTERNAL = 70  # a bug in roofbench (ROOFBENCH_DEBUG=1 shows the traceback)
EXIT_TIMEOUT = 124  # a fleet rank or a wait ran past its bound
EXIT_STOPPED = 130  # stopped by Ctrl-C, SIGTERM or SIGHUP: what had finished is saved

EXIT_CODES = {
    EXIT_OK: "done",
    EXIT_FAILED: "done, and a case failed validation or raised",
    EXIT_USAGE: "bad input or settings (one line says which), nothing was run",
    EXIT_OS: "a file could not be read or written (one line names it and the cause)",
    EXIT_MEMORY: "out of memory",
    EXIT_INTERNAL: "a bug in roofbench: one line; ROOFBENCH_DEBUG=1 prints the traceback",
    EXIT_TIMEOUT: "a rank or a bounded wait timed out",
    EXIT_STOPPED: "stopped by a signal; the finished work is saved and marked interrupted",
}


class Refusal(Exception):
    """An error a user can cause and fix: printed as one line, exit code ``code``."""

    code = EXIT_USAGE

    def __init__(self, message: str, code: int | None = None) -> None:
        super().__init__(message)
        if code is not None:
            self.code = code


class Stopped(KeyboardInterrupt):
    """A stop signal (SIGTERM, SIGHUP) raised in the main thread, as Ctrl-C raises
    KeyboardInterrupt; ``signame`` says which."""

    def __init__(self, signame: str) -> None:
        super().__init__(signame)
        self.signame = signame


def signal_name(e: BaseException) -> str:
    """'SIGTERM' for a Stopped, 'SIGINT' for a plain KeyboardInterrupt (Ctrl-C)."""
    return e.signame if isinstance(e, Stopped) else "SIGINT"


@dataclass(frozen=True)
class Outcome:
    """What ended a command, said once: its one line and its exit code."""

    line: str
    code: int


def os_line(e: OSError) -> str:
    """'cannot write PATH: No space left on device (ENOSPC)': the cause and the path."""
    code = errno.errorcode.get(e.errno or 0, "")
    cause = (e.strerror or str(e) or type(e).__name__) + (f" ({code})" if code else "")
    paths = [p for p in (e.filename, e.filename2) if p]
    where = " -> ".join(os.fsdecode(p) if isinstance(p, bytes) else str(p) for p in paths)
    return f"{where}: {cause}" if where else cause


def outcome(e: BaseException) -> Outcome:
    """The one line and exit code of what ended a command (see the module doc)."""
    from .errors_text import first_line

    if isinstance(e, KeyboardInterrupt):
        return Outcome(f"stopped by {signal_name(e)}", EXIT_STOPPED)
    if isinstance(e, Refusal):
        return Outcome(first_line(e, typed=False), e.code)
    if isinstance(e, OSError) and (e.errno == errno.ENOMEM or (
            e.errno is None and not e.filename and address_space_limited())):
        # mmap or a thread refused, or a shared library that could not be mapped (the loader
        # says no errno) under `ulimit -v`: memory, not a file
        return Outcome(f"out of memory ({os_line(e)}; a memory limit such as `ulimit -v`?)",
                       EXIT_MEMORY)
    if isinstance(e, OSError):
        return Outcome(os_line(e), EXIT_OS)
    if isinstance(e, MemoryError):
        return Outcome("out of memory (a memory limit such as `ulimit -v`, or an input far "
                       "too large)", EXIT_MEMORY)
    if isinstance(e, RecursionError):
        return Outcome("input nested too deeply to read", EXIT_USAGE)
    if isinstance(e, UnicodeError):
        return Outcome(f"text this terminal or file system cannot encode ({first_line(e)}); "
                       "set PYTHONIOENCODING=utf-8", EXIT_OS)
    return Outcome(f"internal error: {first_line(e)} (a bug in roofbench; ROOFBENCH_DEBUG=1 "
                   "shows the traceback)", EXIT_INTERNAL)


def address_space_limited() -> bool:
    """Whether this process runs under an address-space limit (``ulimit -v``)."""
    try:
        import resource

        soft = resource.getrlimit(resource.RLIMIT_AS)[0]
    except (ImportError, OSError, ValueError):
        return False
    return soft != resource.RLIM_INFINITY


def safe_streams() -> None:
    """stdout and stderr replace what their encoding cannot write (a non-ASCII path under
    LC_ALL=C, PYTHONIOENCODING=latin-1) instead of raising halfway through a line."""
    for stream in (sys.stdout, sys.stderr):
        reconf = getattr(stream, "reconfigure", None)
        if reconf is not None:
            with contextlib.suppress(ValueError, OSError):
                reconf(errors="backslashreplace")


def say(line: str, prog: str = "roofbench") -> None:
    """One line on stderr, whatever the stream can encode."""
    with contextlib.suppress(OSError, ValueError):
        print(f"{prog}: {line}", file=sys.stderr, flush=True)


STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


def stop_handler(signum: int, frame: object) -> None:
    """The one handler of a stop (SIGINT, SIGTERM, SIGHUP) in every phase of every entry
    point (the command line from its first import, ``model``, the pytest plug-in): Ctrl-C
    raises KeyboardInterrupt as Python's own handler does, SIGTERM and SIGHUP ``Stopped`` (a
    KeyboardInterrupt); a stop that lands in Python code called back from C is sent again a
    moment later (raised there, it would be printed and lost)."""
    if _in_c_callback(frame):
        _again(signum)
        return
    if signum == signal.SIGINT:
        raise KeyboardInterrupt
    raise Stopped(signal.Signals(signum).name)


def install_stop_handler() -> dict[int, Any]:
    """``stop_handler`` for SIGTERM and SIGHUP, and for SIGINT where Python's own handler has
    it (a shell that started us in its background gave SIGINT ignored: left so); the
    handlers it replaced. Main thread only (elsewhere: nothing, {})."""
    if threading.current_thread() is not threading.main_thread():
        return {}
    stops = [signal.SIGTERM, signal.SIGHUP]
    if signal.getsignal(signal.SIGINT) in (signal.default_int_handler, stop_handler):
        stops.append(signal.SIGINT)
    return {s: signal.signal(s, stop_handler) for s in stops}


@contextlib.contextmanager
def stop_signals(late: bool = False) -> Iterator[None]:
    """``stop_handler`` while inside (``install_stop_handler``), the handlers found put back
    on the way out. Outside the main thread, nothing changes. ``late``: on the way out, a
    signal whose handler was the default (or this one, installed early by ``python -m``)
    exits 130 at once (the streams flushed) instead of killing the process or raising where
    nothing can catch it (an atexit callback)."""
    old = install_stop_handler()
    try:
        yield
    finally:
        for s, h in old.items():
            early = h in (signal.SIG_DFL, stop_handler)
            signal.signal(s, _exit_stopped if late and early else h)


@contextlib.contextmanager
def deferred_stops() -> Iterator[None]:
    """Stop signals held while inside and delivered on the way out: a step that records a
    stop (a marker claimed, the record of a stopped run written) is never cut in half by a
    second one. Held by a Python-level handler that notes them, not by the thread's signal
    mask: a process-directed signal goes to any thread that does not block it (torch's and
    Numba's pools), and Python runs its handler in the main thread all the same. Main
    thread only; elsewhere nothing is held."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    held: list[int] = []

    def hold(signum: int, frame: object) -> None:
        held.append(signum)

    before: dict[int, Any] = {}
    for s in STOP_SIGNALS:
        h = signal.getsignal(s)
        if h is None or h == signal.SIG_IGN:  # not ours to hold: a C handler, or ignored
            continue
        before[s] = signal.signal(s, hold)
    try:
        yield
    finally:
        for signum, h in before.items():
            signal.signal(signum, h)
        if held:  # delivered once, as a blocked signal is, to the handler now in place
            signal.raise_signal(held[0])


class OsExitCalled(BaseException):
    """``os._exit(code)`` called by the user's code inside ``os_exit_raises``."""

    def __init__(self, code: Any) -> None:
        super().__init__(code)
        self.code = code


def _os_exit_raises(code: Any) -> None:
    raise OsExitCalled(code)


@contextlib.contextmanager
def os_exit_raises() -> Iterator[None]:
    """``os._exit`` raises ``OsExitCalled`` while inside: user code (a plug-in's import, a
    program ``model`` profiles) that calls it would end roofbench at once, without a word or
    its record; the caller says what happened in one line instead."""
    real = os._exit
    os._exit = _os_exit_raises  # type: ignore[assignment]
    try:
        yield
    finally:
        os._exit = real


# Python code that C calls back (ctypes): an exception raised in it is printed ("Exception
# ignored on calling ctypes callback function") and dropped. llvmlite's object-cache callback
# runs while Numba compiles (the CPU probes, a case): a SIGTERM that lands there is sent again.
_C_CALLBACKS = ("/llvmlite/binding/",)


def _in_c_callback(frame: object) -> bool:
    code = getattr(frame, "f_code", None)
    name = str(getattr(code, "co_filename", "")).replace("\\", "/")
    return any(part in name for part in _C_CALLBACKS)


def _again(signum: int) -> None:
    """The signal once more, a moment later (out of the callback by then)."""
    t = threading.Timer(0.02, os.kill, (os.getpid(), signum))
    t.daemon = True
    t.start()


def _exit_stopped(signum: int, frame: object) -> None:
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(Exception):
            stream.flush()
    os._exit(EXIT_STOPPED)


def _forget_interrupt() -> None:
    """CPython 3.11 marks a KeyboardInterrupt that passed through exec() of a string (as
    dataclasses does while a module is imported) as unhandled for good, and at exit kills the
    process by SIGINT (-2) whatever code it exits with; running a string again clears the mark."""
    exec("None")  # noqa: S102


def guarded(fn: Callable[[], int], prog: str = "roofbench", *, late_stop: bool = False) -> int:
    """Run a command inside the boundary: its exit code, or the one line and code of what
    ended it (``outcome``). ``late_stop`` (the process's own command, not a call in a test):
    a SIGTERM or SIGHUP after the command returned, while the interpreter exits, still exits
    130 (the work is saved), never dies by the signal (143)."""
    safe_streams()
    with stop_signals(late=late_stop):
        code = _guarded(fn, prog)
        if late_stop:  # the process's own command: never kept alive by a thread left over
            leave_threads(code, prog)
        return code


def _guarded(fn: Callable[[], int], prog: str) -> int:
    try:
        prepare_environment()
        return int(fn() or 0)
    except (KeyboardInterrupt, Exception) as e:  # SystemExit (argparse, --help) passes
        if not isinstance(e, (KeyboardInterrupt, Refusal, OSError, MemoryError,
                              RecursionError, UnicodeError)) and os.environ.get("ROOFBENCH_DEBUG"):
            import traceback

            traceback.print_exc()
        if isinstance(e, KeyboardInterrupt):
            _forget_interrupt()
        try:
            o = outcome(e)
        except KeyboardInterrupt:  # a second Ctrl-C while the first is said
            _forget_interrupt()
            o = Outcome("stopped by SIGINT", EXIT_STOPPED)
        say(("error: " if o.code not in (EXIT_STOPPED,) else "") + o.line, prog)
        return o.code


THREADS_GRACE_S = 2.0  # what threads still running after a command get to end by themselves


def leave_threads(code: int, prog: str = "roofbench") -> None:
    """After the process's own command: threads that are not daemons (a program ``model``
    profiled can leave one) would keep the interpreter from ever exiting. Given a moment to
    end, those still running are said in one line, and the process exits ``code`` now (its
    files are written; only the interpreter's own clean-up is skipped)."""
    left = [t for t in threading.enumerate()
            if t is not threading.main_thread() and not t.daemon and t.is_alive()
            # an idle pool's workers: concurrent.futures ends them itself at exit
            and not t.name.startswith("ThreadPoolExecutor-")]
    if not left:
        return
    import time

    end = time.monotonic() + THREADS_GRACE_S
    try:
        for t in left:
            t.join(max(0.0, end - time.monotonic()))
    except KeyboardInterrupt:  # a stop while they are given their moment: no more waiting
        code = EXIT_STOPPED
    left = [t for t in left if t.is_alive()]
    if not left:
        return
    names = ", ".join(t.name for t in left[:5]) + (", ..." if len(left) > 5 else "")
    say(f"note: {len(left)} thread(s) still running after the command ({names}): exiting "
        "without waiting for them", prog)
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(Exception):
            stream.flush()
    os._exit(code)


def die_with_parent() -> None:
    """In a child (``preexec_fn``): the kernel kills it when its parent dies, even by SIGKILL,
    so that no probe keeps running re-parented to PID 1 (Linux; elsewhere nothing)."""
    if not sys.platform.startswith("linux"):
        return
    import ctypes

    pr_set_pdeathsig = 1
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL(None, use_errno=True).prctl(pr_set_pdeathsig, int(signal.SIGKILL), 0, 0, 0)


# -- the user's environment, before Numba is imported -------------------------------------

MAX_NUMBA_THREADS = 1024  # past this Numba's thread pool cannot start (99999: it hangs)
_NOTED: list[str] = []


def prepare_environment() -> None:
    """Settings Numba reads at import, checked before it is imported: ``NUMBA_NUM_THREADS`` a
    whole number in [1, 1024] (else a Refusal, one line); and a cache Numba can write (a
    read-only install and a read-only home leave it none, and every ``cache=True`` function
    fails): ``NUMBA_CACHE_DIR`` set to a private folder under the temporary directory, said
    once. Idempotent; nothing changes when the install or the home is writable."""
    raw = os.environ.get("NUMBA_NUM_THREADS", "").strip()
    if raw:
        try:
            n = int(raw)
        except ValueError:
            raise Refusal(f"NUMBA_NUM_THREADS={raw!r} is not a whole number (unset it, or "
                          "give the threads to use)") from None
        if not 1 <= n <= MAX_NUMBA_THREADS:
            raise Refusal(f"NUMBA_NUM_THREADS={n}: give a number of threads from 1 to "
                          f"{MAX_NUMBA_THREADS}")
    moved = numba_cache_dir()
    if moved and moved not in _NOTED:
        _NOTED.append(moved)
        say(f"note: Numba's cache goes to {moved} (the install and the home folder are "
            "read-only)")


def _writable(path: str) -> bool:
    """Whether ``path`` can be written or made (its first existing ancestor writable)."""
    p = os.path.abspath(path)
    while not os.path.exists(p):
        parent = os.path.dirname(p)
        if parent == p:
            return False
        p = parent
    return os.path.isdir(p) and os.access(p, os.W_OK | os.X_OK)


def numba_cache_dir() -> str | None:
    """Where Numba's cache goes when neither the install (its in-tree ``__pycache__``) nor
    the user's cache folder can be written: a private temporary folder, set as
    ``NUMBA_CACHE_DIR`` and returned; None when nothing had to change."""
    given = os.environ.get("NUMBA_CACHE_DIR", "").strip()
    if given:
        if _writable(given):
            return None
    else:
        import importlib.util

        spec = importlib.util.find_spec("roofbench.kernels")
        tree = os.path.dirname(spec.origin) if spec and spec.origin else ""
        xdg = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"),
                                                                ".cache")
        if (tree and _writable(os.path.join(tree, "__pycache__"))) or _writable(
                os.path.join(xdg, "numba")):
            return None
    import tempfile

    folder = os.path.join(tempfile.gettempdir(), f"roofbench-numba-{os.getuid()}")
    try:
        os.makedirs(folder, mode=0o700, exist_ok=True)
    except OSError:
        return None  # nowhere to write: Numba says so itself
    os.environ["NUMBA_CACHE_DIR"] = folder
    return folder
