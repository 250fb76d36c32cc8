#!/usr/bin/env bash
# One prepared check for a GPU machine (`make gpu-check`), under 8 minutes, installing nothing:
#   1. facts (nvidia-smi, python packages)      5. a short bench of every kernel on Numba CUDA
#   2. the gpu-marked tests                      6. launch-overhead micro-benchmarks
#   3. roofbench calibrate (quick probes)        7. PyCUDA, when it is importable
#   4. a short bench of every kernel via CuPy
# Everything is written under ${OUT:-results/_scratch/gpu-check}: one log per step, the
# calibrated roofs, the results runs (results.json, csv, roofline plot, report.md) and
# summary.txt. A failing step is recorded and the next one runs; each step is bounded by
# `timeout`. Uses the interpreter $PYTHON (default python3) with the packages already there;
# roofbench itself is put on PYTHONPATH through a symlink shim (no pip install).
set -u
cd "$(dirname "$0")/.."
ROOT=$(pwd)
OUT_DIR=${OUT:-results/_scratch/gpu-check}
mkdir -p "$OUT_DIR"
OUT_DIR=$(cd "$OUT_DIR" && pwd)
PY=${PYTHON:-python3}
export PYTHONUNBUFFERED=1
T0=$(date +%s)
SUMMARY="$OUT_DIR/summary.txt"
: >"$SUMMARY"

# The source tree as the package `roofbench` (kernels/, bench/, roofs/ under one name).
SHIM=$(mktemp -d)
mkdir -p "$SHIM/roofbench"
ln -s "$ROOT/roofbench/__init__.py" "$SHIM/roofbench/__init__.py"
for d in kernels bench roofs; do ln -s "$ROOT/$d" "$SHIM/roofbench/$d"; done
export PYTHONPATH="$SHIM${PYTHONPATH:+:$PYTHONPATH}"
trap 'rm -rf "$SHIM"' EXIT

# step NAME SECONDS CMD...: run with a time limit, log to $OUT_DIR/NAME.log, never abort.
# The limits add up to 7m45s; a step that would start past TOTAL_S is skipped.
TOTAL_S=${GPU_CHECK_TOTAL_S:-470}
step() {
  local name=$1 limit=$2
  shift 2
  local left=$(( TOTAL_S - ($(date +%s) - T0) ))
  if [ "$left" -le 10 ]; then
    printf '%-16s %-18s\n' "$name" "SKIPPED (time)" | tee -a "$SUMMARY"
    return 0
  fi
  [ "$limit" -gt "$left" ] && limit=$left
  local t=$(date +%s)
  echo "== $name (limit ${limit}s): $*" | tee -a "$OUT_DIR/gpu_check.log"
  timeout --kill-after=10 "$limit" "$@" >"$OUT_DIR/$name.log" 2>&1
  local rc=$?
  local dt=$(( $(date +%s) - t ))
  local verdict=ok
  [ $rc -eq 124 ] || [ $rc -eq 137 ] && verdict="TIMEOUT"
  [ $rc -ne 0 ] && [ "$verdict" = ok ] && verdict="FAILED (rc $rc)"
  printf '%-16s %-18s %4ds  %s\n' "$name" "$verdict" "$dt" "$OUT_DIR/$name.log" \
    | tee -a "$SUMMARY"
  tail -n 5 "$OUT_DIR/$name.log" | sed 's/^/    /'
  return 0
}

cli() { "$PY" -m roofbench.bench.cli "$@"; }

step facts 15 bash -c "nvidia-smi; $PY --version; $PY -c 'import roofbench, sys; \
print(roofbench.__file__)'; $PY -m pip list 2>/dev/null | grep -i -E \
'cupy|numba|nvidia|pycuda|torch|pandas|matplotlib|pytest|ml.dtypes'"

step gpu-tests 100 "$PY" -m pytest -m gpu -q -p no:cacheprovider --maxfail=20 \
  -o addopts="--import-mode=importlib" tests/ --junitxml="$OUT_DIR/gpu-tests.xml"

ROOFS="$OUT_DIR/roofs.json"
if cli calibrate --help >/dev/null 2>&1; then
  # Full probes (the issue's target is under 60 s on an H100/H200-class GPU).
  step calibrate 90 "$PY" -m roofbench.bench.cli calibrate --recalibrate --no-plot \
    --out "$ROOFS"
else
  echo "calibrate: no such command (GPU probes not installed)" | tee -a "$SUMMARY"
fi
ROOFS_ARG=()
[ -s "$ROOFS" ] && ROOFS_ARG=(--roofs "$ROOFS")

step bench-cuda 100 "$PY" -m roofbench.bench.cli run --backend cuda --quick \
  "${ROOFS_ARG[@]}" --out "$OUT_DIR/results"
# The issue's targets need default (device-filling) sizes: memory kernels at 8x L2 in fp32,
# and the GEMMs at 4096^3 in fp32 and fp16 (regblock vs cuBLAS SGEMM, tensor vs HGEMM).
step targets-mem 45 "$PY" -m roofbench.bench.cli run --backend cuda --kernel vector_add \
  --kernel l2norm --kernel rownorm --dtype fp32 "${ROOFS_ARG[@]}" --out "$OUT_DIR/results-targets"
step targets-gemm 45 "$PY" -m roofbench.bench.cli run --backend cuda --kernel gemm \
  --dtype fp32 --dtype fp16 "${ROOFS_ARG[@]}" --out "$OUT_DIR/results-targets"
step bench-numba 40 "$PY" -m roofbench.bench.cli run --backend numba --quick \
  "${ROOFS_ARG[@]}" --out "$OUT_DIR/results-numba"
step launch-overhead 35 "$PY" -m pytest -q -p no:cacheprovider -o addopts="" \
  tests/bench_launch_overhead.py --benchmark-json="$OUT_DIR/launch_overhead.json"
if "$PY" -c "import pycuda" >/dev/null 2>&1; then
  step bench-pycuda 40 "$PY" -m roofbench.bench.cli run --backend pycuda --quick \
    --kernel l2norm --kernel vector_add "${ROOFS_ARG[@]}" --out "$OUT_DIR/results-pycuda"
else
  echo "bench-pycuda     skipped (PyCUDA not importable)" | tee -a "$SUMMARY"
fi

echo
echo "gpu-check finished in $(( $(date +%s) - T0 ))s; everything is under $OUT_DIR"
cat "$SUMMARY"
# One archive of everything, for transports that bring back only a few files (the device
# tool returns 8). GPU_CHECK_PACK_ONLY=1 leaves just the archive and summary.txt.
PACK=$(mktemp)
tar czf "$PACK" -C "$OUT_DIR" --exclude=gpu-check.tar.gz . && chmod 644 "$PACK" &&
  mv "$PACK" "$OUT_DIR/gpu-check.tar.gz"
if [ "${GPU_CHECK_PACK_ONLY:-0}" = 1 ] && [ -s "$OUT_DIR/gpu-check.tar.gz" ]; then
  find "$OUT_DIR" -mindepth 1 -maxdepth 1 ! -name gpu-check.tar.gz ! -name summary.txt \
    -exec rm -rf {} +
fi
# Exit non-zero when any step failed, after every step ran.
! grep -q -E 'FAILED|TIMEOUT' "$SUMMARY"
