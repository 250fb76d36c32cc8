"""`roofbench ab BASE NEW --out DIR`: base and new measured alternately, sample by sample, in
this one job (bench/gate/ab_session.py), then judged as `roofbench compare DIR` judges any A/B run
(paired samples; the same gate flags and exit codes).

BASE and NEW are each a Python file (``path/to/base.py``) or an importable module name (e.g.
one of $ROOFBENCH_PLUGINS', or a module of another checkout put on the path by the file)
that defines ``AB_CASES``: a dict, or a function returning one, of case name -> the keywords
of ``roofbench.measure`` plus ``fn`` (the callable) and ``args`` (its arguments)::

    import numpy as np
    a, b, c = (np.ones(1 << 20, np.float32) for _ in range(3))
    def add(a, b, c): np.add(a, b, out=c)
    AB_CASES = {"add": dict(fn=add, args=(a, b, c), flops=a.size, reads=[a, b], writes=c)}

The cases both define are measured (base's counts declare the work of both sides, so the
keys match); a name in one file only is said and left out. Both load into this process (two
files of one name, from two checkouts, load under their own module names; a package that
both import is imported once: put each checkout's copy under its own name).
"""

from __future__ import annotations

import argparse
import importlib
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

from roofbench.boundary import Refusal
from roofbench.errors_text import first_line

from ..errors import UserError
from ..measure.user_code import file_module, raised_by_user, users_failure
from ..results import utc_stamp
from .compare import cmd_compare, fail_on_spec, fraction, gate_of

# The modules each side's file imported from its own folder (the folder -> their names).
_BESIDE: dict[Path, list[str]] = {}


def _from(mod: ModuleType, folder: Path) -> bool:
    """Whether a module was loaded from a file in ``folder`` (or a package under it)."""
    f = getattr(mod, "__file__", None)
    return isinstance(f, str) and folder in Path(f).resolve().parents


def load_side(spec: str, tag: str) -> ModuleType:
    """The module of one side: a .py file (loaded under a name of its own) or a module name.
    A file's folder goes first on sys.path, as Python puts a script's: ``import kver`` finds
    the kver.py beside it. A module the other side loaded from its own, other folder under
    the same name is set aside first, so that each side imports its own copy (two
    checkouts' ``kver.py``), never the other's silently."""
    path = Path(spec)
    try:
        if spec.endswith(".py") or path.is_file():
            mod, loader = file_module(path, spec, f"roofbench_ab_{tag}")
            folder = path.resolve().parent
            for other, names in _BESIDE.items():
                if other != folder:
                    for name in names:  # the other side's copy: its module holds it still
                        sys.modules.pop(name, None)
            before = set(sys.modules)
            if str(folder) in sys.path:
                sys.path.remove(str(folder))
            sys.path.insert(0, str(folder))
            loader.exec_module(mod)
            _BESIDE.setdefault(folder, []).extend(
                n for n in set(sys.modules) - before if _from(sys.modules[n], folder))
            return mod
        return importlib.import_module(spec)
    except UserError:
        raise
    except SystemExit as e:
        raise UserError(f"{spec} called sys.exit({e.code!r}) on import") from None
    except Exception as e:  # the user's code failed: one line
        raise UserError(f"{spec} does not import: {first_line(e)}") from None


def declared(mod: Any, spec: str, name: str) -> Any:
    """The module's ``name`` (None if absent), called first when it is a factory (ab's
    AB_CASES, tune's TUNE): the factory's failure is said as the user's, in one line."""
    got = getattr(mod, name, None)
    if callable(got):
        try:
            got = got()
        except (Exception, SystemExit) as e:  # the user's factory: said as theirs
            raise UserError(f"{spec}: {users_failure(e, name + '()')}") from None
    return got


def ab_cases(mod: ModuleType, spec: str) -> dict[str, dict[str, Any]]:
    """The module's AB_CASES, checked: name -> keywords with ``fn`` and ``args``."""
    cases = declared(mod, spec, "AB_CASES")
    if not isinstance(cases, dict) or not cases:
        raise UserError(f"{spec} defines no AB_CASES (a dict of case name -> "
                        "dict(fn=..., args=(...), flops=..., reads=..., writes=...))")
    out: dict[str, dict[str, Any]] = {}
    for name, kw in cases.items():
        if not isinstance(kw, dict) or not callable(kw.get("fn")):
            raise UserError(f"{spec}: AB_CASES[{name!r}] must be a dict with a callable 'fn'")
        args = kw.get("args", ())
        if not isinstance(args, (tuple, list)):  # tuple(5) would fail later as ours (exit 70)
            raise UserError(f"{spec}: AB_CASES[{name!r}]['args'] must be a tuple of fn's "
                            f"arguments, got {type(args).__name__} {args!r:.40}")
        out[str(name)] = dict(kw)
    return out


def cmd_ab(args: argparse.Namespace) -> int:
    from roofbench.bench.gate.ab_session import AbSession

    base = ab_cases(load_side(args.base, "base"), args.base)
    new = ab_cases(load_side(args.new, "new"), args.new)
    names = [n for n in base if n in new]
    for n in [*base, *new]:
        if n not in names:
            print(f"note: {n!r} is defined in {args.base if n in base else args.new} only: "
                  "not measured")
    if not names:
        raise UserError(f"{args.base} and {args.new} define no case of the same name")
    out = Path(args.out or f"ab-{utc_stamp()}")
    threshold, _ = gate_of(args)
    with AbSession(out, roofs=args.roofs, quick=args.quick, threshold=threshold,
                   labels=(args.base, args.new)) as ab:
        for n in names:
            a_kw, b_kw = dict(base[n]), new[n]
            fa, fb = a_kw.pop("fn"), b_kw["fn"]
            a_args = tuple(a_kw.pop("args", ()))
            a_kw.setdefault("name", n)
            try:
                res = ab.measure(fa, fb, *a_args, args_b=tuple(b_kw.get("args", ())),
                                 output_b=b_kw.get("output"), **a_kw)
            except TypeError as e:  # a keyword measure does not take
                if raised_by_user(e):
                    raise users_failure(e, f"AB_CASES[{n!r}]") from None
                raise UserError(f"AB_CASES[{n!r}]: {first_line(e)}") from None
            except (Exception, SystemExit) as e:  # a side raised: the user's, exit 1 (4)
                if isinstance(e, Refusal) or not raised_by_user(e):
                    raise
                raise users_failure(e, f"AB_CASES[{n!r}]") from None
            v = res.verdict
            print(f"{n}: {v.verdict}" + (f" (B/A {v.ratio:.3f})" if v.ratio else ""),
                  flush=True)
    out = ab.out or out  # the folder claimed: out-2 when out holds a job already
    print(f"A/B run: {out} (a/: {args.base}, b/: {args.new})")
    return cmd_compare(argparse.Namespace(
        a=str(out), b=None, out=str(out / "compare"), threshold=args.threshold,
        fail_on=args.fail_on, fail_on_regression=args.fail_on_regression))


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("ab", help="base and new measured alternately in one job, then "
                                  "compared on their paired samples (a CI gate)")
    p.add_argument("base", help="a .py file or module defining AB_CASES (the base)")
    p.add_argument("new", help="the same for the new code")
    p.add_argument("--out", help="the A/B run's folder (default: ab-<UTC time>)")
    p.add_argument("--roofs", help="place the cases under this roofs file")
    p.add_argument("--quick", action="store_true", help="short timing (a smoke test)")
    p.add_argument("--threshold", type=fraction, default=None,
                   help="a change smaller than this is 'same' (default 0.05)")
    p.add_argument("--fail-on", type=fail_on_spec, action="append", metavar="GATE",
                   help="exit 1 on: slower:N%%, invalid, uncertain (as roofbench compare)")
    p.add_argument("--fail-on-regression", action="store_true",
                   help="the same as --fail-on slower,invalid")
    p.set_defaults(func=cmd_ab)
