"""A protoc plugin that runs another generator on the public contract alone: the files under `jobmesh/v1/`.

The Go and Java SDKs carry jobmesh.v1 only. The vendored googleapis files already ship in each language's
own package (genproto, proto-google-common-protos), where generated copies would clash, and the executor
protocol is not public. buf has no per-plugin paths, so this plugin narrows the request before passing it on.

    local: [tools/protoc-gen-public, PLUGIN]                          # a plugin executable
    local: [tools/protoc-gen-public, --protoc, PROTOC, --builtin, java]  # a generator built into protoc
"""

import argparse
import pathlib
import subprocess
import sys
import tempfile

from google.protobuf import descriptor_pb2
from google.protobuf.compiler import plugin_pb2

PUBLIC = "jobmesh/v1/"


def public_only(request: plugin_pb2.CodeGeneratorRequest) -> plugin_pb2.CodeGeneratorRequest:
    """The request with only the public files left to generate; every file stays known for imports."""
    narrowed = plugin_pb2.CodeGeneratorRequest()
    narrowed.CopyFrom(request)
    del narrowed.file_to_generate[:]
    narrowed.file_to_generate.extend(name for name in request.file_to_generate if name.startswith(PUBLIC))
    return narrowed


def run_plugin(command: list[str], request: plugin_pb2.CodeGeneratorRequest) -> bytes:
    done = subprocess.run(command, input=request.SerializeToString(), stdout=subprocess.PIPE, check=True)
    return done.stdout


def run_builtin(protoc: str, generator: str, request: plugin_pb2.CodeGeneratorRequest) -> bytes:
    """protoc's own generator, on the request's descriptors, its files collected into a plugin response."""
    response = plugin_pb2.CodeGeneratorResponse(
        supported_features=plugin_pb2.CodeGeneratorResponse.FEATURE_PROTO3_OPTIONAL
    )
    with tempfile.TemporaryDirectory() as scratch:
        root = pathlib.Path(scratch)
        descriptors = root / "descriptors.binpb"
        descriptors.write_bytes(descriptor_pb2.FileDescriptorSet(file=request.proto_file).SerializeToString())
        out = root / "out"
        out.mkdir()
        options = f"{request.parameter}:" if request.parameter else ""
        argv = [protoc, f"--descriptor_set_in={descriptors}", f"--{generator}_out={options}{out}"]
        if request.file_to_generate:
            subprocess.run([*argv, *request.file_to_generate], check=True)
        for path in sorted(p for p in out.rglob("*") if p.is_file()):
            response.file.add(name=str(path.relative_to(out)), content=path.read_text())
    return response.SerializeToString()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--protoc", help="the protoc whose built-in generator runs")
    parser.add_argument("--builtin", help="that generator's name (java, cpp, ...)")
    parser.add_argument("plugin", nargs="*", help="the plugin command, when not a built-in generator")
    args = parser.parse_args()
    request = public_only(plugin_pb2.CodeGeneratorRequest.FromString(sys.stdin.buffer.read()))
    if args.builtin:
        sys.stdout.buffer.write(run_builtin(args.protoc, args.builtin, request))
    else:
        sys.stdout.buffer.write(run_plugin(args.plugin, request))
    return 0


if __name__ == "__main__":
    sys.exit(main())
