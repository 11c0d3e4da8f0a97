#!/usr/bin/env bash
# Helm, pinned, built from the Go module proxy into .jobmesh/tools/bin (`make install` runs this when this file
# changes; `make run` does not need it). Only the checks use it: `helm lint --strict` and `helm template` on
# deploy/helm/jobmesh (tools/test.sh, tests/deploy). The build takes several minutes on 2 cores, so it runs at
# the lowest priority and only when the binary at this version is missing.
set -euo pipefail
cd "$(dirname "$0")/.."

HELM=v4.3.2

bin=$PWD/.jobmesh/tools/bin
mkdir -p "$bin"
command -v go >/dev/null || { echo "need go on the PATH to build helm" >&2; exit 1; }

if [[ -x $bin/helm ]] && "$bin/helm" version --template '{{.Version}}' 2>/dev/null | grep -qx "$HELM"; then
	exit 0
fi
echo "building helm $HELM (Go module proxy) into $bin: several minutes on 2 cores"
# Helm reads its version from a variable its release builds set at link time.
GOBIN=$bin GOTOOLCHAIN=local CGO_ENABLED=0 nice -n 19 go install -trimpath \
	-ldflags "-s -w -X helm.sh/helm/v4/internal/version.version=$HELM" \
	"helm.sh/helm/v4/cmd/helm@$HELM"
