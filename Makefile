# Two commands for a newcomer: `make bench` and `make test`. See README.md.
SHELL := /bin/bash
PYTHON ?= python3
export PYTHON

.PHONY: bench test lint gpu-check cpu-ref clean

# Sets itself up (.venv + the CUDA wheel set matching the driver, none without a GPU), then
# measures roofs, runs every kernel on the best backend, plots and writes the report.
bench:
	@py=$$(scripts/setup_env.sh) && $$py -m roofbench.bench.cli bench $(ARGS)

test:
	@py=$$(scripts/setup_env.sh dev) && $$py -m ruff check . && $$py -m pytest $(ARGS)

lint:
	@py=$$(scripts/setup_env.sh dev) && $$py -m ruff check .

# One prepared script for a GPU machine: GPU tests + a short bench of every kernel + calibrate,
# everything under $${OUT:-results/_scratch/gpu-check}. Uses installed packages, installs nothing.
gpu-check:
	@bash scripts/gpu_check.sh

# The C reference programs (triad, FMA) the CPU probes are compared against.
cpu-ref:
	@py=$$(scripts/setup_env.sh) && $$py -m roofbench.bench.cpu_reference

clean:
	rm -rf build *.egg-info results/_scratch
