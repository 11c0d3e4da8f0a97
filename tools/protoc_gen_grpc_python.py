"""A protoc plugin that writes grpcio's `_pb2_grpc.py` service stubs.

grpcio-tools builds its gRPC generator into its own protoc rather than shipping a plugin binary, so this
plugin hands the request's descriptors to that protoc and returns what it writes.
"""

import pathlib
import sys
import tempfile

from google.protobuf import descriptor_pb2
from google.protobuf.compiler import plugin_pb2
from grpc_tools import protoc


def main() -> int:
    request = plugin_pb2.CodeGeneratorRequest.FromString(sys.stdin.buffer.read())
    response = plugin_pb2.CodeGeneratorResponse(
        supported_features=plugin_pb2.CodeGeneratorResponse.FEATURE_PROTO3_OPTIONAL
    )
    with tempfile.TemporaryDirectory() as scratch:
        root = pathlib.Path(scratch)
        descriptors = root / "descriptors.binpb"
        descriptors.write_bytes(descriptor_pb2.FileDescriptorSet(file=request.proto_file).SerializeToString())
        out = root / "out"
        out.mkdir()
        argv = ["protoc", f"--descriptor_set_in={descriptors}", f"--grpc_python_out={out}"]
        if protoc.main([*argv, *request.file_to_generate]) != 0:
            response.error = "grpc_tools.protoc failed"
        for path in sorted(out.rglob("*.py")):
            response.file.add(name=str(path.relative_to(out)), content=path.read_text())
    sys.stdout.buffer.write(response.SerializeToString())
    return 0


if __name__ == "__main__":
    sys.exit(main())
