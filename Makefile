# SovereignSpec developer entry points. `make test` is the README's test command.
SHELL := /bin/bash
PY ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
export SOVEREIGNSPEC_CACHE ?= $(HOME)/.cache/sovereignspec

.PHONY: setup venv lint typecheck unit test demo chart-lint cluster-up cluster-down cluster-status crds bench-decide bench-drift bench-floor bench clean

$(BIN)/sovereignspec: pyproject.toml
	$(PY) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q -c constraints.txt -e '.[dev]'
	@touch $@

venv: $(BIN)/sovereignspec

# Everything a fresh machine needs for `make demo` and `make test` (and .ci/run): missing Debian packages
# (or the one apt-get line to run when not root), the Python environment, every pinned binary set.
# `deploy/local/setup.sh --dry-run` prints what it would do.
setup:
	deploy/local/setup.sh

lint: venv
	$(BIN)/ruff check sovereignspec tests bench
	$(BIN)/ruff format --check sovereignspec tests bench
	$(BIN)/lint-imports

typecheck: venv
	$(BIN)/mypy

unit: venv
	$(BIN)/pytest -m "not prometheus and not cluster and not e2e and not chaos"

# The full suite: lint, types, unit/property tests and the tests against real processes.
test: setup
	$(MAKE) lint typecheck
	$(BIN)/pytest

# The README's first command: local cluster, chart, operator, simulator, Prometheus, examples, decisions.
demo: setup
	deploy/demo/demo.sh

chart-lint: setup
	$(SOVEREIGNSPEC_CACHE)/bin/helm lint --strict charts/sovereignspec --kube-version 1.36.3

cluster-up: venv
	deploy/local/cluster.sh up

cluster-down:
	deploy/local/cluster.sh down

# Exit status 1 (ignored here) means some component is stopped; the test harness relies on it.
cluster-status:
	-deploy/local/cluster.sh status

# CRDs are generated from the pydantic models into crds/ and the chart; tests/unit/test_crdgen.py and
# tests/packaging/test_chart.py fail when either copy is stale.
crds: venv
	$(BIN)/python -m sovereignspec.api.crdgen crds charts/sovereignspec/crds

# decide() on 500 nodes, kMax 8, 9 batch ranges, 4 neighbours per node: prints median and p99.
bench-decide: venv
	$(BIN)/python bench/decide_bench.py

# The drift sweep's CPU per admitted workload on the same cluster (parse + evaluate_drift).
bench-drift: venv
	$(BIN)/python bench/drift_bench.py

# What a decision costs at the least on kopf and the Python client (local cluster): client CPU per write,
# the operator's CPU per watch event, and the decisions-per-CPU-second bound they give.
bench-floor: venv
	$(BIN)/python bench/floor_bench.py

# The operator at scale on the local cluster (500 KWOK nodes, 1,000 Jobs in bursts): prints figures and
# ends with one JSON line. BENCH_ARGS=--quick for a busy machine (100 nodes, 200 Jobs).
bench: venv
	$(BIN)/python bench/scale_bench.py $(BENCH_ARGS)

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache
