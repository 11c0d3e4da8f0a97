"""The interceptor that answers requests that do not parse wraps each method's handler once, and the wrapped
handler refuses every bad frame, not only the first."""

from __future__ import annotations

import asyncio
from typing import Any

import grpc
from google.protobuf import empty_pb2

from jobmesh.server.api.malformed import MalformedRequests, Unparsed


async def _echo(request: Any, context: Any) -> Any:
    return request


def _handler() -> grpc.RpcMethodHandler[Any, Any]:
    return grpc.unary_unary_rpc_method_handler(_echo, request_deserializer=empty_pb2.Empty.FromString)


class _Details(grpc.HandlerCallDetails):
    def __init__(self, method: str) -> None:
        self.method = method
        self.invocation_metadata = ()


def _intercepted(interceptor: MalformedRequests, handler: Any, method: str) -> Any:
    async def continuation(_: Any) -> Any:
        return handler

    return asyncio.run(interceptor.intercept_service(continuation, _Details(method)))


def test_a_methods_handler_is_wrapped_once_and_a_new_handler_again() -> None:
    interceptor = MalformedRequests()
    handler = _handler()
    first = _intercepted(interceptor, handler, "/s/M")
    assert first is not handler
    assert _intercepted(interceptor, handler, "/s/M") is first
    replaced = _handler()
    again = _intercepted(interceptor, replaced, "/s/M")
    assert again is not first
    assert again is not replaced


def test_the_wrapped_deserializer_marks_every_bad_frame() -> None:
    interceptor = MalformedRequests()
    handler = _handler()
    for _ in range(2):
        wrapped = _intercepted(interceptor, handler, "/s/M")
        assert isinstance(wrapped.request_deserializer(b"\xff\xff"), Unparsed)
        assert wrapped.request_deserializer(b"") == empty_pb2.Empty()
