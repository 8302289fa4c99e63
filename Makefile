# fluss_py build. Quick start: `make up` (a local cluster), `make test` (the whole suite).
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
PROTOS := $(wildcard proto/fluss_py/rpc/pb/*.proto)

.PHONY: install install-run zookeeper fuse netns-tools browser docker-tools wheels compose-test bench-tools up down test test-unit chaos lint format proto proto-check config-doc metrics-doc bench clean

# What running a cluster needs (`make up`): the venv, ZooKeeper and FUSE. The test tools (network-namespace
# tools, chromium, docker, prometheus) come with `make install`, which `make test` runs.
install-run: $(VENV)/.installed zookeeper fuse

install: install-run netns-tools browser docker-tools

$(VENV)/.installed: pyproject.toml
	@bash deploy/check-python.sh $(PYTHON)
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[dev]'
	touch $@

zookeeper:
	@bash deploy/install-zookeeper.sh

# Debian's fuse3, for the power-cut filesystem of the fault tests (fluss_py/testing/powercut_fs.py)
fuse:
	@bash deploy/install-fuse.sh

# ip/tc/nft for the test hosts (network namespaces); without them only the tests needing those skip
netns-tools:
	@bash deploy/install-netns-tools.sh || echo "netns-tools: not installed; tests on test hosts will skip"

# Debian's chromium + chromium-driver (the console's browser test) and docker-compose (the compose-file test)
browser:
	@bash deploy/install-test-tools.sh

# Debian's docker.io, docker-compose and debootstrap: the compose test's private engine and base image
docker-tools:
	@bash deploy/install-docker.sh

# The project and every dependency as wheels in deploy/wheels, what deploy/Dockerfile installs (no index there)
wheels: $(VENV)/.installed
	rm -rf deploy/wheels
	$(BIN)/pip wheel --quiet --wheel-dir deploy/wheels .

# Only the compose test (also part of `make test`): deploy/docker-compose.yml on a private Docker engine, a bucket
# leader's container killed (deploy/README.md); -s shows its timings
compose-test: install
	$(BIN)/python -m pytest -s tests/fault/test_compose.py

# `make up SUPERVISE=1`: every server under a supervisor that restarts it when it crashes (docs/local-cluster.md)
up: install-run
	$(BIN)/fluss-py cluster up $(if $(SUPERVISE),--supervise)

down:
	@if [ -x $(BIN)/fluss-py ]; then $(BIN)/fluss-py cluster down; else echo "no $(BIN): nothing to stop"; fi

test: install proto-check
	$(BIN)/python -m pytest

test-unit: install
	$(BIN)/python -m pytest tests/unit

# The long fluss-py verify run (>= 300 faults; ~30 min): figures in docs/fault-testing.md
chaos: install
	FLUSS_PY_CHAOS_OUT=$${FLUSS_PY_CHAOS_OUT:-chaos-out} $(BIN)/python -m pytest -x -s --run-slow \
		tests/fault/test_verify.py::test_chaos_run

# --no-cache: the same answer as on a fresh clone (a stale .ruff_cache can hide unformatted files)
lint: install
	$(BIN)/ruff check --no-cache .
	$(BIN)/ruff format --check --no-cache .

format: install
	$(BIN)/ruff check --fix .
	$(BIN)/ruff format .

proto: $(VENV)/.installed
	$(BIN)/python -m grpc_tools.protoc -Iproto --python_out=. --pyi_out=. --grpc_python_out=. $(PROTOS)

# Fails when the committed generated code differs from what `make proto` produces.
proto-check: $(VENV)/.installed
	@tmp=$$(mktemp -d) && \
	$(BIN)/python -m grpc_tools.protoc -Iproto --python_out=$$tmp --pyi_out=$$tmp --grpc_python_out=$$tmp $(PROTOS) && \
	diff -r -x __init__.py -x __pycache__ $$tmp/fluss_py/rpc/pb fluss_py/rpc/pb && rm -rf $$tmp && \
	echo "proto-check: generated code is up to date" || \
	{ echo "proto-check: fluss_py/rpc/pb is stale, run 'make proto' and commit"; rm -rf $$tmp; exit 1; }

# docs/configuration.md from the config registry (a unit test fails when it is stale)
config-doc: $(VENV)/.installed
	$(BIN)/fluss-py config --markdown > docs/configuration.md

# docs/observability.md's metric list from fluss_py/metric_catalogue.py (a unit test fails when it is stale)
metrics-doc: $(VENV)/.installed
	$(BIN)/fluss-py metrics --update-doc docs/observability.md

# Debian's nats-server, the benchmarks' peer (without it the peer columns stay empty)
bench-tools:
	@bash deploy/install-bench-tools.sh || echo "bench-tools: nats-server not installed; the peer columns stay empty"

bench: install bench-tools
	$(BIN)/python -m tests.bench

clean:
	rm -rf $(VENV) .pytest_cache .ruff_cache .hypothesis
