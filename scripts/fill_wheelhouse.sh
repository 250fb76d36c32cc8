#!/usr/bin/env bash
# `make wheelhouse`: on a machine WITH network, download what scripts/pycuda_offline.sh needs to
# build PyCUDA on a GPU machine without one, into ${WHEELHOUSE:-wheelhouse}/ (git-ignored):
#   - PyCUDA's sdist (it has no Linux wheels; it is built there against that machine's CUDA),
#   - its pure-Python and small binary dependencies (pytools, platformdirs, siphash24,
#     typing_extensions, mako, MarkupSafe) as wheels for each CPython in WHEELHOUSE_PYTHONS
#     (default 3.10-3.13, manylinux x86_64), and setuptools + wheel for the build.
# numpy is not included: the GPU machine has it, and PyCUDA builds against that one.
# About 4 MB. Copy the folder into the checkout on the GPU machine; `make gpu-check` uses it.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
WH=${WHEELHOUSE:-wheelhouse}
PYCUDA_REQ=${PYCUDA_REQ:-pycuda>=2024.1}
mkdir -p "$WH"
pip_dl() { "$PY" -m pip download --quiet --disable-pip-version-check -d "$WH" "$@"; }

echo "wheelhouse: $PYCUDA_REQ (sdist) into $WH/"
pip_dl --no-deps --no-binary pycuda "$PYCUDA_REQ"
for v in ${WHEELHOUSE_PYTHONS:-3.10 3.11 3.12 3.13}; do
  echo "wheelhouse: PyCUDA's dependencies for CPython $v"
  pip_dl --only-binary :all: --implementation cp --python-version "$v" \
    --platform manylinux2014_x86_64 --platform manylinux_2_17_x86_64 \
    --platform manylinux_2_28_x86_64 \
    pytools platformdirs mako setuptools wheel
done
ls -l "$WH"
du -sh "$WH"
