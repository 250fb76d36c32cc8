# Two commands for a newcomer: `make bench` and `make test`. See README.md.
SHELL := /bin/bash
PYTHON ?= python3
export PYTHON

.PHONY: bench test lint gpu-check wheelhouse cpu-ref clean

# Sets itself up (.venv + the CUDA wheel set matching the driver, none without a GPU), then
# measures roofs, runs every kernel on the best backend, plots and writes the report.
bench:
	@py=$$(scripts/setup_env.sh) && $$py -m roofbench.bench.cli bench $(ARGS)

# --durations=25: every run names its 25 slowest tests, and its 15 slowest files with their wall
# and CPU seconds (tests/conftest.py): where the minutes go (docs/tests.md)
test:
	@py=$$(scripts/setup_env.sh dev) && $$py -m ruff check . && $$py scripts/typecheck.py && \
		$$py -m pytest -n $${PYTEST_WORKERS:-2} --dist loadfile --no-loadscope-reorder \
		--durations=25 $(ARGS)

lint:
	@py=$$(scripts/setup_env.sh dev) && $$py -m ruff check . && $$py scripts/typecheck.py

# One prepared script for a GPU machine, from a plain clone: GPU tests, calibrate, make bench,
# Numba and PyCUDA runs, launch overhead; everything under $${OUT:-results/_scratch/gpu-check}.
# Uses the packages already there; installs only PyCUDA, offline from wheelhouse/ into build/.
gpu-check:
	@bash scripts/gpu_check.sh

# On a machine with network: PyCUDA's sdist and small dependencies into wheelhouse/ (git-ignored)
# for gpu-check on a GPU machine without one.
wheelhouse:
	@bash scripts/fill_wheelhouse.sh

# The C reference programs (triad, FMA) the CPU probes are compared against.
cpu-ref:
	@py=$$(scripts/setup_env.sh) && $$py scripts/cpu_reference.py

clean:
	rm -rf build *.egg-info results/_scratch
