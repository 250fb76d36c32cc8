"""The acceptance's table: one row per step (verdict line, ratio [interval], samples, exit,
load average before -> after). Usage: python note.py OUTDIR (the folder run.sh wrote)."""
import json
import re
import sys
from pathlib import Path

out = Path(sys.argv[1])
steps = re.split(r"^== ", out.joinpath("steps.log").read_text(), flags=re.M)[1:]
rows = []
for st in steps:
    lines = st.strip().splitlines()
    name, cmd = lines[0].split(":")[0], lines[0].split(": ", 1)[1].split(" (in ")[0]
    load = [re.search(r"load average: ([\d.]+)", x) for x in lines[1:3]]
    before, after = (m.group(1) if m else "?" for m in (load + [None, None])[:2])
    m = re.search(r"exit (\d+) after (\d+) s; last line: (.*)", st)
    rc, secs, last = m.groups() if m else ("(not finished)", "", "")
    log = out / f"{name}.log"
    v = re.findall(r"^(\d+ (?:same|slower|faster|uncertain|unreadable)[^\n]*)$",
                   log.read_text(errors="replace"), re.M) if log.exists() else []
    run, kind = name.split("-", 1)
    cj = out / run / f"{kind}.json"
    ratio = ""
    if cj.exists():
        c = json.loads(cj.read_text())["cases"][0]
        lo, hi = c.get("ratio_lo"), c.get("ratio_hi")
        ratio = (f"{c['ratio']:.3f}" + (f" [{lo:.3f}, {hi:.3f}]" if lo and hi else " (no interval)")
                 + f", n {c['n_a']}/{c['n_b']}")
    rows.append(f"| {run} | `{cmd}` | {v[-1] if v else ''} | {ratio} | {rc} | {secs} | "
                f"{before} -> {after} | {last} |")
print("| run | command | verdict | B/A judged [interval], samples | exit | s | "
      "load avg 1 min before -> after | last line |")
print("|---|---|---|---|---|---|---|---|")
print("\n".join(rows))
