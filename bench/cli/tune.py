"""`roofbench tune SCRIPT --out DIR`: a kernel's configurations searched against its roof
(``roofbench.tune``, bench/tune/), its files written (results.json, tune.json, tune.md, the
cloud of configurations under the roof).

SCRIPT is a Python file (or an importable module) that defines ``TUNE``: a dict, or a function
returning one, of ``roofbench.tune``'s keywords plus ``build`` (configuration -> callable),
``space`` (a ``Space``, a dict of parameter -> values, or a list of configurations) and
``args`` (the callable's arguments)::

    import numpy as np
    a, out = np.ones(1 << 22, np.float32), np.empty(1 << 22, np.float32)
    def build(BLOCK):
        def scale(a, out):
            for i in range(0, a.size, BLOCK):
                np.multiply(a[i:i + BLOCK], 2.0, out=out[i:i + BLOCK])
        return scale
    TUNE = dict(build=build, space={"BLOCK": [1 << 12, 1 << 16, 1 << 20]}, args=(a, out),
                flops=a.size, reads=a, writes=out, output=out,
                reference=lambda a, out: 2.0 * a)

`roofbench tune --workload W [--variant V] [--dtype D] [--size N]` tunes a suite kernel instead:
its declared space (``Variant.tune``) on the CPU, the chosen configuration stored for this
device (bench/tune/suite.py, store.py), which `roofbench run` then runs.

The flags (``--target``, ``--budget``, ``--exhaustive``, ``--drop-at``, ``--order``,
``--roofs``, ``--quick``) override the script's keywords. Exit 0 with a chosen configuration;
1 when none was valid or one failed validation (a configuration that computes a wrong answer
is a finding); 2 for a script or a space that cannot be tuned.
"""

from __future__ import annotations

import argparse
import math
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from roofbench.boundary import EXIT_FAILED, Refusal
from roofbench.errors_text import first_line

from ..errors import UserError
from ..measure.user_code import raised_by_user, users_failure
from ..results import utc_stamp
from .ab import declared, load_side
from .argtypes import checked
from .compare import fraction


def tune_spec(mod: Any, spec: str) -> dict[str, Any]:
    """The script's TUNE, checked: tune's keywords with ``build``, ``space`` and ``args``."""
    got = declared(mod, spec, "TUNE")
    if not isinstance(got, Mapping) or not callable(got.get("build")) or "space" not in got:
        raise UserError(f"{spec} defines no TUNE (a dict of build=<configuration -> "
                        "callable>, space={name: [values]}, args=(...), flops=..., "
                        "reads=..., writes=...)")
    out = dict(got)
    args = out.get("args", ())
    if not isinstance(args, (tuple, list)):
        raise UserError(f"{spec}: TUNE['args'] must be a tuple of the callable's arguments, "
                        f"got {type(args).__name__}")
    return out


def search_flags(args: argparse.Namespace, kw: dict[str, Any]) -> dict[str, Any]:
    """The search's flags over ``kw`` (a script's keywords, or none for a suite kernel)."""
    for flag, key in (("target", "target"), ("budget", "budget_s"), ("drop_at", "drop_at"),
                      ("order", "order"), ("roofs", "roofs"), ("finalists", "finalists")):
        if getattr(args, flag) is not None:
            kw[key] = getattr(args, flag)
    if args.no_drop:
        kw["drop_at"] = None
    if args.exhaustive:
        kw["exhaustive"] = True
    if args.quick:
        kw["quick"] = True
    from roofbench.bench.gate.ab_session import alternate

    kw.setdefault("alternate", alternate)  # the finals' pairing loop (bench/tune/finals.py)
    return kw


def cmd_tune(args: argparse.Namespace) -> int:
    if (args.script is None) == (args.workload is None):
        raise UserError("tune takes a SCRIPT or --workload W (one of the two)")
    if args.workload is None and any(getattr(args, f) is not None
                                     for f in ("variant", "dtype", "size")):
        raise UserError("--variant, --dtype and --size select a suite kernel: give --workload")
    if args.workload is not None:
        return tune_workload(args)
    from roofbench.bench.tune.search import tune

    kw = tune_spec(load_side(args.script, "tune"), args.script)
    build, sp, call_args = kw.pop("build"), kw.pop("space"), tuple(kw.pop("args", ()))
    search_flags(args, kw)
    kw.setdefault("name", Path(args.script).stem if args.script.endswith(".py")
                  else args.script.rpartition(".")[2])
    kw["out"] = args.out or f"tune-{utc_stamp()}"
    try:
        rec = tune(build, sp, *call_args, **kw)
    except TypeError as e:  # a keyword tune does not take
        if raised_by_user(e):
            raise users_failure(e, "TUNE") from None
        raise UserError(f"TUNE: {first_line(e)}") from None
    except (Exception, SystemExit) as e:  # the user's code raised outside a configuration
        if isinstance(e, Refusal) or not raised_by_user(e):
            raise
        raise users_failure(e, "TUNE") from None
    return show(rec)


def show(rec: Any) -> int:
    """The ranking, the failures, the stop and the choice; the exit status."""
    for r in rec.ranking:
        t = rec.trial(r.index)
        tie = " (tie with the best)" if r.rank > 1 and r.ties_best else ""
        eff = f", {t.efficiency:.1%} of its roof" if t.efficiency is not None else ""
        print(f"{r.rank:>3}. {t.label}: median {r.median_s:.4g} s{eff}{tie}")
    for t in rec.trials:
        if t.status in ("invalid", "error"):
            print(f"  {t.label}: {t.status}: {t.why}")
    print(f"stopped: {rec.stop} ({rec.stop_detail})")
    if rec.finals is not None:
        for m in rec.finals.meetings:
            iv = f" [{m.lo:.4f}, {m.hi:.4f}]" if m.lo is not None and m.hi is not None else ""
            ratio = f"time {m.ratio:.4f}{iv} of the champion's, " if m.ratio is not None else ""
            print(f"  final: {m.rival_label} against {m.champion_label}: {ratio}{m.outcome}")
        print(f"finals: {rec.finals.verdict}")
    best = rec.best
    print(f"chosen: {best.label}" if best is not None else "no configuration was valid")
    print(f"tune: {rec.out}")
    return EXIT_FAILED if best is None or rec.count("invalid") else 0


def tune_workload(args: argparse.Namespace) -> int:
    """Each tunable CPU case of the selection searched over its declared space; the chosen
    configuration stored for this device (unless --no-save)."""
    from roofbench.bench.tune.suite import tunable_cases, tune_case

    cases = tunable_cases(args.workload, args.variant, args.dtype, args.size, args.quick)
    root = Path(args.out or f"tune-{utc_stamp()}")
    status = 0
    for case in cases:
        out = root if len(cases) == 1 else root / case.key.replace("/", "_")
        print(f"{case.key}: {len(case.variant.tune['cpu'].all_configs())} configurations "
              "declared")
        done = tune_case(case, out=out, save=not args.no_save, **search_flags(args, {}))
        if done.started_from:
            print(f"started from {done.started_from}")
        status = max(status, show(done.record))
        if done.stored is not None:
            print(f"stored for this device: {done.stored} (`roofbench run` uses it)")
    return status


_budget = checked(float, lambda v: 0 < v < math.inf, "must be a number of seconds > 0",
                  "a number of seconds")
_factor = checked(float, lambda v: 1 < v < math.inf, "must be a factor > 1")
_count = checked(int, lambda v: v >= 0, "must be a whole number >= 0", "a whole number")


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("tune", help="search a kernel's configurations until the roof says "
                                    "there is nothing left to win")
    p.add_argument("script", nargs="?", default=None,
                   help="a .py file or module defining TUNE (build, space, args, counts)")
    p.add_argument("--workload", help="tune a suite kernel instead: its declared space "
                                      "(Variant.tune) on the CPU")
    p.add_argument("--variant", help="with --workload: one variant (default: every tunable one)")
    p.add_argument("--dtype", help="with --workload: the storage dtype (default fp32)")
    p.add_argument("--size", help="with --workload: the size, e.g. 1024x1024x1024 (default: "
                                  "the run's default size)")
    p.add_argument("--no-save", action="store_true",
                   help="with --workload: do not store the chosen configuration")
    p.add_argument("--out", help="the tune's folder (default: tune-<UTC time>); with "
                                 "--workload and several cases, one folder per case in it")
    p.add_argument("--target", type=fraction, default=None,
                   help="stop when the best reaches this fraction of its roof (default 0.9)")
    p.add_argument("--budget", type=_budget, default=None, metavar="SECONDS",
                   help="stop after this many wall seconds")
    p.add_argument("--exhaustive", action="store_true",
                   help="try every configuration (for comparison with the search)")
    p.add_argument("--drop-at", type=_factor, default=None, metavar="X",
                   help="drop a configuration whose first samples show its median over X "
                        "times the best's (its 95%% interval; default 1.1)")
    p.add_argument("--no-drop", action="store_true", help="time every configuration fully")
    p.add_argument("--finalists", type=_count, default=None, metavar="N",
                   help="after the loop, at most N configurations tied with the best meet it "
                        "in ABBA pairs; the faster is chosen (default 2; 0: no finals)")
    p.add_argument("--order", choices=("declared", "roof"), default=None,
                   help="declared (the space's) or roof (least time at its roof first)")
    p.add_argument("--roofs", help="place the configurations under this roofs file")
    p.add_argument("--quick", action="store_true", help="short timing (a smoke test)")
    p.set_defaults(func=cmd_tune)
