"""Server reflection that serves the protos' comments: `grpcurl describe jobmesh.v1.Job` prints each field's.

The descriptors compiled into the generated Python modules carry no source info, and gRPC's reflection
serializes what its descriptor pool gives back (`FileDescriptor.CopyToProto`, which leaves source info out
even when the pool was built with it). So the reflection service is handed a pool of its own: it finds
files and symbols in a descriptor pool built from the contract's descriptor set (`gen/descriptors`, written by
`buf generate` with source info, shipped as `jobmesh.descriptors`), and answers with that set's own
`FileDescriptorProto`s, comments included.
"""

from __future__ import annotations

import importlib.resources
from collections.abc import Callable, Mapping, Sequence
from functools import cache
from typing import Any

import grpc
from google.protobuf import descriptor_pb2, descriptor_pool
from grpc_reflection.v1alpha import reflection

__all__ = ["DESCRIPTOR_SET", "SourceInfoPool", "contract_pool", "enable_reflection"]

# The resource in `jobmesh.descriptors` (see buf.gen.yaml).
DESCRIPTOR_SET = "jobmesh.binpb"


class _SourceFile:
    """A file of the set as the reflection service uses it: its name, its dependencies, and its proto (with
    source info) copied out."""

    def __init__(self, pool: SourceInfoPool, name: str) -> None:
        self._pool = pool
        self.name = name

    @property
    def dependencies(self) -> list[Any]:
        return [self._pool.FindFileByName(name) for name in self._pool.proto(self.name).dependency]

    def CopyToProto(self, proto: descriptor_pb2.FileDescriptorProto) -> None:
        proto.CopyFrom(self._pool.proto(self.name))


class SourceInfoPool:
    """The lookups of a `DescriptorPool` that the reflection service makes, over a descriptor set: the files
    it returns copy out the set's own protos. What the set lacks (gRPC's health and reflection services) is
    looked up in `fallback`, the process's default pool unless told otherwise, and served without comments."""

    def __init__(
        self, files: descriptor_pb2.FileDescriptorSet, fallback: descriptor_pool.DescriptorPool | None = None
    ) -> None:
        self._pool = descriptor_pool.DescriptorPool()
        self._fallback = fallback if fallback is not None else descriptor_pool.Default()
        self._protos: Mapping[str, descriptor_pb2.FileDescriptorProto] = {f.name: f for f in files.file}
        for file in files.file:  # in dependency order, as buf writes them
            self._pool.Add(file)

    def proto(self, name: str) -> descriptor_pb2.FileDescriptorProto:
        return self._protos[name]

    def _file(self, found: Callable[[descriptor_pool.DescriptorPool], Any]) -> Any:
        try:
            return _SourceFile(self, found(self._pool).name)
        except KeyError:
            return found(self._fallback)

    def FindFileByName(self, name: str) -> Any:
        return self._file(lambda pool: pool.FindFileByName(name))

    def FindFileContainingSymbol(self, symbol: str) -> Any:
        return self._file(lambda pool: pool.FindFileContainingSymbol(symbol))

    def FindMessageTypeByName(self, name: str) -> Any:
        try:
            return self._pool.FindMessageTypeByName(name)
        except KeyError:
            return self._fallback.FindMessageTypeByName(name)

    def FindExtensionByNumber(self, message: Any, number: int) -> Any:
        return self._owner(message).FindExtensionByNumber(message, number)

    def FindAllExtensions(self, message: Any) -> Any:
        return self._owner(message).FindAllExtensions(message)

    def _owner(self, message: Any) -> descriptor_pool.DescriptorPool:
        """The pool a message descriptor came from (a pool answers only for its own descriptors)."""
        return self._pool if message.file.pool is self._pool else self._fallback


@cache
def contract_pool() -> SourceInfoPool:
    """The contract's descriptor set, read once per process."""
    data = importlib.resources.files("jobmesh.descriptors").joinpath(DESCRIPTOR_SET).read_bytes()
    return SourceInfoPool(descriptor_pb2.FileDescriptorSet.FromString(data))


def enable_reflection(server: grpc.aio.Server, service_names: Sequence[str]) -> None:
    """Serves reflection for `service_names` (fully qualified; the reflection service's own is added) from
    the contract's descriptor set."""
    names = (*service_names, reflection.SERVICE_NAME)
    reflection.enable_server_reflection(names, server, pool=contract_pool())
