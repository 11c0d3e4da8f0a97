#!/usr/bin/env bash
# Jaeger all-in-one, pinned, built from the Go module proxy into .jobmesh/tools/bin (`make install` runs this
# when this file changes; `make run` does not need it). Only the checks use it: the trace backend of
# tests/acceptance/test_traces.py (memory storage, OTLP in and its query API on loopback ports). It builds at
# the lowest priority, and only when the binary at this version is missing: with empty Go build and module
# caches it took 4 min 21 s (249 CPU-seconds, 2.1 GB of memory at most) on a shared 2-core machine
# (2026-12-05, load 5 to 12), 8 min 41 s at load 13 to 16; with warm ones 8 s. The binary is 52 MB.
set -euo pipefail
cd "$(dirname "$0")/.."

JAEGER=v1.76.0
# The module's hash as go.sum records it: the download is checked against it (and against the checksum
# database), and the build takes the dependencies the module's own go.sum pins.
JAEGER_SUM=h1:sWCOOF1dr+NL0PLil7mFo3BqqQL8k4WiM7aguFbc14g=
MODULE=github.com/jaegertracing/jaeger

bin=$PWD/.jobmesh/tools/bin
mkdir -p "$bin"
command -v go >/dev/null || { echo "need go on the PATH to build jaeger" >&2; exit 1; }

if [[ -x $bin/jaeger-all-in-one ]] && "$bin/jaeger-all-in-one" version 2>/dev/null | grep -q "\"gitVersion\":\"$JAEGER\""; then
	exit 0
fi
echo "building jaeger all-in-one $JAEGER (Go module proxy) into $bin: minutes the first time (an empty Go build cache)"
export GOTOOLCHAIN=local CGO_ENABLED=0 GOFLAGS=-mod=readonly
# `go install module@version` refuses a module whose go.mod has replace directives (Jaeger's has one), so the
# module is downloaded and built where it lies, with its own go.mod and go.sum.
download=$(go mod download -json "$MODULE@$JAEGER")
field() { python3 -c 'import json, sys; print(json.loads(sys.argv[1])[sys.argv[2]])' "$download" "$1"; }
if [[ $(field Sum) != "$JAEGER_SUM" ]]; then
	echo "jaeger $JAEGER from the proxy is $(field Sum), not $JAEGER_SUM as pinned" >&2
	exit 1
fi
cd "$(field Dir)"
# Jaeger reads its version from variables its release builds set at link time.
nice -n 19 go build -trimpath -o "$bin/jaeger-all-in-one.partial" \
	-ldflags "-s -w -X $MODULE/internal/version.latestVersion=$JAEGER" ./cmd/all-in-one
mv "$bin/jaeger-all-in-one.partial" "$bin/jaeger-all-in-one"
