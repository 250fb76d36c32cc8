"""The tune figures of results/amd-epyc/<stamp>-tune: one row per tune, then per kernel the
search's best rate over the exhaustive best's (pair i: search-i after exhaustive-i's neighbour)
and the search's wall over the exhaustive's. Rates: the ranking's basis (paired: each sample
scaled by its roof sample to the roofs file's calibrated rate, so two processes compare).

From results/amd-epyc/20261207T172546Z-tune/summary.py, with one column more: ROOT/ab.json
(scripts/tune_ab.py): the two chosen configurations timed against each other in ONE process,
paired (ABBA blocks, the gate's paired statistic), the rate ratio with its 95% interval and
its reading against 0.97 (the same configuration: 1 by construction, nothing timed)."""
import json, re, sys
from pathlib import Path

root = Path(sys.argv[1])
rows, per = [], {}
for kdir in sorted(p for p in root.iterdir() if p.is_dir()):
    log = (kdir / "log.txt").read_text() if (kdir / "log.txt").exists() else ""
    proc = dict(re.findall(r"== \S+ (\S+)\nstart[^\n]*\nend [^\n]*process_s=([0-9.]+)", log))
    loads = dict((m, (a, b)) for m, a, b in re.findall(
        r"== \S+ (\S+)\nstart [^\n]*load average: ([0-9., ]+)\nend [^\n]*load average: ([0-9., ]+)", log))
    for run in sorted(p for p in kdir.iterdir() if p.is_dir()):
        f = run / "tune.json"
        if not f.exists():
            continue
        d = json.loads(f.read_text())
        st = {}
        for t in d["trials"]:
            st[t["status"]] = st.get(t["status"], 0) + 1
        best = d["ranking"][0] if d["ranking"] else None
        bt = next(t for t in d["trials"] if best and t["index"] == best["index"]) if best else None
        work = (bt["flops"] or sum(bt["bytes"].values())) if bt else None
        rate = work / best["median_s"] if best else None
        import statistics
        raw = work / statistics.median(bt["samples_s"]) if bt and bt["samples_s"] else None
        unit = "GFLOP/s" if bt and bt["flops"] else "GB/s"
        eff = d["efficiency"]
        rows.append((kdir.name, run.name, d["wall_s"], float(proc.get(run.name, "nan")),
                     st, d["stop"], d["best"], rate, unit, eff, loads.get(run.name), raw))
        per.setdefault(kdir.name, {})[run.name] = (d["wall_s"], rate, raw)

ab = {}
if (root / "ab.json").exists():
    for r in json.loads((root / "ab.json").read_text()):
        k, run = Path(r["search"]).parent.name, Path(r["search"]).name
        iv = f" [{r['lo']:.3f}, {r['hi']:.3f}]" if r["lo"] is not None else ""
        ratio = "-" if r["ratio"] is None else f"{r['ratio']:.3f}{iv}"
        how = f", {r['pairs']} pairs" if r["pairs"] else ""
        ab[(k, run.removeprefix("search-"))] = f"{ratio}: {r['reading']}{how}"

print("| kernel | run | tune wall | process | ok/dropped/pruned/untried | stop | chosen | "
      "chosen's rate (raw median) | (paired basis) | its fraction of roof (interval) | load 1-min before -> after |")
print("|---|---|---|---|---|---|---|---|---|---|---|")
for k, r, w, p, st, stop, best, rate, unit, eff, ld, raw in rows:
    cnt = "/".join(str(st.get(s, 0)) for s in ("ok", "dropped", "pruned", "untried"))
    lab = ",".join(f"{a}={b}" for a, b in (best or {}).items())
    e = f"{eff[0]:.1%}-{eff[1]:.1%}" if eff else "-"
    l = f"{ld[0].split(',')[0]} -> {ld[1].split(',')[0]}" if ld else "-"
    print(f"| {k} | {r} | {w:.1f} s | {p:.0f} s | {cnt} | {stop} | {lab} | "
          f"{raw / 1e9:.3g} {unit} | {rate / 1e9:.3g} {unit} | {e} | {l} |")
print()
print("| kernel | i | search's chosen / exhaustive's chosen, raw-median rate | (paired basis) | "
      "one process, ABBA pairs [95%]: >= 0.97? | search wall / exhaustive wall |")
print("|---|---|---|---|---|---|")
for k, runs in per.items():
    for i in (1, 2, 3):
        s, e = runs.get(f"search-{i}"), runs.get(f"exhaustive-{i}")
        if s and e and s[1] and e[1]:
            print(f"| {k} | {i} | {s[2] / e[2]:.3f} | {s[1] / e[1]:.3f} | "
                  f"{ab.get((k, str(i)), 'not compared')} | {s[0] / e[0]:.0%} |")
