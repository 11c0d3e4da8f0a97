#!/usr/bin/env bash
# `buf breaking` (buf.yaml's FILE rules): the protos as they are now (committed or not) against main's. On main
# itself that compares the working tree with its last commit; a clone without a `main` branch compares with
# HEAD. Both packages are guarded, each checked on its own:
# - `jobmesh.v1`, the public API that SDKs are generated from;
# - `jobmesh.executor.v1`, the executor protocol, which executors written in other languages speak: the same
#   rules, from the commit on that it exists on main (before, there is nothing to compare it with).
#
# Until main has the change that made the contract SDK-ready (issue 11), main predates it in two ways, each
# detected on main's own files, so that these allowances end by themselves once it lands:
# - `executor_control.proto` and `dispatch.proto` moved out of `jobmesh.v1` into `jobmesh.executor.v1` (only
#   executors used them): their deletion from `jobmesh/v1/` is that move, so those two paths alone are left
#   out of the public package's check while main still has them there;
# - main's public files set no `go_package`, `java_*` or `csharp_namespace` option (no Go, Java or C# code
#   could be generated from them): setting them for the first time is not checked while none is set on main.
#   Changing them afterwards is breaking, and checked.
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
public_flags=(--path protos/jobmesh/v1)
for moved in executor_control dispatch; do
	if on_base "protos/jobmesh/v1/$moved.proto"; then
		public_flags+=(--exclude-path "protos/jobmesh/v1/$moved.proto")
		echo "lint: buf breaking: jobmesh/v1/$moved.proto moved to jobmesh.executor.v1 (main still has it)"
	fi
done
language_options='^option (go_package|java_package|java_multiple_files|java_outer_classname|csharp_namespace) '
if ! git grep -q -E "$language_options" "$base" -- protos/jobmesh/v1; then
	echo "lint: buf breaking: main's jobmesh.v1 sets no language option yet: setting them is not checked"
	config=$(.venv/bin/python -c '
import json, sys, yaml
config = yaml.safe_load(open("buf.yaml"))
for module in config["modules"]:
    module["breaking"].setdefault("except", []).extend(sys.argv[1:])
print(json.dumps(config))
' FILE_SAME_GO_PACKAGE FILE_SAME_JAVA_PACKAGE FILE_SAME_JAVA_MULTIPLE_FILES FILE_SAME_JAVA_OUTER_CLASSNAME \
		FILE_SAME_CSHARP_NAMESPACE)
	public_flags+=(--config "$config")
fi
npx --no-install buf breaking --against "$against" "${public_flags[@]}"
echo "lint: buf breaking against ${against#.git#}: jobmesh.v1 has no breaking change"

# The executor protocol.
if on_base protos/jobmesh/executor/v1; then
	npx --no-install buf breaking --against "$against" --path protos/jobmesh/executor
	echo "lint: buf breaking against ${against#.git#}: jobmesh.executor.v1 has no breaking change"
else
	echo "lint: buf breaking: jobmesh.executor.v1 is new (not on main yet): nothing to compare it with"
fi
