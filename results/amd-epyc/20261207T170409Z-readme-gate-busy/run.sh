#!/bin/bash
# The README's gate recipe, as written, three times: ab (A/A and planted 1.5x), then two-session
# pytest runs and compare --fail-on slower:5%,uncertain. Usage: run.sh OUTDIR
set -u
OUT=$1; mkdir -p "$OUT"
export PATH=/work/main/.venv/bin:$PATH
# roofbench from a snapshot of one commit (git archive; the shared checkout moves under other
# engineers), its roofs cache calibrated once before (calibrate --quick --out)
export PYTHONPATH=/tmp/h57gate/snap2 ROOFBENCH_HOME=/tmp/h57gate/home
P=/tmp/h57gate/proj
step() {  # step NAME DIR CMD...: run CMD in DIR, log output, exit code, uptime before/after
  local name=$1 dir=$2; shift 2
  echo "== $name: $* (in $dir)" | tee -a "$OUT/steps.log"
  echo "uptime before: $(uptime)" | tee -a "$OUT/steps.log"
  ( cd "$dir" && "$@" ) > "$OUT/$name.log" 2>&1
  local rc=$?
  echo "uptime after: $(uptime)" | tee -a "$OUT/steps.log"
  echo "exit $rc; last line: $(tail -n 1 "$OUT/$name.log")" | tee -a "$OUT/steps.log"
}
for i in 1 2 3; do
  W=/tmp/h57gate/w$i; rm -rf "$W"; mkdir -p "$W"
  cp -r $P/base $P/new $P/slow "$W/"
  cd "$W"
  step run$i-ab-unchanged "$W" roofbench ab base/cases.py new/cases.py --out ab --fail-on slower:5%,uncertain
  step run$i-ab-slow "$W" roofbench ab base/cases.py slow/cases.py --out ab-slow --fail-on slower:5%,uncertain
  step run$i-pytest-base "$W/base" pytest --roofline-out "$W/rbase"
  step run$i-pytest-new "$W/new" pytest --roofline-out "$W/rnew"
  step run$i-pytest-slow "$W/slow" pytest --roofline-out "$W/rslow"
  step run$i-compare-unchanged "$W" roofbench compare rbase rnew --fail-on slower:5%,uncertain --out cmp-unchanged
  step run$i-compare-slow "$W" roofbench compare rbase rslow --fail-on slower:5%,uncertain --out cmp-slow
  for f in ab/a ab/b ab-slow/a ab-slow/b rbase rnew rslow; do
    mkdir -p "$OUT/run$i/$f"; cp "$W/$f/results.json" "$OUT/run$i/$f/" 2>/dev/null
  done
  cp "$W"/cmp-*.json "$OUT/run$i/" 2>/dev/null; cp "$W"/ab/compare.json "$OUT/run$i/ab-compare.json" 2>/dev/null
  cp "$W"/ab-slow/compare.json "$OUT/run$i/ab-slow-compare.json" 2>/dev/null
done
