"""Interceptors that wrap each method's handler once.

gRPC hands an interceptor the same handler for every call of a method; wrapping it anew at each call
(inspecting it, new closures, a new tuple) cost each call about a tenth of a millisecond.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any, TypeAlias

import grpc

# A string: grpc's handler type is generic in its stubs only.
Handler: TypeAlias = "grpc.RpcMethodHandler[Any, Any]"


class WrappingInterceptor(grpc.aio.ServerInterceptor):
    """Wraps each method's handler with `wrap`, once, and serves the wrapped one from then on."""

    def __init__(self) -> None:
        self._wrapped: dict[str, tuple[Handler, Handler]] = {}

    def wrap(self, method: str, handler: Handler) -> Handler:
        raise NotImplementedError

    async def intercept_service(
        self,
        continuation: Callable[[grpc.HandlerCallDetails], Awaitable[Handler | None]],
        handler_call_details: grpc.HandlerCallDetails,
    ) -> Handler | None:
        handler = await continuation(handler_call_details)
        if handler is None:
            return None
        method = handler_call_details.method
        cached = self._wrapped.get(method)
        if cached is not None and cached[0] is handler:
            return cached[1]
        wrapped = self.wrap(method, handler)
        self._wrapped[method] = (handler, wrapped)
        return wrapped
