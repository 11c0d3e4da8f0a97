"""Callers for authorization tests: a test-only interceptor runs each call as the principal that its
`x-test-caller` metadata names (a call without it runs as UNRESTRICTED, as on a server that checks no
credential). Authentication's own cases (no token, bad token, an executor credential) join the same tables by
adding a real credential source in front."""

from __future__ import annotations

import inspect
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from types import MappingProxyType
from typing import Any

import grpc

from jobmesh.server.api.malformed import MalformedRequests
from jobmesh.server.app import SERVER_OPTIONS
from jobmesh.server.principals import Principal, Role, acting_as
from tests.server.conftest import AioServerThread

NAMESPACE, OTHER_NAMESPACE = "team-a", "team-b"
CALLER_KEY = "x-test-caller"


def _principal(subject: str, roles: Mapping[str, Role]) -> Principal:
    return Principal(subject=subject, roles=MappingProxyType(dict(roles)))


CALLERS: Mapping[str, Principal] = {
    "viewer": _principal("alice-viewer", {NAMESPACE: Role.VIEWER}),
    "operator": _principal("bob-operator", {NAMESPACE: Role.OPERATOR}),
    "admin": _principal("carol-admin", {NAMESPACE: Role.ADMIN}),
    "other-namespace": _principal("dave-elsewhere", {OTHER_NAMESPACE: Role.ADMIN}),
    "no-role": _principal("erin-nowhere", {}),
}


def as_caller(name: str) -> tuple[tuple[str, str], ...]:
    """The call metadata that makes a call run as CALLERS[name]."""
    return ((CALLER_KEY, name),)


def _acting(principal: Principal, behaviour: Callable[..., Any]) -> Callable[..., Any]:
    if inspect.isasyncgenfunction(behaviour):

        async def stream(request: Any, context: Any) -> AsyncIterator[Any]:
            with acting_as(principal):
                async for item in behaviour(request, context):
                    yield item

        return stream

    async def unary(request: Any, context: Any) -> Any:
        with acting_as(principal):
            return await behaviour(request, context)

    return unary


class ActAsCaller(grpc.aio.ServerInterceptor):
    async def intercept_service(
        self,
        continuation: Callable[[grpc.HandlerCallDetails], Awaitable[grpc.RpcMethodHandler[Any, Any] | None]],
        handler_call_details: grpc.HandlerCallDetails,
    ) -> grpc.RpcMethodHandler[Any, Any] | None:
        handler = await continuation(handler_call_details)
        metadata = dict(handler_call_details.invocation_metadata or ())
        name = metadata.get(CALLER_KEY)
        if handler is None or name is None or not hasattr(handler, "_replace"):
            return handler
        principal = CALLERS[str(name)]
        if handler.unary_unary is not None:
            replaced: grpc.RpcMethodHandler[Any, Any] = handler._replace(
                unary_unary=_acting(principal, handler.unary_unary)
            )
            return replaced
        if handler.unary_stream is not None:
            replaced = handler._replace(unary_stream=_acting(principal, handler.unary_stream))
            return replaced
        return handler


class CallerServerThread(AioServerThread):
    """The servicers' test server, with the callers' interceptor inside the real ones."""

    async def _create(self) -> grpc.aio.Server:
        return grpc.aio.server(interceptors=[MalformedRequests(), ActAsCaller()], options=SERVER_OPTIONS)
