# llmload: the README's commands. Each one creates or refreshes the local virtualenv first.
PY ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: demo test bench lint venv system-deps clean

$(STAMP): pyproject.toml
	@test -x $(BIN)/python || $(PY) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -q -e '.[dev]'
	@touch $(STAMP)

venv: $(STAMP)

system-deps:
	@bash scripts/system-deps.sh

## make demo: two simulated engines compared side by side (about a minute)
demo: $(STAMP)
	$(BIN)/llmload run scenarios/quickstart.yaml --results results/quickstart

## make test: lint, then the whole suite (real processes, real InfluxDB/VictoriaMetrics, real Chromium)
test: $(STAMP) system-deps
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/python -m pytest -q -ra

## make bench: speed and accuracy benchmarks (ratios against baselines measured in the same run)
bench: $(STAMP)
	$(BIN)/python bench/run_all.py

lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

clean:
	rm -rf $(VENV) results .pytest_cache .ruff_cache test-artifacts
