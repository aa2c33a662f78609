# knee — the one place for dev commands. `make help` lists them.
SHELL := /bin/bash
comma := ,
VENV ?= .venv
PY := $(VENV)/bin/python
export PATH := $(CURDIR)/$(VENV)/bin:$(PATH)
export VIRTUAL_ENV := $(CURDIR)/$(VENV)
# Python keeps its byte-code caches, whatever the machine's environment says (a container may set
# PYTHONDONTWRITEBYTECODE): without them each knee process compiled knee's sources again (0.37 of a two-level sweep's
# 1.82 CPU-s) and each pytest process rewrote and compiled every test module (7.2 CPU-s a collection, 2.9 with them).
unexport PYTHONDONTWRITEBYTECODE
# Every cargo command sees the two variables maturin gives pyo3's build script, which reruns when they change: without
# them make lint's clippy and make install / make wheel took turns rebuilding pyo3 and knee-py (34 s here, the first
# make wheel of a fresh clone's test run 80 s under load).
export PYO3_PYTHON := $(CURDIR)/$(PY)
export PYO3_ENVIRONMENT_SIGNATURE := $(shell python3 -c 'import sys; v = sys.version_info; \
  print(f"{sys.implementation.name}-{v[0]}.{v[1]}-{64 if sys.maxsize > 2**32 else 32}bit")')

.PHONY: help install wheel demo test test-rust test-py lint bench bench-smoke ci-deps clean

help: ## list the targets
	@grep -E '^[a-z-]+:.*##' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  make %-12s %s\n", $$1, $$2}'

# The interpreter .venv is made from: any CPython >= 3.11 (python3 on PATH), but the system's /usr/bin/python3 when it is
# one, with its venv module. Debian's links libpython statically; pyenv's default build (python3 on PATH here) links it
# shared and is built without --enable-optimizations: a one-request `knee run` took 17 % less CPU on Debian's 3.11 (257
# against 318 ms here, medians of 21 paired runs), and so do the other knee, pytest and Dask processes of make test.
# BASE_PYTHON=... picks another; an existing .venv is kept whatever it was made from.
BASE_PYTHON ?= $(shell /usr/bin/python3 -c 'import sys, ensurepip; sys.exit(sys.version_info < (3, 11))' 2>/dev/null \
  && echo /usr/bin/python3 || echo python3)

# pip and maturin write to this log, not the terminal; a failure shows its end and names it
INSTALL_LOG := $(VENV)/install.log
QUIET_PIP := PIP_QUIET=1 PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_NO_WARN_SCRIPT_LOCATION=1
define logged
	@$(QUIET_PIP) $(2) >>$(INSTALL_LOG) 2>&1 || { tail -n 30 $(INSTALL_LOG); \
	  echo "make: $(1) failed (above: the end of its log; all of it: $(INSTALL_LOG))"; exit 1; }
endef

$(PY):
	@$(BASE_PYTHON) -m venv $(VENV)
	@: >$(INSTALL_LOG)
	$(call logged,installing pip and maturin,$(PY) -m pip install --upgrade pip "maturin>=1.5$(comma)<2")

install: $(PY) ## build the engine and install knee (with dev extras) into .venv
	@: >$(INSTALL_LOG)
	@echo "make install: building the engine and installing knee into $(VENV) (log: $(INSTALL_LOG))"
	$(call logged,building and installing knee,$(VENV)/bin/maturin develop --release -q -E dev$(comma)dask)
	@echo "make install: done: run $(VENV)/bin/knee, or 'source $(VENV)/bin/activate' to have knee on PATH"

# The wheel users install with pip (README, docs/distributed.md): the engine and the demo service inside, abi3 (any
# CPython >= 3.11), manylinux_2_34 (the engine's newest glibc symbol is 2.34: Linux x86-64 with glibc >= 2.34). Built
# with make install's interpreter and profile, so after make install it only packs what cargo already built.
MANYLINUX ?= manylinux_2_34
WHEEL_LOG := $(VENV)/wheel.log
wheel: $(PY) ## build dist/knee-VERSION-cp311-abi3-manylinux_2_34_x86_64.whl: pip install it anywhere, no Rust needed
	@echo "make wheel: building the engine and packing the wheel into dist/ (log: $(WHEEL_LOG))"
	@rm -f dist/knee-*.whl
	@$(VENV)/bin/maturin build --release -i $(CURDIR)/$(PY) --compatibility $(MANYLINUX) --out dist >$(WHEEL_LOG) 2>&1 \
	  || { tail -n 30 $(WHEEL_LOG); echo "make: building the wheel failed (above: the end of its log; all of it: $(WHEEL_LOG))"; exit 1; }
	@echo "make wheel: done: $$(ls dist/knee-*.whl); install it with: pip install dist/knee-*.whl"

# vegeta too (test_import replays its targets files with it): built inside the tests' parallel pass, two workers
# building it at once beside the others took 287 s each in ci68 (a fresh machine), half that pass's time.
ci-deps: ## install the Debian packages the tests drive (nginx, curl, wrk, ab, chromium, postgresql, prometheus, slurm), grpc-go's example servers and vegeta
	bash scripts/install-system-deps.sh
	bash bench/install.sh grpc-examples vegeta

demo: install ## start the demo service, sweep it, write the report
	$(VENV)/bin/knee demo

test: install lint test-rust test-py ## install, lint, and run every test

# Unit and integration tests, then the docs' examples; not the engine's example program (clippy checks it builds).
test-rust: ## engine and demo-target tests (real servers on 127.0.0.1)
	cargo test --release --workspace --exclude knee-py -q --lib --tests
	cargo test --release --workspace --exclude knee-py -q --doc

# Tests that may skip under `make test` (names, space-separated); any other skip fails the run (tests/no_skips.py).
# None may: make ci-deps and make install give every test what it needs (root for network namespaces included).
KNEE_ALLOWED_SKIPS ?=

# Three passes. First the tests marked `serial` (they measure rates and timings, mostly waiting: a fifth of a core
# each), three at a time (two took 4:06 here, three 3:02 twice with the 2 cores 66 % idle; four 2:38 at 58 % idle,
# but in /tmp/ci21 two of them measured what the others took: a USL's σ 0.031 for 0.05, a ramp's arrivals late). Then those marked `alone` (they take or measure whole cores, or count the machine's
# connections), one at a time; the ones marked `time_wait` last, since the TIME_WAIT sockets of their tens of thousands
# of connections hold half the ephemeral ports for a minute, and a verdict measured beside them says "load side".
# Then the rest, which wait on servers rather than measure, on PYTEST_WORKERS xdist workers (a module with an
# expensive module fixture keeps to one worker: its xdist_group). All three run even if one fails. The serial pass
# starts its longest tests first (KNEE_LONGEST_FIRST, tests/durations.tsv: tests/conftest.py says why only there).
# Six workers: the tests' knee commands are forked from a process that imported knee (tests/forkserver.py), not
# started afresh (0.4 CPU-s each, half the pass's CPU), and the pass took 4:31 here where four workers took 6:52
# with every command started afresh. Before that fork server six filled the cores (96 %) and two tests there that
# measure failed from the load (a Dask clients profile's rate, 137 for 175 ± 28; an HTTP/2 test's connection count).
PYTEST_WORKERS ?= 6
PYTEST_SERIAL_WORKERS ?= 3
PYTEST := KNEE_NO_SKIPS=1 KNEE_ALLOWED_SKIPS="$(KNEE_ALLOWED_SKIPS)" $(PY) -m pytest -q --durations=50

test-py: ## python tests (real processes: nginx, curl, knee target); a skip fails unless KNEE_ALLOWED_SKIPS names it
	KNEE_LONGEST_FIRST=1 $(PYTEST) -n $(PYTEST_SERIAL_WORKERS) --dist loadgroup -m "serial and not alone" tests; serial=$$?; \
	  $(PYTEST) -m alone tests; alone=$$?; \
	  $(PYTEST) -n $(PYTEST_WORKERS) --dist loadgroup -m "not serial and not alone" tests; parallel=$$?; \
	  exit $$(( serial || alone || parallel ))

lint: $(PY) ## clippy and ruff, warnings as errors
	cargo fmt --all --check
	cargo clippy --release --workspace --all-targets -q -- -D warnings
	$(VENV)/bin/ruff check python tests bench
	$(VENV)/bin/ruff format --check python tests bench

bench: install ## compare knee with other load generators, write docs/performance.md
	$(PY) bench/run.py
	$(PY) bench/search_bench.py
	$(PY) bench/live_bench.py
	$(PY) bench/flow_http_bench.py
	$(PY) bench/feeder_bench.py
	$(PY) bench/ramp_bench.py
	$(PY) bench/oplog_bench.py
	$(PY) bench/ws_bench.py
	$(PY) bench/grpc_bench.py

bench-smoke: install ## one short run per installed generator (part of make test)
	$(PY) bench/run.py --smoke
	$(PY) bench/feeder_bench.py --smoke

clean: ## remove build products and the venv
	rm -rf target $(VENV)
