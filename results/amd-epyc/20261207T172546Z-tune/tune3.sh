#!/bin/bash
# usage: tune3.sh OUTDIR NAME -- tune args...   (three search + three exhaustive, interleaved)
set -u
out=$1; name=$2; shift 3
cd /work/main
export ROOFBENCH_HOME=/tmp/h61/home
mkdir -p "$out/$name"
for i in 1 2 3; do
  for mode in search exhaustive; do
    extra=""; [ $mode = exhaustive ] && extra="--exhaustive"
    d="$out/$name/$mode-$i"
    { echo "== $name $mode-$i"; echo "start $(date -u +%H:%M:%S) $(uptime)"; } >> "$out/$name/log.txt"
    s=$(date +%s.%N)
    nice .venv/bin/python -m roofbench.bench.cli tune "$@" $extra --no-save --out "$d" > "$out/$name/$mode-$i.txt" 2>&1
    rc=$?
    e=$(date +%s.%N)
    echo "end $(date -u +%H:%M:%S) rc=$rc process_s=$(echo "$e - $s" | bc) $(uptime)" >> "$out/$name/log.txt"
  done
done
