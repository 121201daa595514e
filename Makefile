# Two commands on a fresh machine with python3 and make: `make demo` and `make test`.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP_RUN := $(VENV)/.installed-run
STAMP_DEV := $(VENV)/.installed-dev

.PHONY: demo test lint typecheck unit bench clean browser kernels

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip

$(STAMP_RUN): pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install --quiet -e .
	touch $@

$(STAMP_DEV): pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install --quiet -e '.[dev]'
	touch $@ $(STAMP_RUN)

# The ahead-of-time kernel library (gpumosaic/kernel_aot.py: the fill's and the round
# mechanism's kernels without numba's ~0.6 s start-up; about 45 s of CPU once, measured in
# the README). Built only when the library for the kernel sources' hash is missing: `make
# demo` then `make test` (or the reverse) builds it once; a kernel change (a new hash)
# builds it again. Without it the kernels run through numba's JIT. `make kernels` always
# builds.
KERNELS_IF_MISSING = $(BIN)/python -c "import sys; from gpumosaic.kernel_aot import aot_paths; \
	sys.exit(not aot_paths()[0].exists())" || $(BIN)/gpumosaic kernels

kernels: $(STAMP_RUN)
	$(BIN)/gpumosaic kernels

# The spatial-sharing experiment: 4 x V100, 50 fractional jobs at t=0, FIFO,
# worst-fit (Gavel's "strided") / best-fit / first-fit / FGD placement, seeds 0..9.
demo: $(STAMP_RUN)
	@$(KERNELS_IF_MISSING)
	$(BIN)/gpumosaic compare --cluster v100:4 --workload gavel:jobs=50,rate=0,milli=spatial \
		--policy fifo --placements worstfit,bestfit,firstfit,fgd --seeds 0-9 --out runs/demo

lint: $(STAMP_DEV)
	$(BIN)/ruff check src tests bench
	$(BIN)/ruff format --check src tests bench

typecheck: $(STAMP_DEV)
	$(BIN)/mypy src/gpumosaic

unit: $(STAMP_DEV)
	@$(KERNELS_IF_MISSING)
	$(BIN)/python -m pytest

test: lint typecheck browser unit

# Headless Chromium for the report test (tests/experiments/study): Debian's package, about
# 2 minutes when it is missing (apt-get, root). Where it cannot be installed the set-up says
# so and that one test is skipped with its reason; nothing else depends on it.
browser:
	@command -v chromium >/dev/null 2>&1 || (apt-get update -qq && apt-get install -y -qq chromium) \
		|| echo "chromium could not be installed: the report's browser test will be skipped"

bench: $(STAMP_RUN)
	$(BIN)/python bench/bench_simulate.py

clean:
	rm -rf $(VENV) runs .pytest_cache .mypy_cache .ruff_cache
