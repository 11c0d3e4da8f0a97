"""Requests that do not parse (truncated protobuf, invalid UTF-8 in a string field, not protobuf at all) are
the caller's error: INVALID_ARGUMENT with a field violation on `request`, never the framework's UNKNOWN.

A server interceptor swaps each method's deserializer for one that turns a parse failure into a marker, and
wraps its behaviour to answer the marker; a stream that sends one such message is ended with the same status.
"""

from __future__ import annotations

import inspect
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from typing import Any

import grpc
from google.protobuf.message import DecodeError
from grpc_status import rpc_status

from jobmesh.core.errors import InvalidArgument
from jobmesh.server.handler_wrapping import Handler, WrappingInterceptor
from jobmesh.server.status import status_of

Context = grpc.aio.ServicerContext[Any, Any]


@dataclass(frozen=True, slots=True)
class Unparsed:
    """What a request that did not parse is handed on as."""

    message_type: str
    reason: str


def _tolerant(deserializer: Callable[[bytes], Any] | None) -> Callable[[bytes], Any] | None:
    if deserializer is None:
        return None
    descriptor = getattr(getattr(deserializer, "__self__", None), "DESCRIPTOR", None)
    message_type = getattr(descriptor, "full_name", "the request message")

    def deserialize(data: bytes) -> Any:
        try:
            return deserializer(data)
        except DecodeError as error:
            return Unparsed(message_type, str(error).rsplit(": ", 1)[-1])

    return deserialize


async def _refuse(context: Context, unparsed: Unparsed) -> None:
    error = InvalidArgument.single("request", f"not a valid {unparsed.message_type}: {unparsed.reason}")
    await context.abort_with_status(rpc_status.to_status(status_of(error)))


def _unary_request(behaviour: Callable[..., Any]) -> Callable[..., Any]:
    """The same shape as `behaviour`: an async generator (gRPC iterates it) or a coroutine."""
    if inspect.isasyncgenfunction(behaviour):

        async def stream(request: Any, context: Context) -> AsyncIterator[Any]:
            if isinstance(request, Unparsed):
                await _refuse(context, request)
            async for item in behaviour(request, context):
                yield item

        return stream

    async def unary(request: Any, context: Context) -> Any:
        if isinstance(request, Unparsed):
            await _refuse(context, request)
        return await behaviour(request, context)

    return unary


async def _parsed(requests: AsyncIterator[Any], context: Context) -> AsyncIterator[Any]:
    async for request in requests:
        if isinstance(request, Unparsed):
            await _refuse(context, request)
        yield request


def _streaming_request(behaviour: Callable[..., Any]) -> Callable[..., Any]:
    """The same shape as `behaviour`: an async generator (gRPC iterates it) or a coroutine (it writes)."""
    if inspect.isasyncgenfunction(behaviour):

        async def stream(requests: AsyncIterator[Any], context: Context) -> AsyncIterator[Any]:
            async for item in behaviour(_parsed(requests, context), context):
                yield item

        return stream

    async def checked(requests: AsyncIterator[Any], context: Context) -> Any:
        return await behaviour(_parsed(requests, context), context)

    return checked


def _asynchronous(handler: grpc.RpcMethodHandler[Any, Any]) -> bool:
    behaviour = handler.unary_unary or handler.unary_stream or handler.stream_unary or handler.stream_stream
    return inspect.iscoroutinefunction(behaviour) or inspect.isasyncgenfunction(behaviour)


class MalformedRequests(WrappingInterceptor):
    def wrap(self, method: str, handler: Handler) -> Handler:
        return _tolerant_handler(handler)


def _tolerant_handler(handler: grpc.RpcMethodHandler[Any, Any]) -> grpc.RpcMethodHandler[Any, Any]:
    if not hasattr(handler, "_replace") or not _asynchronous(handler):
        return handler  # a framework's synchronous handler (reflection's) is left as gRPC made it
    changes: dict[str, Any] = {"request_deserializer": _tolerant(handler.request_deserializer)}
    if handler.unary_unary is not None:
        changes["unary_unary"] = _unary_request(handler.unary_unary)
    elif handler.unary_stream is not None:
        changes["unary_stream"] = _unary_request(handler.unary_stream)
    elif handler.stream_stream is not None:
        changes["stream_stream"] = _streaming_request(handler.stream_stream)
    elif handler.stream_unary is not None:
        changes["stream_unary"] = _streaming_request(handler.stream_unary)
    replaced: grpc.RpcMethodHandler[Any, Any] = handler._replace(**changes)
    return replaced
