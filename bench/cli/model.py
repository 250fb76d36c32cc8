"""`roofbench model SCRIPT.py [--entry NAME] [--compile] [--out DIR]`: a PyTorch (or JAX)
program of one's own, every op placed on this device's roofs (bench/profile/torch_program.py).

SCRIPT.py defines a function (``--entry``, default ``program``) of no arguments that
returns ``(fn_or_module, args)`` or ``(fn_or_module, args, kwargs)``; the command profiles
``fn(*args, **kwargs)`` under ``torch.no_grad()`` (inference) and writes results.json,
profile.md and roofline.png to ``--out`` (default results/<device>/<UTC stamp>-model-<name>
under $ROOFBENCH_HOME, else the working directory).
"""

from __future__ import annotations

import argparse
import contextlib
import statistics
import sys
from pathlib import Path
from typing import Any

from roofbench.boundary import (
    EXIT_FAILED,
    OsExitCalled,
    deferred_stops,
    os_exit_raises,
    signal_name,
)
from roofbench.errors_text import first_line
from roofbench.paths import home

from ..errors import UserError
from ..measure.caller_settings import keeping
from ..measure.user_code import file_module
from ..results import make_run_dir, utc_stamp
from .argtypes import checked, out_folder


def load_entry(script: str, entry: str) -> tuple[Any, tuple[Any, ...], dict[str, Any]]:
    """Import SCRIPT.py and call its entry: (fn, args, kwargs), or a one-line UserError."""
    path = Path(script)
    mod, loader = file_module(path, script, f"roofbench_model_{path.stem}")
    sys.path.insert(0, str(path.resolve().parent))
    try:
        with os_exit_raises():
            loader.exec_module(mod)
    except OsExitCalled as e:  # os._exit would end roofbench at once, without a word
        raise UserError(f"{script} called os._exit({e.code!r}) on import") from None
    except SystemExit as e:  # never passed on as roofbench's own exit code
        raise UserError(f"{script} called sys.exit({e.code!r}) on import") from None
    except Exception as e:
        raise UserError(f"{script} failed to import: {first_line(e)}") from None
    finally:
        sys.path.pop(0)
    fn = getattr(mod, entry, None)
    if not callable(fn):
        raise UserError(f"{script} defines no function {entry!r} (--entry names the function "
                        "that returns (fn_or_module, args[, kwargs]))")
    try:
        with os_exit_raises():
            got = fn()
    except OsExitCalled as e:
        raise UserError(f"{script}: {entry}() called os._exit({e.code!r})") from None
    except SystemExit as e:
        raise UserError(f"{script}: {entry}() called sys.exit({e.code!r})") from None
    except Exception as e:
        raise UserError(f"{script}: {entry}() raised {first_line(e)}") from None
    if not (isinstance(got, tuple) and len(got) in (2, 3) and callable(got[0])
            and isinstance(got[1], (tuple, list))
            and (len(got) == 2 or isinstance(got[2], dict))):
        raise UserError(f"{script}: {entry}() must return (fn_or_module, args) or "
                        f"(fn_or_module, args, kwargs), got {type(got).__name__}")
    return got[0], tuple(got[1]), dict(got[2]) if len(got) == 3 else {}


def cmd_model(args: argparse.Namespace) -> int:
    from roofbench.bench.profile.torch_program import run_profile

    from ..results import check_out_folder

    # every setting before the script is imported or anything profiled
    out = Path(args.out).absolute() if args.out else None
    if out is not None:
        check_out_folder(out)
    if args.roofs:
        from roofbench.roofs.files import RoofsFileError, load_roofs

        try:
            load_roofs(args.roofs)
        except RoofsFileError as e:
            raise UserError(f"--roofs: {first_line(e, typed=False)}") from None
    fn, fargs, fkwargs = load_entry(args.script, args.entry)
    if args.threads:
        import torch

        torch.set_num_threads(args.threads)
    name = f"{Path(args.script).stem}.{args.entry}"
    grad: Any = contextlib.nullcontext()
    if "torch" in sys.modules:
        grad = sys.modules["torch"].no_grad()
    try:
        with grad, os_exit_raises():  # the program's keywords as a dict: any name reaches it
            prof = run_profile(fn, fargs, fkwargs, roofs=args.roofs, compile=args.compile,
                               name=name)
    except OsExitCalled as e:  # the program's own end, said; never roofbench's exit code
        raise UserError(f"the program {name} called os._exit({e.code!r}): nothing was "
                        "written", code=EXIT_FAILED) from None
    if args.on:
        from roofbench.roofs.files import RoofsFileError

        try:
            proj = prof.project(args.on)
        except RoofsFileError as e:
            raise UserError(f"--on: {e}") from None
        print(f"projected onto {proj.device} ({proj.mark}): program bound "
              f"{proj.program_s:.3g} s, {len(proj.ops)} ops")
    if args.threads:  # the count itself is the profile's torch_threads, read while timing
        prof.extra["threads"] = args.threads
    if out is None:
        out = make_run_dir(home() / "results", prof.device,
                           f"{utc_stamp()}-model-{Path(args.script).stem}")
    paths = write_stoppable(prof, out)
    p = prof.program
    print(
        f"{name}: {len(prof.recording.calls)} calls, {len(prof.ops)} distinct ops; "
        f"program {p.declaration.flops} FLOPs, {p.declaration.bytes.get('dram', 0)} B "
        f"({p.declaration.ai.get('dram', 0):.3g} FLOP/B), "
        f"median {p.measurement.median_s or 0:.3g} s, "
        f"ops {prof.ops_s:.3g} s, overhead {prof.overhead_s:.3g} s"
    )
    same, spread = prof.extra.get("ops_over_program"), prof.extra.get("ops_over_program_spread")
    if same is not None:  # both sides from each timed run: it holds on a busy machine
        over = prof.extra.get("profiler_overhead_s")
        print(f"ops over the program, same run: median {same:.3f}"
              + (f" [{spread[0]:.3f}, {spread[1]:.3f}] over "
                 f"{len(prof.extra.get('ops_over_program_runs') or [])} runs" if spread else "")
              + (f"; profiler overhead taken out: {statistics.median(over):.3g} s per run"
                 if over else "")
              + f" (ops alone, data warm: {prof.extra.get('ops_alone_s', 0.0):.3g} s)")
    if prof.compiled is not None and prof.compiled.case is not None:
        c = prof.compiled.case
        print(
            f"compiled: {c.declaration.ai.get('dram', 0):.3g} FLOP/B, "
            f"median {c.measurement.median_s or 0:.3g} s, "
            f"{len(prof.compiled.kernels)} generated kernel(s)"
        )
    elif prof.compiled is not None:
        print(f"compiled: failed ({prof.compiled.error})")
    for path in paths:
        print(f"wrote {path}")
    return 0


def write_stoppable(prof: Any, out: Path) -> list[Path]:
    """The profile written into ``out`` (or its first free sibling: ``claim_folder``). A stop
    (Ctrl-C, SIGTERM, SIGHUP) while it is claimed or written is recorded there before it
    ends the command: results.json with what was measured, ``interrupted`` and the phase
    ("report"); the claim and that record are never cut by a second stop (held until done)."""
    from roofbench.bench.profile.report import write_profile

    from ..results import claim_folder

    got: Path | None = None
    try:
        with deferred_stops():  # a folder claimed is a folder that gets a record: a stop
            got = claim_folder(out)  # held here is delivered once ``got`` is known
        if got != out:
            print(f"roofbench: {out} holds a run already: this profile writes {got}",
                  file=sys.stderr)
        return write_profile(prof, got)
    except KeyboardInterrupt as e:
        if got is not None:
            with deferred_stops():
                record_stop(prof, got, signal_name(e))
        raise


def record_stop(prof: Any, folder: Path, signame: str) -> None:
    """results.json in ``folder`` says the run was stopped by ``signame`` in its report:
    the file the report wrote first, marked; written whole when the stop came before it."""
    from roofbench.bench.profile.report import write_profile

    from roofbench.records import RunStop

    from ..results import load_run, save_run

    if not (folder / "results.json").is_file():
        with contextlib.suppress(KeyboardInterrupt):  # its own stop handling, once more
            write_profile(prof, folder)
    run = load_run(folder)
    run.interrupted = True
    run.stop = RunStop(cause="signal", detail=signame, phase="report")
    save_run(run, folder)


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("model", help="profile a PyTorch/JAX program op by op on this "
                                     "device's roofs")
    p.add_argument("script", metavar="SCRIPT.py",
                   help="defines ENTRY() -> (fn_or_module, args[, kwargs])")
    p.add_argument("--entry", default="program", metavar="NAME",
                   help="the function of SCRIPT.py to call (default: program)")
    p.add_argument("--compile", action="store_true",
                   help="also run it under torch.compile: eager -> compiled per fusion")
    out_folder(p, "model-<script>")
    p.add_argument("--roofs", metavar="FILE", help="roofs file to place it under (default: "
                                                   "this device's calibration cache)")
    p.add_argument("--on", metavar="ROOFS", help="also project the counts onto this roofs "
                                                 "file (another device's): lower bounds")
    p.add_argument("--threads", type=checked(int, lambda v: v >= 1, "must be >= 1",
                                             "a whole number"), metavar="N",
                   help="torch intra-op threads (default: torch's)")
    # the caller's threads, dtype, grad mode, RNG, flags and environment as found after
    p.set_defaults(func=keeping(cmd_model))
