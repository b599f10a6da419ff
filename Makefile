# ClusterPlan: `make run` starts the app on SQLite at http://127.0.0.1:8000; `make test` runs the whole suite.
# Both set everything up on a fresh machine (a virtual environment in .venv).

PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
TORCH_PIN := torch==2.13.0

.PHONY: run test test-core install install-test system-deps lint typecheck pytest bench load validate hooks clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip

install: $(BIN)/python
	$(BIN)/pip install --quiet -e .

run: install
	$(BIN)/clusterplan serve

# torch is pinned for the tests; the [bench] extra pins the same version. TORCH_INDEX (empty: pip's configured
# indexes and find-links) adds a wheel index, e.g. PyTorch's CPU builds instead of PyPI's multi-GB CUDA one:
#   make test TORCH_INDEX=https://download.pytorch.org/whl/cpu
TORCH_INDEX ?=
install-test: $(BIN)/python
	$(BIN)/pip install --quiet -e '.[dev]' '$(TORCH_PIN)' $(if $(TORCH_INDEX),--extra-index-url '$(TORCH_INDEX)')

# Debian's chromium drives the browser tests (Playwright never downloads a browser here).
system-deps:
	@command -v chromium >/dev/null 2>&1 || { \
	  if [ "$$(id -u)" = 0 ]; then apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null; \
	  else sudo apt-get update -qq && sudo DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null; fi; }

lint: install-test
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/lint-imports

typecheck: install-test
	$(BIN)/mypy app

pytest: install-test system-deps
	CLUSTERPLAN_REQUIRE_POSTGRES=$${CLUSTERPLAN_REQUIRE_POSTGRES:-1} $(BIN)/pytest -n 2 --dist loadgroup -q

test: lint typecheck pytest

# The planning core's tests alone (tests/core: no server, no browser, no torch), in under a minute.
test-core: install-test
	$(BIN)/pytest -q -p no:xdist tests/core

# Speed and overhead benchmarks: each prints its figures and ratios against a baseline measured in the same run.
bench: install-test
	$(BIN)/python benchmarks/bench_planner.py
	$(BIN)/python benchmarks/bench_moe_dispatch.py
	$(BIN)/python benchmarks/bench_offload.py
	$(BIN)/python benchmarks/bench_ui_latency.py
	$(BIN)/python benchmarks/bench_runner_overhead.py

# Load tests against loopback (bounded: 100 clients, 20 s per endpoint; then saves beside planner searches
# and /healthz under 30 searches, 20 s per phase, on SQLite and PostgreSQL); see docs/performance.md.
load: install-test
	$(BIN)/python -m benchmarks.load.run
	$(BIN)/python -m benchmarks.load.contention --backend sqlite
	$(BIN)/python -m benchmarks.load.contention --backend postgres

# Replay every published measurement the models are validated against.
validate: install
	$(BIN)/clusterplan validate training-runs tests/data/training_runs.csv
	$(BIN)/clusterplan validate training-runs tests/data/training_runs_heldout.csv
	$(BIN)/clusterplan validate training-runs tests/data/training_runs_final_check.csv
	$(BIN)/clusterplan validate training-runs tests/data/training_runs_vtrain_multi.csv
	$(BIN)/clusterplan validate training-runs tests/data/training_runs_bigscience_chronicles.csv
	$(BIN)/clusterplan validate training-runs tests/data/training_runs_nvfp4.csv
	$(BIN)/clusterplan validate training-runs tests/data/training_runs_megatron_bridge_2602_01.csv
	$(BIN)/clusterplan validate training-runs tests/data/training_runs_megatron_bridge_2604_2608.csv
	$(BIN)/clusterplan validate training-runs tests/data/training_runs_torchtitan_202412.csv
	$(BIN)/clusterplan validate training-runs tests/data/training_runs_dgxc_weak_scaling.csv
	$(BIN)/clusterplan validate training-runs tests/data/training_runs_mlperf.csv
	$(BIN)/clusterplan validate training-runs tests/data/training_runs_nemo_long_context_2504.csv
	$(BIN)/clusterplan validate training-runs tests/data/training_runs_torchtitan_202506_async_tp.csv
	$(BIN)/clusterplan validate accuracy tests/data/training_runs_heldout.csv tests/data/training_runs_final_check.csv \
		tests/data/training_runs_nemo_long_context_2504.csv tests/data/training_runs_torchtitan_202506_async_tp.csv \
		--development tests/data/training_runs.csv --comparisons tests/data/training_runs_vtrain_multi.csv \
		--whole-runs tests/data/training_totals.csv --collectives tests/data/network/collectives.csv \
		--collectives-heldout tests/data/network/collectives_heldout.csv \
		--collectives-heldout tests/data/network/collectives_heldout_sweeps.csv \
		--collectives-heldout tests/data/network/collectives_heldout_azure.csv
	$(BIN)/clusterplan validate collectives tests/data/network/collectives.csv
	$(BIN)/clusterplan validate costs tests/data/cost_cases.jsonl
	$(BIN)/clusterplan validate layouts tests/data/training_runs.csv
	$(BIN)/clusterplan validate region tests/data/training_runs*.csv
	$(BIN)/clusterplan validate training-totals tests/data/training_totals.csv
	$(BIN)/clusterplan validate optimism
	$(BIN)/clusterplan validate scorecard

# The repository's git hooks (.githooks/commit-msg: subject ≤ 72 characters, imperative, no final period,
# a blank line before the body).
hooks:
	git config core.hooksPath .githooks

clean:
	rm -rf $(VENV) data .pytest_cache .mypy_cache .ruff_cache
