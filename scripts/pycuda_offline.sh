#!/usr/bin/env bash
# Install PyCUDA on a machine with no network, from the wheelhouse/ folder that
# `make wheelhouse` fills on a machine that has one (PyCUDA's sdist and its small dependencies).
#
#   scripts/pycuda_offline.sh [TARGET_DIR]      (default build/pycuda-py<X.Y>)
#
# PyCUDA is built against the CUDA toolkit found here (nvcc on PATH, $CUDA_HOME or
# /usr/local/cuda) and the driver's libcuda, without cuRAND (roofbench does not use it), and
# installed with `pip install --no-index --find-links wheelhouse --target TARGET_DIR`: the
# interpreter's own packages are left alone (no system install). Put TARGET_DIR on PYTHONPATH
# to use it. Exit status: 0 installed (or already importable from TARGET_DIR), 3 skipped (one
# line says which prerequisite is missing), other: the build failed (pip's output above).
# Environment: PYTHON (default python3), WHEELHOUSE (default <repo>/wheelhouse), CUDA_HOME,
# PYCUDA_LIBCUDA (a libcuda.so[.1] to link against), PARALLEL_CC_JOBS (default: cores - 2),
# PYCUDA_OFFLINE_DRY_RUN=1 (print the configuration and the pip command, run nothing).
set -u
case ${1:-} in "" | /*) ;; *) set -- "$(pwd)/$1" ;; esac  # TARGET_DIR relative to the caller
cd "$(dirname "$0")/.."
ROOT=$(pwd)
PY=${PYTHON:-python3}
WH=${WHEELHOUSE:-$ROOT/wheelhouse}
DRY=${PYCUDA_OFFLINE_DRY_RUN:-0}
skip() { echo "pycuda-offline: skipped: $*"; exit 3; }

pyver=$("$PY" -c 'import sys; print("%d.%d" % sys.version_info[:2])' 2>/dev/null) \
  || skip "$PY does not run"
TARGET=${1:-$ROOT/build/pycuda-py$pyver}

if [ "$DRY" != 1 ] && PYTHONPATH="$TARGET" "$PY" -c "import pycuda" >/dev/null 2>&1; then
  echo "pycuda-offline: already installed in $TARGET"
  exit 0
fi

# 1. The wheelhouse: PyCUDA's sdist (or a wheel built earlier for this interpreter).
sdist=$(ls "$WH"/pycuda-*.tar.gz "$WH"/pycuda-*.whl 2>/dev/null | tail -n 1)
[ -n "$sdist" ] || skip "no PyCUDA sdist or wheel in $WH (run \`make wheelhouse\` on a machine \
with network, then bring that folder here)"

# 2. The CUDA toolkit: nvcc and cuda.h.
cuda_root=
on_path=$(command -v nvcc || true)
for d in ${CUDA_HOME:-} ${CUDA_PATH:-} ${on_path:+"$(dirname "$(readlink -f "$on_path")")/.."} \
    /usr/local/cuda; do
  if [ -z "$cuda_root" ] && [ -x "$d/bin/nvcc" ] && [ -f "$d/include/cuda.h" ]; then
    cuda_root=$(cd "$d" && pwd)
  fi
done
[ -n "$cuda_root" ] || skip "no CUDA toolkit (bin/nvcc and include/cuda.h) in \$CUDA_HOME, \
beside the nvcc on PATH or in /usr/local/cuda"
nvcc=$cuda_root/bin/nvcc

# 3. A C++ compiler and the interpreter's headers (Python.h: the pythonX.Y-dev package).
command -v "${CXX:-g++}" >/dev/null 2>&1 || skip "no C++ compiler (${CXX:-g++})"
inc=$("$PY" -c 'import sysconfig; print(sysconfig.get_paths()["include"])')
[ -f "$inc/Python.h" ] || skip "no Python.h in $inc (install python$pyver-dev)"
"$PY" -c "import numpy" 2>/dev/null || skip "numpy is not importable by $PY (PyCUDA builds on it)"

# 4. libcuda to link against: the toolkit's stub, else the driver's library (often only
# libcuda.so.1 is there, so a link named libcuda.so is made beside the build).
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
libcuda=${PYCUDA_LIBCUDA:-}
if [ -z "$libcuda" ]; then
  for f in "$cuda_root"/lib64/stubs/libcuda.so "$cuda_root"/targets/*/lib/stubs/libcuda.so \
      "$cuda_root"/lib64/libcuda.so \
      $(ldconfig -p 2>/dev/null | sed -n 's/.*libcuda\.so\(\.1\)\? .*=> \(.*\)/\2/p') \
      /usr/lib/x86_64-linux-gnu/libcuda.so.1 /usr/lib64/libcuda.so.1; do
    [ -e "$f" ] && { libcuda=$f; break; }
  done
fi
[ -n "$libcuda" ] && [ -e "$libcuda" ] || skip "no libcuda.so to link against (the NVIDIA \
driver's library, or the toolkit's lib64/stubs); set PYCUDA_LIBCUDA"
mkdir -p "$TMP/lib"
ln -s "$(readlink -f "$libcuda")" "$TMP/lib/libcuda.so"

# PyCUDA's configuration (aksetup reads ~/.aksetup-defaults.py; HOME is a temporary folder
# for the build only, so nothing of the user's is read or written).
mkdir -p "$TMP/home"
cat >"$TMP/home/.aksetup-defaults.py" <<EOF
CUDA_ROOT = '$cuda_root'
CUDA_ENABLE_CURAND = False
CUDADRV_LIB_DIR = ['$TMP/lib']
CUDART_LIB_DIR = ['$cuda_root/lib64']
EOF

# 5. Build tools: --no-build-isolation uses this interpreter's setuptools, wheel and numpy (the
# wheelhouse holds no numpy); setuptools and wheel come from the wheelhouse when missing.
buildpath=$ROOT/scripts/parallel_cc
if ! "$PY" -c "import setuptools, wheel" >/dev/null 2>&1; then
  tools="$TMP/build-tools"
  run_tools=("$PY" -m pip install --quiet --no-index --find-links "$WH" --target "$tools"
             setuptools wheel)
  if [ "$DRY" = 1 ]; then echo "build tools: ${run_tools[*]}"
  else "${run_tools[@]}" || skip "setuptools/wheel missing and not installable from $WH"; fi
  buildpath=$buildpath:$tools
fi

# PyCUDA's runtime dependencies that this interpreter lacks (--target installs into an empty
# folder, so pip must not resolve numpy there: it is already importable).
deps=()
for pair in pytools:pytools mako:mako platformdirs:platformdirs siphash24:siphash24 \
    typing_extensions:typing_extensions markupsafe:markupsafe; do
  "$PY" -c "import ${pair%%:*}" >/dev/null 2>&1 || deps+=("${pair#*:}")
done

jobs=${PARALLEL_CC_JOBS:-$(( $(nproc 2>/dev/null || echo 2) - 2 ))}
[ "$jobs" -ge 1 ] || jobs=1
cmd=("$PY" -m pip install --no-index --find-links "$WH" --target "$TARGET" --upgrade
     --no-build-isolation --no-deps --no-cache-dir pycuda ${deps[@]+"${deps[@]}"})
echo "pycuda-offline: $(basename "$sdist") against $cuda_root ($("$nvcc" --version 2>&1 \
  | grep -o 'release [0-9.]*')), libcuda $libcuda, $jobs compiler jobs, into $TARGET"
echo "pycuda-offline: ${cmd[*]}"
if [ "$DRY" = 1 ]; then
  echo "aksetup defaults:"
  cat "$TMP/home/.aksetup-defaults.py"
  exit 0
fi
t0=$(date +%s)
mkdir -p "$TARGET"
# The checkout itself stays off the build's path (its bench/, build/, tests/ folders would be
# top-level names there); the rest of PYTHONPATH is kept.
keep=$(printf '%s' "${PYTHONPATH:-}" | tr ':' '\n' | grep -v -x -F -e "$ROOT" -e "" | paste -sd: -)
HOME=$TMP/home PATH=$cuda_root/bin:$PATH PARALLEL_CC_JOBS=$jobs \
  PYTHONPATH=$buildpath${keep:+:$keep} "${cmd[@]}"
rc=$?
echo "pycuda-offline: pip exit $rc after $(( $(date +%s) - t0 ))s"
exit $rc
