#!/usr/bin/env bash
# `buf breaking`: the protos as they are now (committed or not) against main's. On main itself that compares the
# working tree with its last commit; a clone without a `main` branch compares with HEAD.
set -euo pipefail
cd "$(dirname "$0")/.."
against=".git#branch=main"
if ! git rev-parse --verify --quiet refs/heads/main >/dev/null; then
	against=".git#ref=HEAD"
fi
npx --no-install buf breaking --against "$against"
echo "lint: buf breaking against ${against#.git#}: no breaking change"
