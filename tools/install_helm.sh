#!/usr/bin/env bash
# Helm, pinned, built from the Go module proxy into .jobmesh/tools/bin (`make install` runs this when this file
# changes; `make run` does not need it). Only the checks use it: `helm lint --strict` and `helm template` on
# deploy/helm/jobmesh (tests/deploy, tests/acceptance/test_chart_manifests.py). It builds at the lowest
# priority, and only when the binary at this version is missing: with an empty Go build cache it took 4 min
# 13 s (264 CPU-seconds) on a shared 2-core machine (2026-12-04, load 4 to 8), with a warm one 10 s.
set -euo pipefail
cd "$(dirname "$0")/.."

HELM=v4.3.2

bin=$PWD/.jobmesh/tools/bin
mkdir -p "$bin"
command -v go >/dev/null || { echo "need go on the PATH to build helm" >&2; exit 1; }

if [[ -x $bin/helm ]] && "$bin/helm" version --template '{{.Version}}' 2>/dev/null | grep -qx "$HELM"; then
	exit 0
fi
echo "building helm $HELM (Go module proxy) into $bin: minutes the first time (an empty Go build cache)"
# Helm reads its version from a variable its release builds set at link time.
GOBIN=$bin GOTOOLCHAIN=local CGO_ENABLED=0 nice -n 19 go install -trimpath \
	-ldflags "-s -w -X helm.sh/helm/v4/internal/version.version=$HELM" \
	"helm.sh/helm/v4/cmd/helm@$HELM"
