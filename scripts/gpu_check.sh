#!/usr/bin/env bash
# `make gpu-check`: one prepared check for a GPU machine that fits one device call (under 8
# minutes of its 10), from a plain clone (no pip install of roofbench: the source tree is
# imported as it is, PYTHONPATH=<checkout>). The flagship first, then the roofs and the run.
#   facts            nvidia-smi, toolkit, python packages (cuda-bindings, cuda-pathfinder too),
#                    the libNVVM numba-cuda resolves, which roofbench, backends
#   wgmma-tests      the wgmma/TMA GEMM validated on the device (tests/kernels/test_wgmma.py -m gpu):
#                    done within the first 60 s
#   calibrate        roofbench calibrate --recalibrate (full probes) -> roofs/<device>.json,
#                    written after every probe
#   make-bench       `ROOFBENCH_NO_INSTALL=1 make bench` as the README tells a user of an
#                    offline GPU box (CUDA backend, results under the output folder)
#   gemm-8192        the hand-written tensor GEMMs at 8192^3
#   gpu-tests        the other gpu-marked tests (fails when none passed: all skipped = no GPU)
#   bench-numba      a quick run of every kernel on Numba CUDA
#   pycuda-install   PyCUDA built offline from wheelhouse/ (scripts/pycuda_offline.sh; in the
#                    background from the start; optional: never fails the check)
#   bench-pycuda     a quick run on PyCUDA, when it is importable
#   launch-overhead  host time per empty-kernel launch from each launcher (pytest-benchmark)
#   ncu              Nsight Compute counters beside the model
# Each step's limit is sized from a model tested on the CPU (docs/gpu-check.md): the
# calibration time model (tests/roofs/test_gpu_probes_nogpu.py) and the make-bench time model
# (tests/bench/measure/test_bench_time_model.py); tests/scripts/test_gpu_check_script.py checks the order and that
# the limits fit GPU_CHECK_TOTAL_S (default 480 s). A failing step is recorded and the next one
# runs; a step with no time left is skipped. Exit status non-zero when a step failed, timed
# out or was skipped.
# Output, under ${OUT:-results/_scratch/gpu-check}: one log per step, summary.txt (one line per
# step with its verdict and duration), the runs and the calibrated roofs, and gpu-check.tar.gz
# of it all. With GPU_CHECK_PACK_ONLY=1 (the default when $OUT is set, as on the device tool,
# which brings back at most 8 files) only these stay beside the archive: summary.txt,
# gpu_check.log, wgmma-tests.log, make-bench.log, bench-report.md and the roofs file.
# Environment: PYTHON (interpreter with the packages already there, default python3), OUT,
# GPU_CHECK_TOTAL_S, GPU_CHECK_TESTS (pytest paths for gpu-tests, default tests/),
# GPU_CHECK_PACK_ONLY, WHEELHOUSE, PYCUDA_TARGET.
set -u
cd "$(dirname "$0")/.."
ROOT=$(pwd)
OUT_DIR=${OUT:-results/_scratch/gpu-check}
mkdir -p "$OUT_DIR"
OUT_DIR=$(cd "$OUT_DIR" && pwd)
PY=${PYTHON:-python3}
T0=$(date +%s)
TOTAL_S=${GPU_CHECK_TOTAL_S:-480}
# GPU_CHECK_TIME_SCALE (a whole number, default 1) multiplies every time limit: the total above
# and each step's. Never set on the device; the tests set it on a slow or loaded machine, so
# that a step's limit is never raced against there (tests/standins/patience.py).
TIME_SCALE=${GPU_CHECK_TIME_SCALE:-1}
case $TIME_SCALE in ''|*[!0-9]*|0) echo "GPU_CHECK_TIME_SCALE=$TIME_SCALE: give a whole number >= 1" >&2; exit 2 ;; esac
TOTAL_S=$(( TOTAL_S * TIME_SCALE ))
PACK_ONLY=${GPU_CHECK_PACK_ONLY:-$([ -n "${OUT:-}" ] && echo 1 || echo 0)}
SUMMARY="$OUT_DIR/summary.txt"
: >"$SUMMARY"
: >"$OUT_DIR/gpu_check.log"

# The one way every script runs roofbench: the checkout itself, first on the path (python -m
# from this folder finds ./roofbench; PYTHONPATH carries it into pytest and subprocesses).
export PYTHON=$PY PYTHONUNBUFFERED=1 ROOT OUT_DIR
export PYTHONPATH="$ROOT${PYTHONPATH:+:$PYTHONPATH}"
# GPU images often keep the toolkit (nvcc, ncu) off PATH; numba-cuda finds libNVVM only
# through CUDA_HOME there (kernels/numba_compat.py says why): export the toolkit that has nvvm/.
for d in ${CUDA_HOME:-} /usr/local/cuda; do
  if ! command -v nvcc >/dev/null 2>&1 && [ -x "$d/bin/nvcc" ]; then export PATH="$d/bin:$PATH"; fi
  if [ -z "${CUDA_HOME:-}" ] && [ -d "$d/nvvm" ]; then export CUDA_HOME=$d; fi
done
PYVER=$("$PY" -c 'import sys; print("%d.%d" % sys.version_info[:2])' 2>/dev/null || echo unknown)
PYCUDA_TARGET=${PYCUDA_TARGET:-$ROOT/build/pycuda-py$PYVER}

elapsed() { echo $(( $(date +%s) - T0 )); }
record() { printf '%-16s %-26s %4ss  %s\n' "$@" | tee -a "$SUMMARY"; }

# step NAME SECONDS CMD...: run with a time limit, log to $OUT_DIR/NAME.log, never abort.
step() {
  local name=$1 limit=$(( $2 * TIME_SCALE ))
  shift 2
  local left=$(( TOTAL_S - $(elapsed) ))
  if [ "$left" -le 10 ]; then
    record "$name" "SKIPPED (time)" 0 "-"
    return 0
  fi
  [ "$limit" -gt "$left" ] && limit=$left
  local t
  t=$(date +%s)
  echo "== $name (limit ${limit}s, at $(elapsed)s): $*" | tee -a "$OUT_DIR/gpu_check.log"
  timeout --kill-after=5 "$limit" "$@" >"$OUT_DIR/$name.log" 2>&1
  local rc=$? verdict=ok
  if [ $rc -eq 124 ] || [ $rc -eq 137 ]; then verdict=TIMEOUT
  elif [ $rc -ne 0 ]; then verdict="FAILED (rc $rc)"; fi
  record "$name" "$verdict" $(( $(date +%s) - t )) "$OUT_DIR/$name.log"
  tail -n 5 "$OUT_DIR/$name.log" | sed 's/^/    /'
  return 0
}

facts() {
  date -u
  nvidia-smi || echo "nvidia-smi: not found or failed (no NVIDIA driver here)"
  "$PYTHON" --version
  if command -v nvcc >/dev/null; then nvcc --version | tail -n 2; else echo "nvcc: not found"; fi
  command -v ncu || echo "ncu: not found"
  "$PYTHON" -m pip list 2>/dev/null | grep -i -E \
    'cupy|numba|numpy|nvidia|cuda-|pycuda|torch|pandas|matplotlib|pytest|ml.dtypes|setuptools'
  echo "CUDA_HOME=${CUDA_HOME:-unset}"
  "$PYTHON" -c 'import roofbench.kernels.numba_compat
try:
    from numba.cuda.cuda_paths import get_cuda_paths
    p = get_cuda_paths()
    print("numba-cuda nvvm:", p["nvvm"]); print("numba-cuda nvrtc:", p.get("nvrtc"))
except Exception as e:
    print("numba-cuda nvvm: not found:", type(e).__name__, str(e).splitlines()[0] if str(e) else "")'
  "$PYTHON" -m roofbench.bench.cli list | sed -n '/^backends:/,$p'
  # The one thing this step requires: roofbench imports from this checkout.
  "$PYTHON" -c 'import roofbench, roofbench.bench.cli; print("roofbench:", roofbench.__file__)'
}

# pytest that fails when no test passed: on a machine without a GPU every test is skipped.
pytest_must_pass() {
  local log=$1
  shift
  "$PYTHON" -m pytest "$@"
  local rc=$?
  [ $rc -ne 0 ] && return $rc
  if ! grep -q -E '[0-9]+ passed' "$log"; then
    # The reason shared by the most skipped tests (pytest -rs: "SKIPPED [N] file:line: why").
    echo "no test ran: $(sed -n 's/^SKIPPED \[\([0-9]*\)\] [^ ]* /\1 /p' "$log" \
      | sort -k1,1nr | head -n 1 | cut -d' ' -f2-)"
    return 1
  fi
}

make_bench() {
  ROOFBENCH_NO_INSTALL=1 make -C "$ROOT" --no-print-directory bench \
    ARGS="--backend cuda --out $OUT_DIR/bench"
}
export -f facts pytest_must_pass make_bench

# PyCUDA: built from wheelhouse/ in the background (CPU only, niced, cores - 2 compiler jobs)
# while the GPU steps run; bench-pycuda waits for it.
PYCUDA_LOG="$OUT_DIR/pycuda-install.log"
pycuda_t0=$(date +%s)
rm -f "$OUT_DIR/.pycuda-install.rc" "$OUT_DIR/.pycuda-install.pid"
( nice -n 10 timeout --kill-after=5 $(( TOTAL_S - 30 )) bash scripts/pycuda_offline.sh \
    "$PYCUDA_TARGET" >"$PYCUDA_LOG" 2>&1 &
  echo $! >"$OUT_DIR/.pycuda-install.pid"
  wait $!
  echo "$? $(( $(date +%s) - pycuda_t0 ))" >"$OUT_DIR/.pycuda-install.rc.tmp"
  mv "$OUT_DIR/.pycuda-install.rc.tmp" "$OUT_DIR/.pycuda-install.rc" ) &
# timeout leads its own process group and passes TERM on to the build.
trap 'kill -TERM "$(cat "$OUT_DIR/.pycuda-install.pid" 2>/dev/null)" 2>/dev/null
      rm -f "$OUT_DIR/.pycuda-install.rc" "$OUT_DIR/.pycuda-install.pid"' EXIT

# Limits (s), each sized from a model or a first-contact time (docs/gpu-check.md); they add up
# to 455 s of the 480 (15 + 40 + 60 + 130 + 35 + 50 + 40 + 30 + 20 + 35).
step facts 15 bash -c facts  # 2 s at the first contact

# The flagship first: the wgmma GEMM validated on the device (edges, the ring wrapping, one
# device-filling size), by 55 s at the latest, in the check build: a wrong parity or byte count
# traps after a bounded wait with the barrier named (ROOFBENCH_BOUNDED_WAIT=1 adds
# -DRB_BOUNDED_WAIT to the sm_90a builds) instead of hanging until the step's limit.
step wgmma-tests 40 env ROOFBENCH_BOUNDED_WAIT=1 bash -c 'pytest_must_pass "$OUT_DIR/wgmma-tests.log" -m gpu -q -rs \
  -p no:cacheprovider -o addopts="--import-mode=importlib" \
  --junitxml="$OUT_DIR/wgmma-tests.xml" tests/kernels/test_wgmma.py'

# Full probes into roofs/<device>.json (written after every probe: a killed step keeps what it
# measured), where `make bench` and later runs find them; a copy goes to the output folder.
# The calibration time model gives 32 s on an H200.
touch "$OUT_DIR/.calibrate-start"
step calibrate 60 "$PY" -m roofbench.bench.cli calibrate --recalibrate --no-plot
ROOFS_ARG=()
for f in $(find "$ROOT/roofs" -maxdepth 1 -name '*.json' -newer "$OUT_DIR/.calibrate-start"); do
  cp "$f" "$OUT_DIR/" && ROOFS_ARG=(--roofs "$OUT_DIR/$(basename "$f")")
done
rm -f "$OUT_DIR/.calibrate-start"

# Every kernel at device-filling sizes (55 CUDA cases; inputs, reference and validation on the
# device; the wgmma cases each in a process of their own). The make-bench time model: 59 s.
step make-bench 130 bash -c make_bench

# The hand-written tensor GEMMs at 8192^3: the report gives each as a fraction of the library
# roof (efficiency) and of cuBLAS where both ran (make-bench: 4096^3).
step gemm-8192 35 "$PY" -m roofbench.bench.cli run --backend cuda --workload gemm --variant tensor \
  --dtype fp16 --dtype bf16 --dtype fp8 --size 8192x8192x8192 "${ROOFS_ARG[@]}" \
  --out "$OUT_DIR/gemm-8192"

# The other gpu-marked tests: 28 s at the first contact, when the Numba ones failed at once.
step gpu-tests 50 bash -c 'pytest_must_pass "$OUT_DIR/gpu-tests.log" -m gpu -q -rs \
  -p no:cacheprovider --maxfail=20 -o addopts="--import-mode=importlib" \
  --ignore=tests/kernels/test_wgmma.py --junitxml="$OUT_DIR/gpu-tests.xml" '"${GPU_CHECK_TESTS:-tests/}"

# 36 s there, every case failing at compile.
step bench-numba 40 "$PY" -m roofbench.bench.cli run --backend numba --quick \
  "${ROOFS_ARG[@]}" --out "$OUT_DIR/numba"

# PyCUDA: wait for the background install while the last steps still have their time.
while [ ! -f "$OUT_DIR/.pycuda-install.rc" ] && [ $(( TOTAL_S - $(elapsed) )) -gt 90 ]; do
  sleep 2
done
if [ -f "$OUT_DIR/.pycuda-install.rc" ]; then
  read -r pycuda_rc pycuda_s <"$OUT_DIR/.pycuda-install.rc"
else
  pycuda_rc=running pycuda_s=$(( $(date +%s) - pycuda_t0 ))
fi
case $pycuda_rc in
  0) record pycuda-install ok "$pycuda_s" "$PYCUDA_LOG" ;;
  3) record pycuda-install "skipped (see log)" "$pycuda_s" "$PYCUDA_LOG"
     tail -n 1 "$PYCUDA_LOG" | sed 's/^/    /' ;;
  running) record pycuda-install "unavailable (still building)" "$pycuda_s" "$PYCUDA_LOG"
     kill -TERM "$(cat "$OUT_DIR/.pycuda-install.pid")" 2>/dev/null ;;
  *) record pycuda-install "unavailable (rc $pycuda_rc)" "$pycuda_s" "$PYCUDA_LOG"
     tail -n 5 "$PYCUDA_LOG" | sed 's/^/    /' ;;
esac
[ "$pycuda_rc" = 0 ] && export PYTHONPATH="$PYTHONPATH:$PYCUDA_TARGET"
if "$PY" -c "import pycuda" >/dev/null 2>&1; then
  step bench-pycuda 30 "$PY" -m roofbench.bench.cli run --backend pycuda --quick \
    --workload l2norm --workload vector_add "${ROOFS_ARG[@]}" --out "$OUT_DIR/pycuda"
else
  record bench-pycuda "skipped (no PyCUDA)" 0 "-"
fi

# 9 s there (the Numba half failing at compile).
step launch-overhead 20 bash -c 'pytest_must_pass "$OUT_DIR/launch-overhead.log" -q -rs \
  -p no:cacheprovider -o addopts="--import-mode=importlib" tests/bench/backends/bench_launch_overhead.py \
  --benchmark-json="$OUT_DIR/launch_overhead.json"'

# Nsight Compute counters beside the model at the size of the hand-made H200 ncu runs (64M
# fp32 elements): each valid case runs once more under ncu (~5-10 s a case).
if command -v ncu >/dev/null 2>&1 || [ -n "${ROOFBENCH_NCU:-}" ]; then
  step ncu 35 "$PY" -m roofbench.bench.cli run --backend cuda --ncu --workload l2norm \
    --workload vector_add --dtype fp32 --size 64M "${ROOFS_ARG[@]}" --out "$OUT_DIR/ncu"
else
  record ncu "skipped (no ncu on PATH)" 0 "-"
fi

echo
echo "gpu-check finished in $(elapsed)s; everything is under $OUT_DIR"
cat "$SUMMARY"
# One archive of everything (unpack it into results/<device>/<stamp>/: README), and beside it
# the few files a reader wants first. The device tool brings back at most 8 files, 16 MiB each.
PACK=$(mktemp)
tar czf "$PACK" -C "$OUT_DIR" --exclude=gpu-check.tar.gz --exclude='.pycuda-install.*' . \
  && chmod 644 "$PACK" && mv "$PACK" "$OUT_DIR/gpu-check.tar.gz"
report=$(find "$OUT_DIR/bench" -name report.md 2>/dev/null | head -n 1)
[ -n "$report" ] && cp "$report" "$OUT_DIR/bench-report.md"
size=$(( $(stat -c %s "$OUT_DIR/gpu-check.tar.gz" 2>/dev/null || echo 0) / 1024 ))
echo "packed: gpu-check.tar.gz ${size} KiB" | tee -a "$OUT_DIR/gpu_check.log"
[ "$size" -gt $(( 15 * 1024 )) ] && echo "packed: over 15 MiB, the device tool may not bring it back"
printf '%-16s %-26s %4ss  %s\n' pack "${size} KiB" 0 "$OUT_DIR/gpu-check.tar.gz" >>"$SUMMARY"
if [ "$PACK_ONLY" = 1 ] && [ -s "$OUT_DIR/gpu-check.tar.gz" ]; then
  keep=(gpu-check.tar.gz summary.txt gpu_check.log wgmma-tests.log make-bench.log bench-report.md)
  [ ${#ROOFS_ARG[@]} -gt 0 ] && keep+=("$(basename "${ROOFS_ARG[1]}")")
  for f in "$OUT_DIR"/* "$OUT_DIR"/.[!.]*; do  # everything else is in the archive
    [ -e "$f" ] || continue
    name=$(basename "$f") kept=0
    for k in "${keep[@]}"; do [ "$name" = "$k" ] && kept=1; done
    [ $kept = 1 ] || rm -rf "$f"
  done
fi
# Exit non-zero when a step failed, timed out or found no time left.
! grep -q -E 'FAILED|TIMEOUT|SKIPPED \(time\)' "$SUMMARY"
