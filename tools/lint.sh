#!/usr/bin/env bash
# Static checks: ruff (lint and format), mypy, the import rules, tsc on the dashboard and the TypeScript
# example, gofmt on the Go example, buf lint and breaking, and gen/ freshness.
#
# Two lanes side by side, one a core: the Python checks (mostly mypy) here, the TypeScript, Go and protobuf
# checks in the background, their output shown after the Python lane's. Either lane failing fails the lint.
set -euo pipefail
cd "$(dirname "$0")/.."
bin=.venv/bin

other_checks() {
	echo "lint: tsc (clients/web and clients/ts, strict)"
	npm run --silent typecheck --workspace clients/web
	npm run --silent typecheck --workspace clients/ts
	echo "lint: gofmt (clients/go)"
	unformatted=$(gofmt -l clients/go)
	if [ -n "$unformatted" ]; then
		echo "not gofmt-formatted: $unformatted" >&2
		exit 1
	fi
	echo "lint: buf"
	npx --no-install buf lint
	bash tools/check_breaking.sh
	bash tools/check_gen.sh
}

others_log=$(mktemp)
trap 'rm -f "$others_log"' EXIT
other_checks >"$others_log" 2>&1 &
others=$!

python_checks() {
	echo "lint: ruff"
	$bin/ruff check .
	$bin/ruff format --check .
	echo "lint: mypy"
	$bin/mypy
	$bin/mypy tests benchmarks tools/protoc_gen_grpc_python.py tools/protoc_gen_public.py \
		tools/protoc_gen_npm_package.py tools/protoc_gen_descriptor_set.py
	echo "lint: import rules (docs/design.md, \"Dependency rules\")"
	if ! report=$($bin/lint-imports --no-cache 2>&1); then
		echo "$report" | sed -n '/Broken contracts/,$p' >&2
		exit 1
	fi
	echo "$report" | grep -E "^Contracts: "
}

# Each lane a background job, where `set -e` holds (it would not on the left of `||`).
python_checks &
python=$!
python_failed=0
wait "$python" || python_failed=1
others_failed=0
wait "$others" || others_failed=1
cat "$others_log"
if ((python_failed || others_failed)); then
	exit 1
fi
