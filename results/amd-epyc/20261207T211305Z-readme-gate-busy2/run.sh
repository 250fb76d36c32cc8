#!/bin/bash
# Issue 57's acceptance: the README's CI gate recipe exactly as written, three times, under
# exactly one busy loop per core (started here, killed on exit, whatever the exit). Per run, in
# a fresh folder: `roofbench ab` A/A and planted 1.5x, three `pytest --roofline-out` sessions
# (base, new = unchanged copy, slow = planted 1.5x), `roofbench compare` base/new and base/slow,
# all with --fail-on slower:5%,uncertain. Nothing more than the recipe: that is its minimum.
#
# usage: bash /work/notes/gate_accept/run.sh OUTDIR   e.g. results/amd-epyc/<UTC stamp>-readme-gate-busy
# roofbench runs from a `git archive` snapshot of /work/main's HEAD in /tmp (on PYTHONPATH; the
# shared checkout may move meanwhile), with the venv's Python; a scratch ROOFBENCH_HOME whose
# roofs are calibrated (--quick) before the busy loops start. Everything kept is under OUTDIR:
# steps.log (commands, uptime, exit, seconds, last line), runN-*.log, runN/ (results.json and
# compare.json of every step), table.md, and a copy of this script, note.py and proj/.
# SMOKE=1: one run, --quick timing, for the plumbing only (its figures are worth nothing).
# BUSY=N: N busy loops instead of one per core (the acceptance uses the default).
set -u
out=${1:?usage: run.sh OUTDIR}
here=$(cd "$(dirname "$0")" && pwd)
repo=/work/main
venv=$repo/.venv
smoke=${SMOKE:-0}
busy=${BUSY:-$(nproc)}
runs="1 2 3"; q_ab=""; q_pt=""
[ "$smoke" = 1 ] && { runs="1"; q_ab="--quick"; q_pt="--roofline-quick"; }
mkdir -p "$out" || exit 1
out=$(cd "$out" && pwd)
[ -e "$out/steps.log" ] && { echo "run.sh: $out already holds a run (steps.log); give a new folder" >&2; exit 2; }

scratch=$(mktemp -d /tmp/gate-accept.XXXXXX) || exit 1
pids=()
cleanup() {  # the busy loops by their ids, then the scratch snapshot and working copies
  [ ${#pids[@]} -gt 0 ] && kill "${pids[@]}" 2>/dev/null && wait "${pids[@]}" 2>/dev/null
  rm -rf "$scratch"
}
trap cleanup EXIT
trap 'echo "run.sh: interrupted" | tee -a "$out/steps.log"; exit 130' INT TERM HUP

commit=$(git -C "$repo" rev-parse HEAD) || exit 1
mkdir -p "$scratch/src" "$scratch/home"
git -C "$repo" archive "$commit" | tar -x -C "$scratch/src" || exit 1
export PATH=$venv/bin:$PATH PYTHONPATH=$scratch/src ROOFBENCH_HOME=$scratch/home
where=$(cd /tmp && python -c 'import roofbench; print(roofbench.__file__)')
case $where in "$scratch/src/"*) ;; *) echo "run.sh: roofbench imports from $where, not the snapshot" >&2; exit 1;; esac
cp -r "$here/run.sh" "$here/note.py" "$here/proj" "$out/"
t0=$(date +%s)
{ echo "run.sh $(date -u +%Y-%m-%dT%H:%M:%SZ) snapshot of $commit ($(git -C "$repo" log -1 --format=%s "$commit"))"
  echo "smoke=$smoke busy_loops=$busy nproc=$(nproc) roofbench from $where"; } | tee -a "$out/steps.log"

# roofs once, before the load (the gate judges times and paired roof samples, not these
# roofs), into the cache file ab and the plug-in read: named with --out, so that a calibration
# the load probe calls loaded is still written (else every step would calibrate again)
roofs=$(cd /tmp && python -c 'from roofbench.bench.measure.roof_source import cache_path, open_for_calibration as o; print(cache_path(o(0, "cpu")))') || exit 1
mkdir -p "$(dirname "$roofs")"
s=$(date +%s)
python -m roofbench.bench.cli calibrate --backend cpu --quick --no-plot --out "$roofs" > "$out/calibrate.log" 2>&1
rc=$?
echo "calibrate --quick --out $roofs: exit $rc after $(( $(date +%s) - s )) s; $(uptime)" | tee -a "$out/steps.log"
[ $rc -eq 0 ] && [ -s "$roofs" ] || { echo "run.sh: no roofs in $roofs (see calibrate.log)" >&2; exit 1; }

for _ in $(seq "$busy"); do python3 -c 'while True: pass' & pids+=($!); done
echo "busy loops (pids ${pids[*]}) from $(date -u +%H:%M:%S)" | tee -a "$out/steps.log"
sleep 5
{ echo "top processes after 5 s of busy loops:"; ps -eo pcpu,pid,etime,comm --sort=-pcpu | head -8; } >> "$out/steps.log"

step() {  # step NAME DIR CMD...: run CMD in DIR; its output, exit, seconds and uptime logged
  local name=$1 dir=$2; shift 2
  echo "== $name: $* (in $dir)" | tee -a "$out/steps.log"
  echo "uptime before: $(uptime)" | tee -a "$out/steps.log"
  local s; s=$(date +%s)
  ( cd "$dir" && "$@" ) > "$out/$name.log" 2>&1
  local rc=$?
  echo "uptime after: $(uptime)" | tee -a "$out/steps.log"
  echo "exit $rc after $(( $(date +%s) - s )) s; last line: $(tail -n 1 "$out/$name.log")" | tee -a "$out/steps.log"
}
gate=(--fail-on slower:5%,uncertain)
for i in $runs; do
  w=$scratch/w$i; mkdir -p "$w"; cp -r "$here/proj/base" "$here/proj/new" "$here/proj/slow" "$w/"
  step run$i-ab-unchanged "$w" roofbench ab base/cases.py new/cases.py --out ab "${gate[@]}" $q_ab
  step run$i-ab-slow "$w" roofbench ab base/cases.py slow/cases.py --out ab-slow "${gate[@]}" $q_ab
  step run$i-pytest-base "$w/base" pytest $q_pt --roofline-out "$w/rbase"
  step run$i-pytest-new "$w/new" pytest $q_pt --roofline-out "$w/rnew"
  step run$i-pytest-slow "$w/slow" pytest $q_pt --roofline-out "$w/rslow"
  step run$i-compare-unchanged "$w" roofbench compare rbase rnew "${gate[@]}" --out cmp-unchanged
  step run$i-compare-slow "$w" roofbench compare rbase rslow "${gate[@]}" --out cmp-slow
  for f in ab/a ab/b ab-slow/a ab-slow/b rbase rnew rslow; do
    mkdir -p "$out/run$i/$f"; cp "$w/$f/results.json" "$out/run$i/$f/" 2>/dev/null
  done
  cp "$w/ab/compare.json" "$out/run$i/ab-unchanged.json" 2>/dev/null
  cp "$w/ab-slow/compare.json" "$out/run$i/ab-slow.json" 2>/dev/null
  cp "$w/cmp-unchanged.json" "$out/run$i/compare-unchanged.json" 2>/dev/null
  cp "$w/cmp-slow.json" "$out/run$i/compare-slow.json" 2>/dev/null
done
echo "end $(date -u +%H:%M:%S), total $(( $(date +%s) - t0 )) s; $(uptime)" | tee -a "$out/steps.log"
python "$here/note.py" "$out" > "$out/table.md" && cat "$out/table.md"
