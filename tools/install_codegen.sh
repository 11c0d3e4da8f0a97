#!/usr/bin/env bash
# The code generators buf.gen.yaml runs besides the venv's and node_modules' ones, pinned, into
# .jobmesh/tools/bin (`make install` runs this when this file changes): protoc-gen-go and protoc-gen-go-grpc
# from the Go module proxy, and from Maven Central, with checksums verified, protoc (grpcio-tools' protoc has
# no Java generator) and protoc-gen-grpc-java.
set -euo pipefail
cd "$(dirname "$0")/.."

PROTOC_GEN_GO=v1.36.12
PROTOC_GEN_GO_GRPC=v1.6.2
PROTOC=4.36.2
# Maven Central has no Linux executables of 1.84.x and 1.85.x; 1.83.0's code runs on the 1.85 runtime.
PROTOC_GEN_GRPC_JAVA=1.83.0
DEPENDENCY_PLUGIN=org.apache.maven.plugins:maven-dependency-plugin:3.8.1

bin=$PWD/.jobmesh/tools/bin
mkdir -p "$bin"

for tool in go mvn; do
	command -v "$tool" >/dev/null || { echo "need $tool on the PATH to install the code generators" >&2; exit 1; }
done

echo "installing protoc-gen-go $PROTOC_GEN_GO and protoc-gen-go-grpc $PROTOC_GEN_GO_GRPC into $bin"
GOBIN=$bin GOTOOLCHAIN=local go install "google.golang.org/protobuf/cmd/protoc-gen-go@$PROTOC_GEN_GO"
GOBIN=$bin GOTOOLCHAIN=local go install "google.golang.org/grpc/cmd/protoc-gen-go-grpc@$PROTOC_GEN_GO_GRPC"

case "$(uname -m)" in
x86_64) platform=linux-x86_64 ;;
aarch64) platform=linux-aarch_64 ;;
*) echo "no protoc build on Maven Central for $(uname -m)" >&2; exit 1 ;;
esac

# Copies GROUP:ARTIFACT:VERSION's executable for this platform to $bin/NAME.
maven_executable() {
	local artifact=$1 name=$2 scratch
	scratch=$(mktemp -d)
	mvn --quiet --batch-mode --strict-checksums -Dstyle.color=never "$DEPENDENCY_PLUGIN:copy" \
		-Dartifact="$artifact:exe:$platform" -DoutputDirectory="$scratch" -Dmdep.stripVersion=true 2>&1 \
		| sed 's/\x1b\[[0-9;]*m//g' # Maven 3.8 colours even a quiet batch run
	install -m 755 "$scratch"/*.exe "$bin/$name"
	rm -rf "$scratch"
}
echo "installing protoc $PROTOC and protoc-gen-grpc-java $PROTOC_GEN_GRPC_JAVA (Maven Central) into $bin"
maven_executable "com.google.protobuf:protoc:$PROTOC" protoc
maven_executable "io.grpc:protoc-gen-grpc-java:$PROTOC_GEN_GRPC_JAVA" protoc-gen-grpc-java
