#!/usr/bin/env bash
# `buf breaking` (buf.yaml's FILE rules): the protos as they are now (committed or not) against main's. On main
# itself that compares the working tree with its last commit; a clone without a `main` branch compares with
# HEAD. Both packages are guarded, each checked on its own:
# - `jobmesh.v1`, the public API that SDKs are generated from;
# - `jobmesh.control.v1`, the executor protocol, which executors written in other languages speak: the same
#   rules, from the commit on that it exists on main (before, there is nothing to compare it with).
set -euo pipefail
cd "$(dirname "$0")/.."
base=main
against=".git#branch=main"
if ! git rev-parse --verify --quiet refs/heads/main >/dev/null; then
	base=HEAD
	against=".git#ref=HEAD"
fi
on_base() { git cat-file -e "$base:$1" 2>/dev/null; }

# The public package.
npx --no-install buf breaking --against "$against" --path protos/jobmesh/v1
echo "lint: buf breaking against ${against#.git#}: jobmesh.v1 has no breaking change"

# The executor protocol.
if on_base protos/jobmesh/control/v1; then
	npx --no-install buf breaking --against "$against" --path protos/jobmesh/control
	echo "lint: buf breaking against ${against#.git#}: jobmesh.control.v1 has no breaking change"
else
	echo "lint: buf breaking: jobmesh.control.v1 is new (not on main yet): nothing to compare it with"
fi
