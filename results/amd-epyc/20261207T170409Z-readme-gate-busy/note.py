"""Summarise the README-gate runs: one row per step (verdict line, ratio, interval, exit, load)."""
import json, re, sys
from pathlib import Path
out = Path(sys.argv[1])
steps = re.split(r"^== ", out.joinpath("steps.log").read_text(), flags=re.M)[1:]
rows = []
for st in steps:
    lines = st.strip().splitlines()
    name = lines[0].split(":")[0]
    cmd = lines[0].split(": ", 1)[1]
    before = re.search(r"load average: ([\d.]+)", lines[1]).group(1) if len(lines) > 1 else "?"
    after = re.search(r"load average: ([\d.]+)", lines[2]).group(1) if len(lines) > 2 else "?"
    m = re.search(r"exit (\d+); last line: (.*)", st)
    rc, last = (m.group(1), m.group(2)) if m else ("(not finished)", "")
    log = out / f"{name}.log"
    verdict = ""
    if log.exists():
        txt = log.read_text()
        v = re.findall(r"^(\d+ (?:same|slower|faster|uncertain|unreadable)[^\n]*)$", txt, re.M)
        verdict = v[-1] if v else ""
    run, kind = name.split("-", 1)
    w = Path("/tmp/h57gate/w" + run[-1])
    cj = {"ab-unchanged": w / "ab/compare.json", "ab-slow": w / "ab-slow/compare.json",
          "compare-unchanged": w / "cmp-unchanged.json", "compare-slow": w / "cmp-slow.json"}.get(kind)
    ratio = ""
    if cj is not None and cj.exists():
        c = json.loads(cj.read_text())["cases"][0]
        lo, hi = c.get("ratio_lo"), c.get("ratio_hi")
        ratio = f"{c['ratio']:.3f}" + (f" [{lo:.3f}, {hi:.3f}]" if lo and hi else "") + f", n {c['n_a']}/{c['n_b']}"
    rows.append(f"| {run} | `{cmd.split(' (in ')[0]}` | {verdict} | {ratio} | {rc} | {before} -> {after} | {last} |")
print("| run | command | verdict | B/A judged [interval], samples | exit | load avg 1 min before -> after | last line |")
print("|---|---|---|---|---|---|---|")
print("\n".join(rows))
