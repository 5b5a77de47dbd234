# Khora developer commands. The two that matter:
#   make demo   set everything up and run the main job on the embedded store
#   make test   set everything up and run the whole suite; the session fixtures start real
#               PostgreSQL + pgvector and Neo4j on loopback once and stop them at the end
#
# The virtual environment lives outside the clone, keyed by the hash of pyproject.toml, so a
# second run (or a second clone on the same machine) reuses it; pip and Maven keep their
# usual caches (~/.cache/pip, ~/.m2).

SHELL := /bin/bash
PYTHON ?= python3
CACHE_DIR ?= $(HOME)/.cache/khora
PYPROJECT_HASH := $(shell sha256sum pyproject.toml | cut -c1-12)
VENV ?= $(CACHE_DIR)/venv-$(PYPROJECT_HASH)
PY := $(VENV)/bin/python
STAMP := $(VENV)/.khora-installed
PYTEST_ARGS ?=

export LITELLM_LOCAL_MODEL_COST_MAP := True
export HF_HUB_OFFLINE := 1
export TRANSFORMERS_OFFLINE := 1
export TOKENIZERS_PARALLELISM := false

.PHONY: help venv install demo test test-unit test-installed test-wheel test-lowest lint format services-up services-down cassettes bench bench-storage bench-ingest bench-multihop bench-locomo bench-latency clean

help:
	@echo "make demo    - remember the sample corpus and run recalls on the embedded store"
	@echo "make test    - the whole suite against real PostgreSQL + pgvector and Neo4j"
	@echo "make test-installed - the built wheel in fresh environments (newest and lowest dependencies)"
	@echo "make test-unit, make lint, make cassettes, make bench-*"

$(STAMP): pyproject.toml
	@mkdir -p $(CACHE_DIR)
	@test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --upgrade pip setuptools wheel
	$(PY) -m pip install -e ".[dev]"
	@touch $(STAMP)

# Dependencies come from the keyed venv; the package itself is re-linked to this clone each run.
venv: $(STAMP)
	@$(PY) -m pip install --no-deps --no-build-isolation -q -e . >/dev/null

install: venv

demo: venv
	$(PY) -m khora_core.demo

test: venv
	KHORA_REQUIRE_SERVICES=1 $(PY) -m pytest $(PYTEST_ARGS)

test-unit: venv
	$(PY) -m pytest tests/unit $(PYTEST_ARGS)

# What users install, each in a fresh virtual environment (tools/installed_env.sh): the wheel
# with [all] at today's newest dependencies, and the lowest versions pyproject.toml allows.
test-installed: test-wheel test-lowest
test-wheel: venv
	PY=$(PY) tools/installed_env.sh wheel
test-lowest: venv
	PY=$(PY) tools/installed_env.sh lowest

lint: venv
	$(PY) -m ruff check khora_core khora_integrations tests tools benchmarks
	$(PY) -m ruff format --check khora_core khora_integrations tests tools benchmarks
	$(PY) -m mypy

format: venv
	$(PY) -m ruff format khora_core khora_integrations tests tools benchmarks
	$(PY) -m ruff check --fix khora_core khora_integrations tests tools benchmarks

# Re-record the LLM cassettes from a real model on loopback (llama.cpp server, Gemma 3 270M).
cassettes: venv
	$(PY) -m tools.cassettes record

bench-storage: venv
	$(PY) -m tools.services run -- $(PY) -m benchmarks.storage
bench-ingest: venv
	$(PY) -m tools.services run -- $(PY) -m benchmarks.ingest
bench-multihop: venv
	$(PY) -m tools.services run -- $(PY) -m benchmarks.multihop
bench-locomo: venv
	$(PY) -m benchmarks.locomo
bench-latency: venv
	$(PY) -m tools.services run -- $(PY) -m benchmarks.latency
bench: bench-storage bench-ingest bench-multihop bench-locomo bench-latency

clean:
	rm -rf .khora .pytest_cache build *.egg-info
