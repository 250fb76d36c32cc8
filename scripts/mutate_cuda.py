#!/usr/bin/env python3
"""Mutation test of the CUDA sources: how much of what a reviewer would get wrong do the tests
catch without a GPU?

Each mutant of the catalogue (scripts/cuda_mutants.py: file, original text, replacement, what
it breaks, the narrowest tests for it) is applied, one at a time, to a temporary copy of the
checkout (never the tree itself), and its tests run there with this Python. Outcomes:

  killed     a test failed (an assertion: a real check caught it)
  survived   every selected test passed
  aborted    the test process died (a signal: abort, segfault) - not counted as killed
  stillborn  the mutant does not build (every failure is a build failure) - not counted
  timeout    the tests ran past --timeout - not counted as killed
  error      pytest could not run the selection (usage error, nothing collected)
  unconfirmed  a test failed, but it fails on the unmutated copy too - not counted as killed

The score is killed / (mutants run, equivalents excluded). Equivalent mutants (no test can
tell them from the original) are listed with the reason and not run. A kill counts only when
the tests that failed on the mutant pass on the unmutated copy: after the mutants, those tests
(one per kill: a selection stops at its first failure, -x) run there, and a kill whose test
fails there too is "unconfirmed", not killed. That is all a kill needs of a baseline; --baseline
runs the union of every selection on the unmutated copy first instead (the old way: about as
long as the mutants). Emulated builds are shared between runs through $RB_EMU_CACHE
(tests/standins/cuda_tools.py keys each by its source and the headers it includes), and a test
builds only the sources it launches: a header mutant rebuilds what includes the header and its
tests launch, not every source. A RB_EMU_CACHE already set (the test store's emu/ folder) is
used as it is, so the unmutated builds of earlier test runs are not redone.

    scripts/mutate_cuda.py                 # the whole catalogue (0.5-5 min a mutant, loaded)
    scripts/mutate_cuda.py --only a,b      # named mutants
    scripts/mutate_cuda.py --list          # the catalogue, one line each
Exit status: 0 when every mutant run was killed, 1 when any was not, 2 on a usage error.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
import xml.etree.ElementTree as ET
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from cuda_mutants import MUTANTS, Mutant  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
SCORED = ("killed", "survived", "aborted", "timeout", "error", "unconfirmed")
BUILD_FAILURE = ("emulation build of", "nvcc failed", "counting build")


@dataclass
class Outcome:
    mutant: Mutant
    status: str
    seconds: float
    detail: str = ""
    failed: tuple[str, ...] = ()  # the node ids of the tests that failed


_FAILED = re.compile(r"^(?:FAILED|ERROR) (\S+)", re.M)


def failed_ids(log_text: str) -> tuple[str, ...]:
    """The node ids pytest's short summary names as failed (a module that failed to collect
    is named by its path)."""
    return tuple(dict.fromkeys(_FAILED.findall(log_text)))


def copy_tree(dest: Path) -> Path:
    """The checkout's files (tracked and untracked, not ignored) under ``dest``."""
    out = subprocess.run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
                         cwd=ROOT, capture_output=True, check=True).stdout
    for rel in filter(None, out.decode().split("\0")):
        src = ROOT / rel
        if src.is_file():
            (dest / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, dest / rel)
    return dest


def check_catalogue(mutants: tuple[Mutant, ...]) -> list[str]:
    """What is wrong with the catalogue: duplicate names, snippets that do not apply once."""
    problems = []
    names = Counter(m.name for m in mutants)
    problems += [f"{n}: the name is used {c} times" for n, c in names.items() if c > 1]
    for m in mutants:
        path = ROOT / m.file
        if not path.is_file():
            problems.append(f"{m.name}: {m.file} does not exist")
            continue
        count = path.read_text().count(m.old)
        if count != 1:
            problems.append(f"{m.name}: the original text occurs {count} times in {m.file}")
        if m.old == m.new:
            problems.append(f"{m.name}: the replacement is the original")
    return problems


def failures(junit: Path) -> list[str]:
    """The first line of every failure and error of a JUnit XML report."""
    if not junit.is_file():
        return []
    try:
        root = ET.parse(junit).getroot()
    except ET.ParseError:
        return []
    out = []
    for case in root.iter("testcase"):
        for bad in (*case.iter("failure"), *case.iter("error")):
            text = (bad.get("message") or bad.text or "").strip()
            out.append(f"{case.get('name')}: {text.splitlines()[0] if text else ''}"[:300])
    return out


def classify(rc: int | None, fails: list[str], timed_out: bool) -> str:
    if timed_out:
        return "timeout"
    if rc is None or rc < 0 or rc >= 128:
        return "aborted"
    if rc == 0:
        return "survived"
    if rc == 1:
        if fails and all(any(b in f for b in BUILD_FAILURE) for f in fails):
            return "stillborn"
        return "killed" if fails else "aborted"
    return "error"


def run_tests(tree: Path, tests: tuple[str, ...], tag: str, timeout: float, log: Path,
              stop_first: bool = True) -> tuple[int | None, list[str], bool]:
    junit = log / f"{tag}.xml"
    cmd = [sys.executable, "-m", "pytest", "-q", *(["-x"] if stop_first else []), "-n", "0",
           "-p", "no:cacheprovider", f"--junitxml={junit}", *tests]
    timed_out = False
    with open(log / f"{tag}.log", "w") as out:
        try:
            rc: int | None = subprocess.run(cmd, cwd=tree, stdout=out, stderr=subprocess.STDOUT,
                                            timeout=timeout, env=os.environ.copy()).returncode
        except subprocess.TimeoutExpired:
            rc, timed_out = None, True
    return rc, failures(junit), timed_out


def run_mutant(tree: Path, m: Mutant, timeout: float, log: Path) -> Outcome:
    path = tree / m.file
    original = path.read_text()
    path.write_text(original.replace(m.old, m.new, 1))
    t0 = time.monotonic()
    try:
        rc, fails, timed_out = run_tests(tree, m.tests, m.name, timeout, log)
    finally:
        path.write_text(original)
    status = classify(rc, fails, timed_out)
    detail = fails[0] if fails else (f"exit status {rc}" if rc not in (0, None) else "")
    failed = failed_ids((log / f"{m.name}.log").read_text(errors="replace"))
    return Outcome(m, status, time.monotonic() - t0, detail, failed)


def confirm_kills(tree: Path, outcomes: list[Outcome], timeout: float, log: Path,
                  run: Callable[..., tuple[int | None, list[str], bool]] | None = None
                  ) -> list[Outcome]:
    """The outcomes with every kill checked: the tests that failed on the mutants run once
    on the unmutated copy; a kill none of whose failed tests passes there is "unconfirmed"
    (its failure says nothing about the mutant), as is a kill that names no test."""
    run = run or run_tests
    kills = [o for o in outcomes if o.status == "killed"]
    ids = tuple(dict.fromkeys(i for o in kills for i in o.failed))
    clean_fails: set[str] = set()
    if ids:
        # no -x here: every kill's test is judged
        rc, _, timed_out = run(tree, ids, "confirm", timeout, log, stop_first=False)
        if timed_out or rc not in (0, 1):
            clean_fails = set(ids)  # the clean run itself failed: no kill is confirmed
        else:
            clean_fails = set(failed_ids((log / "confirm.log").read_text(errors="replace")))
    out = []
    for o in outcomes:
        if o.status == "killed" and not [i for i in o.failed if i not in clean_fails]:
            why = "fails on the unmutated copy too" if o.failed else "no failed test named"
            o = dataclasses.replace(o, status="unconfirmed", detail=f"{why}: {o.detail}")
        out.append(o)
    return out


def union(mutants: list[Mutant]) -> tuple[str, ...]:
    """One pytest selection covering every mutant's: node ids, and their -k expressions
    joined with `or` (a selection without -k takes its node ids whole)."""
    ids: list[str] = []
    exprs: list[str] = []
    whole = False
    for m in mutants:
        args = list(m.tests)
        if "-k" in args:
            i = args.index("-k")
            exprs.append(f"({args[i + 1]})")
            args = args[:i] + args[i + 2:]
        else:
            whole = True
        ids += [a for a in args if a not in ids]
    if exprs and not whole:
        return (*ids, "-k", " or ".join(dict.fromkeys(exprs)))
    return tuple(ids)


def report(outcomes: list[Outcome], equivalents: list[Mutant]) -> str:
    lines = [f"{'mutant':32} {'class':12} {'outcome':10} {'s':>5}  detail"]
    for o in outcomes:
        lines.append(f"{o.mutant.name:32} {o.mutant.cls:12} {o.status:10} {o.seconds:5.0f}  "
                     f"{o.detail[:90]}")
    scored = [o for o in outcomes if o.status in SCORED]
    killed = sum(o.status == "killed" for o in scored)
    by_class: dict[str, Counter[str]] = {}
    for o in scored:
        by_class.setdefault(o.mutant.cls, Counter())[o.status] += 1
    lines.append("")
    lines.append("by class: " + "; ".join(
        f"{c} {n['killed']}/{sum(n.values())}" for c, n in sorted(by_class.items())))
    for o in outcomes:
        if o.status != "killed":
            lines.append(f"not killed: {o.mutant.name} ({o.mutant.cls}, {o.status}): "
                         f"{o.mutant.what}")
    for m in equivalents:
        lines.append(f"equivalent: {m.name}: {m.what} -- {m.equivalent}")
    pct = 100 * killed / len(scored) if scored else 0.0
    lines.append(f"score: {killed}/{len(scored)} killed ({pct:.1f}%), "
                 f"{len(equivalents)} equivalent, "
                 f"{sum(o.status == 'stillborn' for o in outcomes)} stillborn")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--only", default="", help="comma-separated mutant names")
    ap.add_argument("--list", action="store_true", help="print the catalogue and exit")
    ap.add_argument("--timeout", type=float, default=900.0, help="seconds per mutant's tests")
    ap.add_argument("--baseline", action="store_true",
                    help="run the union of the selections on the unmutated copy first")
    ap.add_argument("--no-baseline", action="store_true",
                    help="neither the baseline nor the kills' confirmation (a kill unchecked)")
    ap.add_argument("--keep", type=Path, default=None,
                    help="a folder for the logs and JUnit reports (default: a temporary one)")
    args = ap.parse_args(argv)
    problems = check_catalogue(MUTANTS)
    if problems:
        print("mutate_cuda: the catalogue is broken: " + "; ".join(problems), file=sys.stderr)
        return 2
    if args.list:
        for m in MUTANTS:
            eq = f"  [equivalent: {m.equivalent}]" if m.equivalent else ""
            print(f"{m.name:32} {m.cls:12} {m.file}: {m.what}{eq}")
        return 0
    chosen = list(MUTANTS)
    if args.only:
        names = [n.strip() for n in args.only.split(",") if n.strip()]
        unknown = [n for n in names if n not in {m.name for m in MUTANTS}]
        if unknown:
            print(f"mutate_cuda: no such mutant: {', '.join(unknown)}", file=sys.stderr)
            return 2
        chosen = [m for m in MUTANTS if m.name in names]
    equivalents = [m for m in chosen if m.equivalent]
    run = [m for m in chosen if not m.equivalent]
    with tempfile.TemporaryDirectory(prefix="roofbench-mutants-") as tmp:
        tree = copy_tree(Path(tmp) / "tree")
        log = args.keep or Path(tmp) / "log"
        log.mkdir(parents=True, exist_ok=True)
        # builds are keyed by their inputs: a folder the caller names (the test store's
        # emu/, say) is safe to share, and saves the unmutated builds' minutes
        os.environ.setdefault("RB_EMU_CACHE", str(Path(tmp) / "emu-cache"))
        if run and args.baseline and not args.no_baseline:
            rc, fails, timed_out = run_tests(tree, union(run), "baseline",
                                             args.timeout * 2, log)
            if classify(rc, fails, timed_out) != "survived":
                print(f"mutate_cuda: the selected tests fail on the unmutated tree "
                      f"({'; '.join(fails[:3]) or f'exit status {rc}'}): no score",
                      file=sys.stderr)
                return 1
        outcomes = []
        for m in run:
            o = run_mutant(tree, m, args.timeout, log)
            print(f"{m.name}: {o.status} ({o.seconds:.0f} s)", flush=True)
            outcomes.append(o)
        if not args.no_baseline:
            outcomes = confirm_kills(tree, outcomes, args.timeout * 2, log)
    print(report(outcomes, equivalents))
    return 0 if all(o.status == "killed" for o in outcomes) else 1


if __name__ == "__main__":
    sys.exit(main())
