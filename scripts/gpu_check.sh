#!/usr/bin/env bash
# `make gpu-check`: one prepared check for a GPU machine, within 300 s (GPU_CHECK_TOTAL_S) so
# that a second run fits a 15-minute GPU slot, from a plain clone (no pip install of roofbench:
# the source tree is imported as it is, PYTHONPATH=<checkout>). The flagship first, then
# compute-sanitizer, the tests, the roofs and the run; the extras only with GPU_CHECK_EXTRAS=1.
#   facts            nvidia-smi, toolkit (each CUDA tool by its absolute path), python packages
#                    (cuda-bindings, cuda-pathfinder too), the libNVVM numba-cuda resolves,
#                    which roofbench, backends
#   wgmma-tests      the wgmma/TMA GEMM validated on the device (tests/kernels/test_wgmma.py -m gpu):
#                    done within the first 40 s
#   sanitize         compute-sanitizer memcheck, racecheck, synccheck and initcheck over every
#                    hand-written kernel and the wgmma GEMM at a small size
#                    (scripts/sanitize_kernels.py); reports in sanitizer.txt
#   gpu-tests        the other gpu-marked tests (fails when none passed: all skipped = no GPU)
#   calibrate        roofbench calibrate --recalibrate (full probes) -> roofs/<device>.json,
#                    written after every probe
#   make-bench       `ROOFBENCH_NO_INSTALL=1 make bench` as the README tells a user of an
#                    offline GPU box (CUDA backend, results under the output folder)
# The extras (GPU_CHECK_EXTRAS=1, a budget of their own: a second call):
#   triton           every Triton variant (`roofbench run --backend triton`, torch on the GPU) at
#                    make-bench's default sizes, results.json written after every case
#   triton-table     Triton vs CUDA C vs library per workload and dtype (time, % of roof,
#                    status; scripts/gpu_check_triton.py over the triton and make-bench
#                    results): triton-vs-cuda.md, also appended to gpu_check.log
#   gemm-8192        the hand-written tensor GEMMs at 8192^3
#   bench-numba      a quick run of every kernel on Numba CUDA
#   pycuda-install   PyCUDA built offline from wheelhouse/ (scripts/pycuda_offline.sh; in the
#                    background from the start; optional: never fails the check)
#   bench-pycuda     a quick run on PyCUDA, when it is importable
#   launch-overhead  host time per empty-kernel launch from each launcher (pytest-benchmark)
#   ncu              Nsight Compute counters beside the model
# Each step's limit is sized from a model that includes a fresh machine's caches (CuPy's kernel
# cache, matplotlib's font cache, Numba's compiles; docs/gpu-check.md): the calibration time
# model (tests/roofs/test_gpu_probes_nogpu.py) and the make-bench time model
# (tests/bench/suite/test_bench_time_model.py); the limits are set in one place (L_* below)
# and tests/scripts/test_gpu_check_script.py checks the order and that they fit the total.
# A failing step is recorded and the next one runs; a step with no time left is skipped. Every
# pytest step writes each test's outcome as it goes (<step>.progress, plus -rf and JUnit XML at
# its end), so a killed step still says what failed; after a kernel traps (a sticky CUDA error)
# the tests not yet run go on in a fresh process: a trap costs one case, not the step. Exit
# status non-zero when a step failed, timed out or was skipped.
# Output, under ${OUT:-results/_scratch/gpu-check}: one log per step, summary.txt (one line per
# step with its verdict and duration), the runs and the calibrated roofs, and gpu-check.tar.gz
# of it all. With GPU_CHECK_PACK_ONLY=1 (the default when $OUT is set, as on the device tool,
# which brings back at most 8 files) only these stay beside the archive: summary.txt,
# gpu_check.log, wgmma-tests.log, make-bench.log, bench-report.md, sanitizer.txt and the roofs
# file.
# Environment: PYTHON (interpreter with the packages already there, default python3), OUT,
# GPU_CHECK_TOTAL_S, GPU_CHECK_EXTRAS, GPU_CHECK_TESTS (pytest paths for gpu-tests, default
# tests/), GPU_CHECK_PACK_ONLY, GPU_CHECK_CUDA_DIRS (where to look for the CUDA install,
# default $CUDA_HOME /usr/local/cuda /usr/local/cuda-*), WHEELHOUSE, PYCUDA_TARGET.
set -u
cd "$(dirname "$0")/.."
ROOT=$(pwd)
OUT_DIR=${OUT:-results/_scratch/gpu-check}
mkdir -p "$OUT_DIR"
OUT_DIR=$(cd "$OUT_DIR" && pwd)
PY=${PYTHON:-python3}
T0=$(date +%s)
# Step limits (s), the one place they are set; docs/gpu-check.md gives the model of each. The
# core steps add up to 295 of the 300 s; the extras have a budget of their own.
L_FACTS=15 L_WGMMA=22 L_SANITIZE=40 L_GPU_TESTS=73 L_CALIBRATE=30 L_MAKE_BENCH=115
L_TRITON=100 L_TRITON_TABLE=10
L_GEMM_8192=35 L_BENCH_NUMBA=40 L_BENCH_PYCUDA=30 L_LAUNCH_OVERHEAD=15 L_NCU=35
EXTRAS=${GPU_CHECK_EXTRAS:-0}
EXTRAS_S=$(( L_TRITON + L_TRITON_TABLE + L_GEMM_8192 + L_BENCH_NUMBA + L_BENCH_PYCUDA + L_LAUNCH_OVERHEAD + L_NCU ))
TOTAL_S=${GPU_CHECK_TOTAL_S:-$([ "$EXTRAS" = 1 ] && echo $(( 300 + EXTRAS_S )) || echo 300)}
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
# The calibration cache in the checkout's roofs/ (collected below), not the per-user cache.
export ROOFBENCH_HOME="${ROOFBENCH_HOME:-$ROOT}"
# GPU images often keep the toolkit (nvcc, ncu, compute-sanitizer) off PATH: every tool is found
# by its absolute path under the CUDA install ($CUDA_HOME, /usr/local/cuda, the newest
# /usr/local/cuda-*; ncu also in Nsight Compute's own folder), PATH last. numba-cuda finds
# libNVVM only through CUDA_HOME there (kernels/numba_compat.py says why): export the toolkit
# that has nvvm/.
CUDA_DIRS=${GPU_CHECK_CUDA_DIRS:-"${CUDA_HOME:-} /usr/local/cuda $(ls -d /usr/local/cuda-* 2>/dev/null | sort -rV)"}
cuda_tool() {
  local name=$1 d c
  for d in $CUDA_DIRS; do
    for c in "$d/bin/$name" "$d/$name/$name"; do  # compute-sanitizer/compute-sanitizer too
      if [ -f "$c" ] && [ -x "$c" ]; then echo "$c"; return 0; fi
    done
  done
  if [ "$name" = ncu ] && [ -z "${GPU_CHECK_CUDA_DIRS:-}" ]; then
    for c in $(ls -d /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | sort -rV); do
      if [ -x "$c" ]; then echo "$c"; return 0; fi
    done
  fi
  command -v "$name" 2>/dev/null || true
}
NVCC=$(cuda_tool nvcc) NCU=$(cuda_tool ncu) SANITIZER=$(cuda_tool compute-sanitizer)
export NVCC NCU SANITIZER CUDA_DIRS
[ -n "$NVCC" ] && ! command -v nvcc >/dev/null 2>&1 && export PATH="$(dirname "$NVCC"):$PATH"
[ -n "$NCU" ] && export ROOFBENCH_NCU=${ROOFBENCH_NCU:-$NCU}  # roofbench --ncu uses it
for d in $CUDA_DIRS; do
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
  echo "nvcc: ${NVCC:-not found under the CUDA install nor on PATH}"
  [ -n "$NVCC" ] && "$NVCC" --version | tail -n 2
  echo "ncu: ${NCU:-not found under the CUDA install nor on PATH}"
  echo "compute-sanitizer: ${SANITIZER:-not found under the CUDA install nor on PATH}"
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

# pytest_resumable LOG ARGS...: pytest with the progress plugin (scripts/gpu_check_progress.py:
# each test's outcome in <LOG without .log>.progress as it happens; -rf lists the failures at
# the end). When pytest stops after a sticky CUDA error (status 75) or dies (a signal), it is
# started again for the tests not yet run: a trapping kernel costs its one test.
pytest_resumable() {
  local log=$1
  shift
  local prog="${log%.log}.progress" rc tries=0
  : >"$prog"
  while :; do
    GPU_CHECK_PROGRESS=$prog PYTHONPATH="$ROOT/scripts:$PYTHONPATH" \
      "$PYTHON" -m pytest -p gpu_check_progress -rf "$@"
    rc=$?
    if [ $rc -ne 75 ] && [ $rc -lt 128 ]; then break; fi
    tries=$(( tries + 1 ))
    [ $tries -ge 10 ] && break
    echo "gpu-check: pytest stopped (status $rc) in $(died_in "$prog"); the tests not yet run go on"
  done
  [ $rc -eq 75 ] && rc=1
  local died
  died=$(died_in "$prog")
  [ -n "$died" ] && echo "gpu-check: died in $died" && [ $rc -eq 0 ] && rc=1
  grep -E '^failed ' "$prog" | sed 's/^/gpu-check: /'
  grep -q -E '^failed ' "$prog" && [ $rc -eq 0 ] && rc=1
  return $rc
}
# The tests (or cases) of a progress file that started and never finished.
died_in() {
  awk '$1 == "start" { s[$2] = 1; next } { id = $2; sub(/:$/, "", id); delete s[id] }
       END { for (i in s) printf "%s ", i }' "$1"
}

# pytest that fails when no test passed: on a machine without a GPU every test is skipped.
pytest_must_pass() {
  local log=$1
  shift
  pytest_resumable "$log" "$@"
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
# sanitize: every hand-written kernel and the wgmma GEMM (scripts/sanitize_kernels.py) under
# each compute-sanitizer tool, the time left shared among the tools still to run; each tool's
# report in sanitizer-<tool>.txt. The driver records each case as it goes and, after a sticky
# error or a crash, starts again for the rest: a trapping kernel costs its one case.
sanitize() {
  if [ -z "$SANITIZER" ]; then
    echo "compute-sanitizer: not found under the CUDA install ($CUDA_DIRS) nor on PATH"
    return 1
  fi
  local tools=(memcheck racecheck synccheck initcheck) end=$(( $(date +%s) + SANITIZE_S - 2 ))
  local i tool rep prog rc tries verdict=0
  for i in "${!tools[@]}"; do
    tool=${tools[$i]} rep="$OUT_DIR/sanitizer-$tool.txt" prog="$OUT_DIR/sanitizer-$tool.progress"
    : >"$rep"
    : >"$prog"
    tries=0
    while :; do
      local share=$(( (end - $(date +%s)) / (${#tools[@]} - i) ))
      [ $share -lt 3 ] && { echo "$tool: no time left" >>"$rep"; rc=124; break; }
      timeout --kill-after=2 "$share" "$SANITIZER" --tool "$tool" --print-limit 20 \
        --error-exitcode 9 "$PYTHON" "$ROOT/scripts/sanitize_kernels.py" --progress "$prog" \
        >>"$rep" 2>&1
      rc=$?
      if [ $rc -ne 75 ] && [ $rc -lt 128 ]; then break; fi
      tries=$(( tries + 1 ))
      [ $tries -ge 10 ] && break
      echo "gpu-check: $tool stopped (status $rc) in $(died_in "$prog")" >>"$rep"
    done
    echo "$tool: $(grep -c '^ok ' "$prog") cases ok, $(grep -c '^failed ' "$prog") failed," \
      "died in: $(died_in "$prog")${rc:+; status $rc}; $(grep -h 'ERROR SUMMARY' "$rep" | tail -n 1)"
    grep -E '^failed ' "$prog" | sed "s/^/    $tool: /"
    tail -n 3 "$rep" | sed "s/^/    $tool| /"
    [ $rc -eq 0 ] || verdict=1
  done
  return $verdict
}
export -f facts pytest_resumable died_in pytest_must_pass make_bench sanitize

# PyCUDA (an extra): built from wheelhouse/ in the background (CPU only, niced, cores - 2
# compiler jobs) while the GPU steps run; bench-pycuda waits for it.
PYCUDA_LOG="$OUT_DIR/pycuda-install.log"
pycuda_t0=$(date +%s)
rm -f "$OUT_DIR/.pycuda-install.rc" "$OUT_DIR/.pycuda-install.pid"
if [ "$EXTRAS" = 1 ]; then
  ( nice -n 10 timeout --kill-after=5 $(( TOTAL_S - 30 )) bash scripts/pycuda_offline.sh \
      "$PYCUDA_TARGET" >"$PYCUDA_LOG" 2>&1 &
    echo $! >"$OUT_DIR/.pycuda-install.pid"
    wait $!
    echo "$? $(( $(date +%s) - pycuda_t0 ))" >"$OUT_DIR/.pycuda-install.rc.tmp"
    mv "$OUT_DIR/.pycuda-install.rc.tmp" "$OUT_DIR/.pycuda-install.rc" ) &
  # timeout leads its own process group and passes TERM on to the build.
  trap 'kill -TERM "$(cat "$OUT_DIR/.pycuda-install.pid" 2>/dev/null)" 2>/dev/null
        rm -f "$OUT_DIR/.pycuda-install.rc" "$OUT_DIR/.pycuda-install.pid"' EXIT
fi

step facts "$L_FACTS" bash -c facts

# The flagship first: the wgmma GEMM validated on the device (edges, the ring wrapping, one
# device-filling size) in the check build: a wrong parity or byte count traps after a bounded
# wait with the barrier named (ROOFBENCH_BOUNDED_WAIT=1 adds -DRB_BOUNDED_WAIT to the sm_90a
# builds) instead of hanging until the step's limit.
step wgmma-tests "$L_WGMMA" env ROOFBENCH_BOUNDED_WAIT=1 bash -c 'pytest_must_pass "$OUT_DIR/wgmma-tests.log" -m gpu -q -rs \
  -p no:cacheprovider -o addopts="--import-mode=importlib" \
  --junitxml="$OUT_DIR/wgmma-tests.xml" tests/kernels/test_wgmma.py'

# compute-sanitizer over every hand-written kernel and the wgmma GEMM, small sizes, early.
step sanitize "$L_SANITIZE" env SANITIZE_S="$L_SANITIZE" ROOFBENCH_BOUNDED_WAIT=1 bash -c sanitize
cat "$OUT_DIR"/sanitizer-*.txt >"$OUT_DIR/sanitizer.txt" 2>/dev/null

# The other gpu-marked tests (237: a quick calibration, the Numba twins each compiled).
step gpu-tests "$L_GPU_TESTS" bash -c 'pytest_must_pass "$OUT_DIR/gpu-tests.log" -m gpu -q -rs \
  -p no:cacheprovider -o addopts="--import-mode=importlib" \
  --ignore=tests/kernels/test_wgmma.py --junitxml="$OUT_DIR/gpu-tests.xml" '"${GPU_CHECK_TESTS:-tests/}"

# Quick probes into roofs/<device>.json (written after every probe: a killed step keeps what
# it measured), where `make bench` and later runs find them; a copy goes to the output folder.
touch "$OUT_DIR/.calibrate-start"
# --backend cuda: with no usable GPU, auto would calibrate the CPU (calibrate works there too).
step calibrate "$L_CALIBRATE" "$PY" -m roofbench.bench.cli calibrate --backend cuda --recalibrate --quick --no-plot
ROOFS_ARG=()
for f in $(find "$ROOT/roofs" -maxdepth 1 -name '*.json' -newer "$OUT_DIR/.calibrate-start"); do
  cp "$f" "$OUT_DIR/" && ROOFS_ARG=(--roofs "$OUT_DIR/$(basename "$f")")
done
rm -f "$OUT_DIR/.calibrate-start"

# Every kernel at device-filling sizes (inputs, reference and validation on the device; the
# wgmma cases each in a process of their own).
step make-bench "$L_MAKE_BENCH" bash -c make_bench

if [ "$EXTRAS" = 1 ]; then
  # The Triton variants beside the CUDA C ones: every Triton case at make-bench's default sizes
  # (results.json rewritten after every case: a run cut at its limit keeps what it finished),
  # then the table against make-bench's CUDA C and library cases, whatever either recorded.
  step triton "$L_TRITON" "$PY" -m roofbench.bench.cli run --backend triton "${ROOFS_ARG[@]}" \
    --out "$OUT_DIR/triton"
  step triton-table "$L_TRITON_TABLE" "$PY" "$ROOT/scripts/gpu_check_triton.py" \
    "$OUT_DIR/triton" "$OUT_DIR/bench" --out "$OUT_DIR/triton-vs-cuda.md" \
    --log "$OUT_DIR/triton.log" --append "$OUT_DIR/gpu_check.log"  # that log comes back
  # The hand-written tensor GEMMs at 8192^3 (make-bench: 4096^3).
  step gemm-8192 "$L_GEMM_8192" "$PY" -m roofbench.bench.cli run --backend cuda --workload gemm \
    --variant tensor --dtype fp16 --dtype bf16 --dtype fp8 --size 8192x8192x8192 \
    "${ROOFS_ARG[@]}" --out "$OUT_DIR/gemm-8192"
  step bench-numba "$L_BENCH_NUMBA" "$PY" -m roofbench.bench.cli run --backend numba --quick \
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
    step bench-pycuda "$L_BENCH_PYCUDA" "$PY" -m roofbench.bench.cli run --backend pycuda --quick \
      --workload l2norm --workload vector_add "${ROOFS_ARG[@]}" --out "$OUT_DIR/pycuda"
  else
    record bench-pycuda "skipped (no PyCUDA)" 0 "-"
  fi
  step launch-overhead "$L_LAUNCH_OVERHEAD" bash -c 'pytest_must_pass "$OUT_DIR/launch-overhead.log" -q -rs \
    -p no:cacheprovider -o addopts="--import-mode=importlib" tests/bench/backends/bench_launch_overhead.py \
    --benchmark-json="$OUT_DIR/launch_overhead.json"'
  # Nsight Compute counters beside the model at the size of the hand-made H200 ncu runs (64M
  # fp32 elements): each valid case runs once more under ncu (~5-10 s a case).
  if [ -n "$NCU" ]; then
    step ncu "$L_NCU" "$PY" -m roofbench.bench.cli run --backend cuda --ncu --workload l2norm \
      --workload vector_add --dtype fp32 --size 64M "${ROOFS_ARG[@]}" --out "$OUT_DIR/ncu"
  else
    record ncu "skipped (no ncu under the CUDA install nor on PATH)" 0 "-"
  fi
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
  keep=(gpu-check.tar.gz summary.txt gpu_check.log wgmma-tests.log make-bench.log bench-report.md
        sanitizer.txt)
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
