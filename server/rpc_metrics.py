"""The duration of every gRPC call the server answers, by method and status code
(`jobmesh_rpc_duration_seconds`): the outermost interceptor, so refused calls count too.

Each method's handler is wrapped once (gRPC hands the interceptor the same handler for every call of a
method: `handler_wrapping`); a call then costs two clock reads and one histogram observe. A stream is
measured from its start to its end.
"""

from __future__ import annotations

import asyncio
import inspect
import time
from collections.abc import AsyncIterator, Callable
from typing import Any

import grpc

from jobmesh.core.metrics import RPC_DURATION
from jobmesh.server.handler_wrapping import Handler, WrappingInterceptor

Context = grpc.aio.ServicerContext[Any, Any]
_UNKNOWN = grpc.StatusCode.UNKNOWN.name
_OK = grpc.StatusCode.OK.name
_CANCELLED = grpc.StatusCode.CANCELLED.name


def _code(context: Context, ended: str) -> str:
    """The status the call ended with: the one set (an abort sets it), else how the handler `ended` (OK for a
    return, CANCELLED when its caller went away, UNKNOWN for an exception)."""
    code = context.code()
    if isinstance(code, grpc.StatusCode):
        return code.name
    if isinstance(code, int) and code != 0:
        return next((status.name for status in grpc.StatusCode if status.value[0] == code), _UNKNOWN)
    return ended


def _timed(method: str, behaviour: Callable[..., Any]) -> Callable[..., Any]:
    """The same shape as `behaviour`: an async generator (gRPC iterates it) or a coroutine."""
    if inspect.isasyncgenfunction(behaviour):

        async def stream(request: Any, context: Context) -> AsyncIterator[Any]:
            started = time.perf_counter()
            ended = _UNKNOWN
            try:
                async for item in behaviour(request, context):
                    yield item
                ended = _OK
            except (asyncio.CancelledError, GeneratorExit):
                ended = _CANCELLED  # the caller went away
                raise
            finally:
                RPC_DURATION(method, _code(context, ended)).observe(time.perf_counter() - started)

        return stream

    async def call(request: Any, context: Context) -> Any:
        started = time.perf_counter()
        ended = _UNKNOWN
        try:
            result = await behaviour(request, context)
            ended = _OK
            return result
        except asyncio.CancelledError:
            ended = _CANCELLED  # the caller went away
            raise
        finally:
            RPC_DURATION(method, _code(context, ended)).observe(time.perf_counter() - started)

    return call


class RpcDurations(WrappingInterceptor):
    def wrap(self, method: str, handler: Handler) -> Handler:
        # Only a method served has a handler: the labels are bounded by the services.
        return _timed_handler(method, handler)


def _timed_handler(method: str, handler: grpc.RpcMethodHandler[Any, Any]) -> grpc.RpcMethodHandler[Any, Any]:
    behaviour = handler.unary_unary or handler.unary_stream or handler.stream_unary or handler.stream_stream
    asynchronous = inspect.iscoroutinefunction(behaviour) or inspect.isasyncgenfunction(behaviour)
    if not hasattr(handler, "_replace") or not asynchronous:
        return handler  # a framework's synchronous handler (reflection's) is left as gRPC made it
    for kind in ("unary_unary", "unary_stream", "stream_unary", "stream_stream"):
        if (found := getattr(handler, kind)) is not None:
            replaced: grpc.RpcMethodHandler[Any, Any] = handler._replace(**{kind: _timed(method, found)})
            return replaced
    return handler
