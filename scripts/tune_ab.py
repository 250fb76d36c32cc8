"""Two tunes' chosen configurations timed against each other in one process, paired.

    python scripts/tune_ab.py SEARCH_DIR EXHAUSTIVE_DIR [SEARCH_DIR EXHAUSTIVE_DIR ...]
        [--at 0.97] [--roofs FILE] [--budget S] [--cap S] [--quick] [--json FILE]

Issue 61 asks that the search's best reach >= 0.97 of the exhaustive best's rate. The two
tunes run in separate processes minutes apart, and one configuration's rate moved by more
than 3% between processes on the 2-core VM (results/amd-epyc/20261207T205123Z-tune-quiet),
so the ratio of their stored rates reads the drift as much as the search. Here each pair's
two chosen configurations are built again from the suite kernel (bench/tune/suite.py
``case_call``: the tune's arrays, float64 reference and counts) and timed in ONE A/B job
(bench/gate/ab_session.py: alternating pairs A B, B A after one warm-up; the roof sampled
beside each pair where a sampler exists), A the exhaustive's choice, B the search's. The
gate's paired statistic (``gate.paired_interval`` through ``classify_case``: the median of
the ABBA blocks' ratios and its distribution-free 95% interval) gives time B / time A; the
rate ratio is its inverse (times the FLOP ratio, should the two count different work). Where
both tunes chose the same configuration the ratio is 1 by construction: nothing is timed and
the row says so.

Reading against ``--at``: "met" where the rate ratio's whole interval lies at or above it,
"not met" where it lies wholly below, "undecided" where it straddles it or there is none.
The job samples until the gate settles at the threshold 1/at - 1 (``settled``: faster,
slower, or the whole interval within it), from ``--budget`` seconds a side to the ``--cap``.
A Markdown table on stdout (``--json``: the rows, in a file not written over). Exit 0 when
every pair was compared (whatever the readings: the figures are the output), 2 for a folder
or record it cannot compare (one line, nothing timed), 1 when a chosen configuration fails
validation here, 3 when --json cannot be written, 130 on Ctrl-C.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from roofbench.bench.errors import UserError  # noqa: E402
from roofbench.bench.gate.ab_session import AbSession  # noqa: E402
from roofbench.bench.tune.space import label  # noqa: E402
from roofbench.bench.tune.suite import case_call, tunable_cases  # noqa: E402

from roofbench.timing import TimerConfig  # noqa: E402

AT = 0.97  # issue 61: the search's best >= 0.97 of the exhaustive best's rate


@dataclass(frozen=True)
class Choice:
    """One tune's record as this script reads it: its folder, the kernel (tune name), dtype
    and size of its case, and the configuration it chose."""

    folder: str
    name: str
    dtype: str
    size: str
    config: Mapping[str, Any]

    @property
    def label(self) -> str:
        return label(self.config)


@dataclass(frozen=True)
class Row:
    """One pair compared: the search's chosen rate over the exhaustive's (``ratio``) with its
    95% interval, the reading against ``at``, and how it was judged."""

    search: str
    exhaustive: str
    kernel: str
    search_config: str
    exhaustive_config: str
    at: float
    same: bool  # both chose the same configuration: ratio 1 by construction, nothing timed
    ratio: float | None
    lo: float | None
    hi: float | None
    reading: str  # met, not met, undecided, same configuration, invalid
    statistic: str = ""  # the gate's words: roof-normalised or raw ABBA pairs
    pairs: int = 0
    verdict: str = ""  # the gate's verdict on time B / time A at threshold 1/at - 1
    why: str = ""


def load(folder: str) -> Choice:
    """The tune record in ``folder`` (its tune.json), checked."""
    f = Path(folder) / "tune.json"
    try:
        doc = json.loads(f.read_text())
    except (OSError, ValueError) as e:
        raise UserError(f"{f}: cannot read a tune record ({type(e).__name__})") from None
    if not isinstance(doc, dict) or doc.get("schema") != "roofbench.tune":
        raise UserError(f"{f}: not a tune record (schema roofbench.tune)")
    best = doc.get("best")
    if not isinstance(best, dict):
        raise UserError(f"{f}: the tune chose no configuration")
    trial = next((t for t in doc.get("trials", []) if t.get("config") == best), None)
    parts = str(trial.get("key", "")).split("/") if trial else []
    if len(parts) != 4:
        raise UserError(f"{f}: the chosen configuration's case key is missing or malformed")
    return Choice(folder, str(doc.get("name", "")), parts[2], parts[3], best)


def reading(lo: float | None, hi: float | None, at: float) -> str:
    """The rate ratio's interval against ``at``."""
    if lo is None or hi is None:
        return "undecided"
    if lo >= at:
        return "met"
    if hi < at:
        return "not met"
    return "undecided"


def compare(search: Choice, exhaustive: Choice, at: float = AT,
            roofs: str | None = None, timer: TimerConfig | None = None,
            quick: bool = False) -> Row:
    """The two choices timed in one A/B job (A the exhaustive's, B the search's)."""
    s, e = search, exhaustive
    if (s.name, s.dtype, s.size) != (e.name, e.dtype, e.size):
        raise UserError(f"{s.folder} and {e.folder} tuned different cases "
                        f"({s.name} {s.dtype} {s.size}; {e.name} {e.dtype} {e.size})")
    base = dict(search=s.folder, exhaustive=e.folder, kernel=s.name, search_config=s.label,
                exhaustive_config=e.label, at=at)
    if dict(s.config) == dict(e.config):
        return Row(**base, same=True, ratio=1.0, lo=1.0, hi=1.0,
                   reading="same configuration",
                   why="both chose it: the ratio is 1 by construction (nothing timed)")
    workload, _, variant = s.name.rpartition(".")
    cases = tunable_cases(workload, variant, s.dtype, s.size)
    if len(cases) != 1:
        raise UserError(f"{s.name} {s.dtype} {s.size} selects {len(cases)} suite cases, not 1")
    cc = case_call(cases[0])
    for c in (s.config, e.config):
        if dict(c) not in cases[0].variant.tune["cpu"].configs(cases[0].size, s.dtype):
            raise UserError(f"{label(c)} is not a configuration of {s.name}'s space at "
                            f"{s.size} (older code?)")
    ca, cb = cc.configured(e.config), cc.configured(s.config)
    work = cb.flops / ca.flops if ca.flops else 1.0  # the same in every suite space today
    thr = 1.0 / at - 1.0
    ab = AbSession(None, roofs=roofs, timer=timer, quick=quick, threshold=thr,
                   labels=("exhaustive", "search"))
    got = ab.measure(cc.build(**e.config), cc.build(**s.config), *cc.args, flops=ca.flops,
                     bytes=ca.bytes(), **cc.keywords())
    v = got.verdict
    if not (got.a.valid and got.b.valid):
        return Row(**base, same=False, ratio=None, lo=None, hi=None, reading="invalid",
                   verdict=v.verdict, why=v.reason)
    assert v.ratio is not None
    lo = work / v.ratio_hi if v.ratio_hi else None
    hi = work / v.ratio_lo if v.ratio_lo else None
    return Row(**base, same=False, ratio=work / v.ratio, lo=lo, hi=hi,
               reading=reading(lo, hi, at), statistic=v.statistic, pairs=v.n_a,
               verdict=v.verdict, why=v.reason)


def table(rows: Sequence[Row]) -> str:
    at = rows[0].at if rows else AT
    out = ["| kernel | search | exhaustive | search's chosen | exhaustive's chosen | "
           f"search's rate / exhaustive's [95%] | >= {at:g} | judged on |",
           "|---|---|---|---|---|---|---|---|"]
    for r in rows:
        iv = f" [{r.lo:.3f}, {r.hi:.3f}]" if r.lo is not None and r.hi is not None else ""
        ratio = "-" if r.ratio is None else f"{r.ratio:.3f}{iv}"
        how = (f"{r.statistic}, {r.pairs} pairs" if r.statistic else r.why)
        out.append(f"| {r.kernel} | {r.search} | {r.exhaustive} | {r.search_config} | "
                   f"{r.exhaustive_config} | {ratio} | {r.reading} | {how} |")
    return "\n".join(out)


def _seconds(text: str) -> float:
    try:
        v = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
    if not (0 < v < math.inf):
        raise argparse.ArgumentTypeError(f"must be seconds > 0, got {text!r}")
    return v


def _fraction(text: str) -> float:
    v = _seconds(text)
    if v > 1:
        raise argparse.ArgumentTypeError(f"must be a fraction in (0, 1], got {text!r}")
    return v


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="tune_ab.py", description=__doc__.splitlines()[0])
    p.add_argument("folders", nargs="+", help="SEARCH_DIR EXHAUSTIVE_DIR, repeated")
    p.add_argument("--at", type=_fraction, default=AT,
                   help="the fraction of the exhaustive's rate to read against (0.97)")
    p.add_argument("--roofs", help="the roofs file the tunes were placed under")
    p.add_argument("--budget", type=_seconds, default=1.0,
                   help="sampling seconds a side before the gate's verdict may stop (1)")
    p.add_argument("--cap", type=_seconds, default=5.0,
                   help="the most sampling seconds a side while the gate is unsettled (5)")
    p.add_argument("--quick", action="store_true", help="the quick timer (a smoke test)")
    p.add_argument("--json", help="write the rows here too")
    a = p.parse_args(argv)
    try:
        if len(a.folders) % 2:
            raise UserError("the folders come in pairs: SEARCH_DIR EXHAUSTIVE_DIR ...")
        if a.json and Path(a.json).exists():
            raise UserError(f"--json {a.json} exists: it is not written over")
        pairs = [(load(s), load(e)) for s, e in zip(a.folders[::2], a.folders[1::2],
                                                     strict=True)]
        base = TimerConfig.quick() if a.quick else TimerConfig()
        timer = replace(base, budget_s=a.budget, min_samples_cap_s=max(a.cap, a.budget))
        rows = []
        for s, e in pairs:
            rows.append(compare(s, e, a.at, a.roofs, timer))
            print(f"tune_ab: {s.folder} against {e.folder}: {rows[-1].reading}",
                  file=sys.stderr, flush=True)
    except (UserError, ValueError) as e:
        print(f"tune_ab: {e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("tune_ab: interrupted: nothing written", file=sys.stderr)
        return 130
    print(table(rows))
    if a.json:
        try:
            Path(a.json).write_text(json.dumps([asdict(r) for r in rows], indent=1) + "\n")
        except OSError as e:
            print(f"tune_ab: --json {a.json}: {e.strerror or e}", file=sys.stderr)
            return 3
    return 1 if any(r.reading == "invalid" for r in rows) else 0


if __name__ == "__main__":
    sys.exit(main())
