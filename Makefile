# jobmesh: `make run` starts the mesh on the embedded store; `make test` runs every check against real
# PostgreSQL, Redis and Kafka that it starts and stops itself.
SHELL := /bin/bash
PYTHON ?= python3.11
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: run test install gen lint check-gen services-up services-down lock clean

run: install
	$(BIN)/jobmesh dev --database-url sqlite:///$(CURDIR)/.jobmesh/dev.sqlite3

test: install
	bash tools/test.sh

install: $(STAMP) node_modules/.installed
	@$(BIN)/pip install --quiet --no-deps --no-build-isolation -e . --config-settings editable_mode=strict

$(STAMP): requirements.lock pyproject.toml
	@command -v $(PYTHON) >/dev/null || { echo "need $(PYTHON)"; exit 1; }
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade "pip>=24"
	$(BIN)/pip install --quiet -r requirements.lock
	@touch $@

node_modules/.installed: package.json package-lock.json
	npm ci --no-fund --no-audit --loglevel=error
	@touch $@

# The only writer of gen/.
gen: install
	npx buf generate

lint: install
	bash tools/lint.sh

# Refresh the Python lock after changing pyproject.toml's dependency ranges.
lock: $(STAMP)
	$(BIN)/uv pip compile pyproject.toml --extra dev --python-version 3.11 -o requirements.lock

services-up: install
	bash tools/services/services.sh up .jobmesh/services
	@echo "source .jobmesh/services/env to use them"

services-down:
	bash tools/services/services.sh down .jobmesh/services

clean:
	rm -rf $(VENV) node_modules build .jobmesh .mypy_cache .ruff_cache .pytest_cache .hypothesis
