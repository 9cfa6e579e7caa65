# The two commands of the README, each from a fresh clone:
#   make run    creates .venv, installs servesim, simulates the embedded default scenario
#   make test   creates .venv, installs every extra, runs ruff and the whole test suite
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
OUT ?= results/default

.PHONY: run test lint bench bench-kernels clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip

$(VENV)/.core: pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install -q -e .
	touch $@

$(VENV)/.all: pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install -q -e '.[kernels,dev,aiconfigurator,ray]'
	touch $@ $(VENV)/.core

run: $(VENV)/.core
	$(BIN)/servesim run --out $(OUT)

test: $(VENV)/.all
	$(BIN)/ruff check .
	$(BIN)/python -m pytest -q -n 2 --dist loadgroup

lint: $(VENV)/.all
	$(BIN)/ruff check .

bench: $(VENV)/.core
	$(BIN)/python benchmarks/bench_sim.py

bench-kernels: $(VENV)/.all
	$(BIN)/python kernels/bench.py

clean:
	rm -rf $(VENV) results .pytest_cache .ruff_cache
