#!/usr/bin/env bash
# Fails when gen/ differs from what `buf generate` makes of protos/ now (a proto changed, gen/ not regenerated,
# or gen/ edited by hand).
set -euo pipefail
cd "$(dirname "$0")/.."
fresh=$(mktemp -d)
trap 'rm -rf "$fresh"' EXIT
npx --no-install buf generate --output "$fresh"
if ! diff -r gen "$fresh/gen" >"$fresh.diff" 2>&1; then
	echo "gen/ is stale: run 'make gen' and commit the result. Stale files:" >&2
	diff -rq gen "$fresh/gen" | sed "s#$fresh/##" >&2 || true
	echo "The first differences:" >&2
	head -n 40 "$fresh.diff" >&2
	rm -f "$fresh.diff"
	exit 1
fi
rm -f "$fresh.diff"
echo "lint: gen/ is fresh"
