"""A protoc plugin that writes the contract as one descriptor set, `jobmesh.binpb`, with its source info.

The set holds every file of the request and every file they import (the well-known types included), in
dependency order, each with its comments (`source_code_info`). The server's reflection serves it, so that
`grpcurl describe` shows the protos' comments, which the descriptors compiled into the generated Python
modules leave out; `grpcurl -protoset` and other tools can read it too. Run with `strategy: all`, so that one
request holds every file.
"""

import sys

from google.protobuf import descriptor_pb2
from google.protobuf.compiler import plugin_pb2

NAME = "jobmesh.binpb"
_FILE_FIELD = 15  # CodeGeneratorResponse.file
_FILE_NAME, _FILE_CONTENT = 1, 15  # CodeGeneratorResponse.File.name, .content


def _varint(value: int) -> bytes:
    out = bytearray()
    while True:
        low, value = value & 0x7F, value >> 7
        out.append(low | (0x80 if value else 0))
        if not value:
            return bytes(out)


def _field(number: int, payload: bytes) -> bytes:
    """A length-delimited field (wire type 2): a string, a bytes or a message field alike."""
    return _varint(number << 3 | 2) + _varint(len(payload)) + payload


def main() -> int:
    request = plugin_pb2.CodeGeneratorRequest.FromString(sys.stdin.buffer.read())
    response = plugin_pb2.CodeGeneratorResponse(
        supported_features=plugin_pb2.CodeGeneratorResponse.FEATURE_PROTO3_OPTIONAL
    )
    # `proto_file` is in dependency order already, with source info for every file (the imported ones too).
    files = descriptor_pb2.FileDescriptorSet(file=request.proto_file)
    if not all(file.HasField("source_code_info") for file in files.file):
        response.error = "the request's files carry no source info: the set would show no comments"
        sys.stdout.buffer.write(response.SerializeToString())
        return 0
    content = files.SerializeToString(deterministic=True)
    # `File.content` is a proto2 string, which Python's protobuf wants to be UTF-8; on the wire a string is
    # bytes, and protoc and buf write a file's bytes as they come. So the file is appended to the response
    # by hand (serialized messages concatenate: a repeated field gains an item).
    entry = _field(_FILE_NAME, NAME.encode()) + _field(_FILE_CONTENT, content)
    sys.stdout.buffer.write(response.SerializeToString() + _field(_FILE_FIELD, entry))
    return 0


if __name__ == "__main__":
    sys.exit(main())
