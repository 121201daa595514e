# Two commands on a fresh machine with python3 and make: `make demo` and `make test`.
# The test lanes and their budgets on a quiet 2-core machine (README, "Tests"):
#   make check            lint, types, every test not marked slow          <= 90 s
#   make test             CI: lint, types, every test, a coverage figure   <= 10 min
#   make test-under-load  make test's suite 3 times beside 4 busy processes (must pass)
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP_RUN := $(VENV)/.installed-run
STAMP_DEV := $(VENV)/.installed-dev

.PHONY: demo test check lint typecheck unit test-under-load bench clean browser slurm kernels \
	kernels-if-missing

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip

$(STAMP_RUN): pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install --quiet -e .
	touch $@

$(STAMP_DEV): pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install --quiet -e '.[dev]'
	touch $@ $(STAMP_RUN)

# The ahead-of-time kernel library (gpumosaic/kernel_aot.py: the kernels without numba's
# ~0.6 s start-up). `gpumosaic kernels --if-missing` builds the groups of it not built yet
# for the kernel sources' hash, in parallel, into a user cache that every clone of the same
# sources shares ($XDG_CACHE_HOME/gpumosaic), and says so with the time it expects; `make
# demo` builds only the group its runs use (placement), `make test`/`check`/`bench` all.
# When it cannot build, make says so and goes on (the kernels run through numba's JIT,
# same results), and the next make tries again. `make kernels` always builds all.
KERNELS_FAILED := make: the ahead-of-time kernel library did not build (see above); the \
	kernels run through numba's JIT, and the next make tries again
KERNELS_IF_MISSING = $(BIN)/gpumosaic kernels --if-missing || echo "$(KERNELS_FAILED)" >&2
KERNELS_FOR_DEMO = $(BIN)/gpumosaic kernels --if-missing --group placement \
	|| echo "$(KERNELS_FAILED)" >&2

kernels-if-missing: $(STAMP_RUN)
	@$(KERNELS_IF_MISSING)

kernels: $(STAMP_RUN)
	$(BIN)/gpumosaic kernels

# The spatial-sharing experiment: 4 x V100, 50 fractional jobs at t=0, FIFO,
# worst-fit (Gavel's "strided") / best-fit / first-fit / FGD placement, seeds 0..9.
demo: $(STAMP_RUN)
	@$(KERNELS_FOR_DEMO)
	$(BIN)/gpumosaic compare --cluster v100:4 --workload gavel:jobs=50,rate=0,milli=spatial \
		--policy fifo --placements worstfit,bestfit,firstfit,fgd --seeds 0-9 --out runs/demo

lint: $(STAMP_DEV)
	$(BIN)/ruff check src tests bench
	$(BIN)/ruff format --check src tests bench

typecheck: $(STAMP_DEV)
	$(BIN)/mypy src/gpumosaic

# Both cores: two pytest-xdist workers; the tests that start Ray are one group, run by one
# worker (tests/conftest.py), so one local Ray runs at a time.
PARALLEL := -n 2 --dist loadgroup

# --durations: the slowest tests at the end of every run, to keep `make test` short.
# --cov: the line coverage of gpumosaic by the test processes, printed as one figure.
unit: $(STAMP_DEV)
	@$(KERNELS_IF_MISSING)
	$(BIN)/python -m pytest $(PARALLEL) --durations=25 --cov --cov-report=
	@echo "coverage: $$($(BIN)/coverage report --format=total)% of gpumosaic's lines"

test: lint typecheck browser slurm unit

# The fast lane: lint, types and every test not marked slow (`@pytest.mark.slow`: a test
# over ~3 s alone); mypy's cache keeps the types step to seconds after the first run.
check: $(STAMP_DEV)
	@$(KERNELS_IF_MISSING)
	$(BIN)/ruff check src tests bench
	$(BIN)/ruff format --check src tests bench
	$(BIN)/mypy src/gpumosaic
	$(BIN)/python -m pytest -m "not slow" $(PARALLEL)

# `make test`'s suite three times in a row beside four busy processes (two per core here):
# a test that leans on timing fails here first (lint and types do not depend on load). The
# busy processes end with the target.
test-under-load: $(STAMP_DEV)
	@busy=""; for i in 1 2 3 4; do $(BIN)/python -c 'while True: pass' & busy="$$busy $$!"; done; \
	trap 'kill $$busy' EXIT INT TERM; \
	for run in 1 2 3; do \
		start=$$(date +%s); \
		$(MAKE) --no-print-directory unit || exit 1; \
		echo "make test-under-load: run $$run of 3 passed in $$(( $$(date +%s) - start )) s"; \
	done

# Headless Chromium for the report test (tests/experiments/study): Debian's package, about
# 2 minutes when it is missing (apt-get, root). Where it cannot be installed the set-up says
# so and that one test is skipped with its reason; nothing else depends on it.
browser:
	@command -v chromium >/dev/null 2>&1 || (apt-get update -qq && apt-get install -y -qq chromium) \
		|| echo "chromium could not be installed: the report's browser test will be skipped"

# A throw-away Slurm for the tests on a real Slurm (tests/slurm_cluster.py): Debian's munge,
# slurmctld, slurmd and slurm-client (22.05), installed once when missing (apt-get, root).
# Where they cannot be installed the set-up says so and those tests are skipped.
SLURM_PACKAGES := munge slurmctld slurmd slurm-client
slurm:
	@PATH="$$PATH:/usr/sbin" sh -c 'for b in sbatch slurmctld slurmd munged; do \
		command -v $$b || exit 1; done' >/dev/null 2>&1 \
		|| (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq \
		--no-install-recommends $(SLURM_PACKAGES) >/dev/null) \
		|| echo "Slurm could not be installed: the tests on a real Slurm will be skipped"

bench: $(STAMP_RUN)
	@$(KERNELS_IF_MISSING)
	$(BIN)/python bench/bench_simulate.py

clean:
	rm -rf $(VENV) runs .pytest_cache .mypy_cache .ruff_cache
