#!/usr/bin/env bash
# Static checks: ruff (lint and format), mypy, buf lint, and gen/ freshness.
set -euo pipefail
cd "$(dirname "$0")/.."
bin=.venv/bin

echo "lint: ruff"
$bin/ruff check .
$bin/ruff format --check .
echo "lint: mypy"
$bin/mypy
$bin/mypy tests tools/protoc_gen_grpc_python.py
echo "lint: buf"
npx --no-install buf lint
bash tools/check_gen.sh
