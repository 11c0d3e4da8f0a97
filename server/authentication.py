"""Authentication of every call: a server interceptor asks the credential sources, in order, for the call's
principal and runs the handler as it (`acting_as`), so the servicers read it with `current_principal()`.

- A call whose credential a source refuses, or with none where one is required, ends `UNAUTHENTICATED` with
  one message whatever was wrong; the reason goes to the server log only.
- The services named open (health and reflection by default) are served without a credential, as ANONYMOUS.
- After authentication the caller's request rate is admitted (`CallerRates`): past it, `RESOURCE_EXHAUSTED`
  with a `RetryInfo`.

With authentication off (`jobmesh dev` on loopback) the interceptor is not installed: every call runs as
UNRESTRICTED, the context variable's default.
"""

from __future__ import annotations

import inspect
import logging
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from typing import Any

import grpc
from grpc_status import rpc_status

from jobmesh.core.errors import JobmeshError, Unauthenticated
from jobmesh.server.api.status import status_of
from jobmesh.server.bearer import AUTHORIZATION
from jobmesh.server.caller_rates import CallerRates
from jobmesh.server.principals import CredentialSource, Principal, acting_as

__all__ = ["ANONYMOUS", "HEALTH_SERVICE", "REFLECTION_SERVICE", "Authentication", "authenticate"]

log = logging.getLogger(__name__)
Context = grpc.aio.ServicerContext[Any, Any]

HEALTH_SERVICE = "grpc.health.v1.Health"
REFLECTION_SERVICE = "grpc.reflection.v1alpha.ServerReflection"
# Who calls an open service without a credential: no role anywhere, no executor.
ANONYMOUS = Principal(subject="anonymous")


def authenticate(
    sources: Sequence[CredentialSource], metadata: Mapping[str, str], peer: Mapping[str, Sequence[bytes]]
) -> Principal:
    """The principal of the first source that recognises the call's credential. Unauthenticated when a
    source refuses it, when none recognises a bearer token that the call carries, or when there is none."""
    for source in sources:
        principal = source.principal_of(metadata, peer)
        if principal is not None:
            return principal
    if AUTHORIZATION in metadata:
        raise Unauthenticated("a bearer token of a kind that no configured credential source accepts")
    raise Unauthenticated("the call carries no credential")


def _metadata_of(context: Context) -> dict[str, str]:
    return {
        key.lower(): value for key, value in context.invocation_metadata() or () if isinstance(value, str)
    }


def _service_of(method: str) -> str:
    """`/jobmesh.v1.JobService/GetJob` → `jobmesh.v1.JobService`."""
    return method.split("/")[1] if method.count("/") == 2 else method


Behaviour = Callable[[Any, Context], Any]


class Authentication(grpc.aio.ServerInterceptor):
    def __init__(
        self,
        sources: Sequence[CredentialSource],
        *,
        open_services: frozenset[str] = frozenset({HEALTH_SERVICE, REFLECTION_SERVICE}),
        rates: CallerRates | None = None,
    ) -> None:
        if not sources:
            raise ValueError("authentication needs at least one credential source")
        self._sources = tuple(sources)
        self._open = open_services
        self._rates = rates

    async def intercept_service(
        self,
        continuation: Callable[[grpc.HandlerCallDetails], Awaitable[grpc.RpcMethodHandler[Any, Any] | None]],
        handler_call_details: grpc.HandlerCallDetails,
    ) -> grpc.RpcMethodHandler[Any, Any] | None:
        handler = await continuation(handler_call_details)
        if handler is None or not hasattr(handler, "_replace"):
            return handler
        method = handler_call_details.method
        kind = next(
            name
            for name in ("unary_unary", "unary_stream", "stream_unary", "stream_stream")
            if getattr(handler, name) is not None
        )
        behaviour: Behaviour = getattr(handler, kind)
        replaced: grpc.RpcMethodHandler[Any, Any] = handler._replace(
            **{kind: self._wrapped(method, behaviour)}
        )
        return replaced

    def _wrapped(self, method: str, behaviour: Behaviour) -> Behaviour:
        """`behaviour` run as the call's principal, in the handler's own task; the same shape (an async
        generator, which gRPC iterates, or a coroutine)."""
        if _service_of(method) in self._open:

            async def admit(context: Context) -> Principal:
                return ANONYMOUS

        else:

            async def admit(context: Context) -> Principal:
                return await self._admitted(method, context)

        if inspect.isasyncgenfunction(behaviour):

            async def stream(request: Any, context: Context) -> AsyncIterator[Any]:
                with acting_as(await admit(context)):
                    async for item in behaviour(request, context):
                        yield item

            return stream
        if inspect.iscoroutinefunction(behaviour):

            async def unary(request: Any, context: Context) -> Any:
                with acting_as(await admit(context)):
                    return await behaviour(request, context)

            return unary

        async def refused(request: Any, context: Context) -> Any:
            # A synchronous handler would run on a thread the principal does not reach: fail closed.
            log.error("%s has a synchronous handler, which authentication cannot cover", method)
            await context.abort(grpc.StatusCode.INTERNAL, "internal error; see the server log")

        return refused

    async def _admitted(self, method: str, context: Context) -> Principal:
        try:
            peer = {key: list(values) for key, values in context.auth_context().items()}
            principal = authenticate(self._sources, _metadata_of(context), peer)
            if self._rates is not None:
                self._rates.admit(principal)
        except Unauthenticated as error:
            log.warning(
                "call refused UNAUTHENTICATED: %s",
                error.detail,
                extra={"method": method, "peer": context.peer(), "reason": error.detail},
            )
            await _abort(context, error)
            raise  # unreachable: abort raises
        except JobmeshError as error:
            await _abort(context, error)
            raise
        return principal


async def _abort(context: Context, error: JobmeshError) -> None:
    await context.abort_with_status(rpc_status.to_status(status_of(error)))
