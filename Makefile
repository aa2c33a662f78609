# knee — the one place for dev commands. `make help` lists them.
SHELL := /bin/bash
VENV ?= .venv
PY := $(VENV)/bin/python
export PATH := $(CURDIR)/$(VENV)/bin:$(PATH)
export VIRTUAL_ENV := $(CURDIR)/$(VENV)

.PHONY: help install demo test test-rust test-py lint bench bench-smoke ci-deps clean

help: ## list the targets
	@grep -E '^[a-z-]+:.*##' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  make %-12s %s\n", $$1, $$2}'

$(PY):
	python3 -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip "maturin>=1.5,<2"

install: $(PY) ## build the engine and install knee (with dev extras) into .venv
	$(VENV)/bin/maturin develop --release -q -E dev,dask

ci-deps: ## install the Debian packages the tests drive (nginx, curl, wrk, ab, chromium, postgresql)
	bash scripts/install-system-deps.sh

demo: install ## start the demo service, sweep it, write the report
	$(VENV)/bin/knee demo

test: install lint test-rust test-py ## install, lint, and run every test

test-rust: ## engine and demo-target tests (real servers on 127.0.0.1)
	cargo test --release --workspace --exclude knee-py -q

test-py: ## python tests (real processes: nginx, curl, knee target)
	$(PY) -m pytest -q tests

lint: $(PY) ## clippy and ruff, warnings as errors
	cargo fmt --all --check
	cargo clippy --release --workspace --all-targets -q -- -D warnings
	$(VENV)/bin/ruff check python tests bench
	$(VENV)/bin/ruff format --check python tests bench

bench: install ## compare knee with other load generators, write docs/performance.md
	$(PY) bench/run.py
	$(PY) bench/search_bench.py

bench-smoke: install ## one short run per installed generator (part of make test)
	$(PY) bench/run.py --smoke

clean: ## remove build products and the venv
	rm -rf target $(VENV)
