# Two commands on a fresh machine with python3 and make: `make demo` and `make test`.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP_RUN := $(VENV)/.installed-run
STAMP_DEV := $(VENV)/.installed-dev

.PHONY: demo test lint typecheck unit bench clean browser

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip

$(STAMP_RUN): pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install --quiet -e .
	touch $@

$(STAMP_DEV): pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install --quiet -e '.[dev]'
	touch $@ $(STAMP_RUN)

# The spatial-sharing experiment: 4 x V100, 50 fractional jobs at t=0, FIFO,
# worst-fit (Gavel's "strided") / best-fit / first-fit / FGD placement, seeds 0..9.
demo: $(STAMP_RUN)
	$(BIN)/gpumosaic compare --cluster v100:4 --workload gavel:jobs=50,rate=0,milli=spatial \
		--policy fifo --placements worstfit,bestfit,firstfit,fgd --seeds 0-9 --out runs/demo

lint: $(STAMP_DEV)
	$(BIN)/ruff check src tests bench
	$(BIN)/ruff format --check src tests bench

typecheck: $(STAMP_DEV)
	$(BIN)/mypy src/gpumosaic

unit: $(STAMP_DEV)
	$(BIN)/python -m pytest

test: lint typecheck unit

# Headless Chromium for the report test (tests/experiments/study): Debian's package, about
# 2 minutes and root needed, so not part of `make test`; without it that one test is skipped.
browser:
	command -v chromium >/dev/null || (apt-get update -qq && apt-get install -y -qq chromium)

bench: $(STAMP_RUN)
	$(BIN)/python bench/bench_simulate.py

clean:
	rm -rf $(VENV) runs .pytest_cache .mypy_cache .ruff_cache
