#!/usr/bin/env bash
# Make a Python environment that can run roofbench, and print the python to use.
#
#   scripts/setup_env.sh [dev]     -> prints the path of the python to run
#
# - Creates .venv (if missing) and installs roofbench editable with the right extras:
#   the CUDA wheel set (cuda12 / cuda13) that matches the driver `nvidia-smi` reports, none
#   without a GPU; `dev` adds the test tools and the pinned CUDA compile toolchain.
# - ROOFBENCH_NO_INSTALL=1 (or a box that cannot reach a package index): install nothing; use
#   the interpreter ($PYTHON, default python3) whose packages are already importable. roofbench
#   itself is the source tree: `python -m roofbench...` from the checkout root imports it as it
#   is (roofbench/__init__.py adds kernels/, bench/, roofs/), which is how make runs it.
set -euo pipefail
cd "$(dirname "$0")/.."
want=${1:-}
PY=${PYTHON:-python3}
VENV=${VENV:-.venv}
log() { echo "setup: $*" >&2; }

cuda_extra() {
  command -v nvidia-smi >/dev/null 2>&1 || return 0
  local v
  v=$(nvidia-smi 2>/dev/null | sed -n 's/.*CUDA Version: *\([0-9]*\)\..*/\1/p' | head -n1)
  case "$v" in
    12) echo cuda12 ;;
    13|14|15) echo cuda13 ;;
    *) ;;
  esac
}

offline() {
  [ "${ROOFBENCH_NO_INSTALL:-0}" = 1 ] && return 0
  # No index reachable in 20 s: treat as an offline box. (5 s was too short on a busy
  # machine: pip's own start-up took 5.8 s under a load average of 10.)
  timeout 20 "$PY" -m pip download --no-deps --quiet -d "$(mktemp -d)" pip==24.0 \
    >/dev/null 2>&1 && return 1
  return 0
}

if offline; then
  log "no install (ROOFBENCH_NO_INSTALL=1 or no package index): using $PY as it is"
  # The source tree from this folder: a missing dependency is one line now, not a traceback.
  if ! err=$("$PY" scripts/check_source_tree.py 2>&1); then
    log "$PY cannot run roofbench from $(pwd): $(printf '%s\n' "$err" | tail -n 1)"
    exit 1
  fi
  command -v "$PY"
  exit 0
fi

if [ ! -x "$VENV/bin/python" ]; then
  log "creating $VENV"
  "$PY" -m venv "$VENV"
fi
extras=$(cuda_extra)
extras="${extras:+$extras,}report"  # report.html: Bokeh, inlined in the page
[ "$want" = dev ] && extras="${extras:+$extras,}dev,cudatools,mpi"
stamp="$VENV/.roofbench-installed-${extras:-base}"
# make test's environment gets no bytecode up front: pip compiles every module of torch, JAX,
# Triton..., most of the install's time (docs/tests.md), and a test session imports a few of
# them (with PYTHONDONTWRITEBYTECODE, from a folder of its own: tests/conftest.py). make
# bench's processes each import the same modules, so its environment has them compiled.
uncompiled="$VENV/.roofbench-uncompiled"
nocompile=""
[ "$want" = dev ] && nocompile=--no-compile
if [ ! -f "$stamp" ] || [ pyproject.toml -nt "$stamp" ]; then
  log "installing roofbench${extras:+[$extras]} into $VENV"
  [ "$want" = dev ] && touch "$uncompiled"
  "$VENV/bin/python" -m pip install --quiet $nocompile --upgrade "pip>=23" \
    "setuptools>=68" wheel >&2
  "$VENV/bin/python" -m pip install --quiet $nocompile -e ".${extras:+[$extras]}" >&2
  # transformers 5 (a test dependency) pulls PyPI's `kernels`, whose import name is our
  # kernels/ folder's: with it installed, transformers fails to import from the checkout.
  # It is optional to transformers; removed so the tests use the models they build.
  if [ "$want" = dev ]; then
    "$VENV/bin/python" -m pip uninstall --quiet -y kernels >/dev/null 2>&1 || true
  fi
  touch "$stamp"
fi
if [ "$want" != dev ] && [ -f "$uncompiled" ]; then
  log "compiling the bytecode make test's install left out"
  site=$("$VENV/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
  "$VENV/bin/python" -m compileall -q -j 0 "$site" >/dev/null 2>&1 || true
  rm -f "$uncompiled"
fi
echo "$VENV/bin/python"
