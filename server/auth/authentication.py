"""Authentication of every call: a server interceptor asks the credential sources, in order, for the call's
principal and runs the handler as it (`acting_as`), so the servicers read it with `current_principal()`.

- A call whose credential a source refuses, or with none where one is required, ends `UNAUTHENTICATED` with
  one message whatever was wrong; the reason goes to the server log only.
- The services named open (health and reflection by default) are served without a credential, as ANONYMOUS.
- A stream's credential is checked again every second while it is open: one revoked (or expired) ends it
  `UNAUTHENTICATED` within seconds.
- After authentication the caller's request rate is admitted (`CallerRates`): past it, `RESOURCE_EXHAUSTED`
  with a `RetryInfo`.

With authentication off (`jobmesh dev` on loopback) the interceptor is not installed: every call runs as
UNRESTRICTED, the context variable's default.
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import logging
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator, Mapping, Sequence
from typing import Any

import grpc
from grpc_status import rpc_status

from jobmesh.core.errors import JobmeshError, ResourceExhausted, Unauthenticated
from jobmesh.server.admission.caller_rates import CallerRates
from jobmesh.server.admission.stream_slots import StreamSlots
from jobmesh.server.auth.bearer import AUTHORIZATION
from jobmesh.server.principals import CredentialSource, Principal, acting_as
from jobmesh.server.refusals import RefusalTrail, noting_refusals
from jobmesh.server.status import status_of

__all__ = ["ANONYMOUS", "HEALTH_SERVICE", "REFLECTION_SERVICE", "Authentication", "authenticate"]

log = logging.getLogger(__name__)
Context = grpc.aio.ServicerContext[Any, Any]

HEALTH_SERVICE = "grpc.health.v1.Health"
REFLECTION_SERVICE = "grpc.reflection.v1alpha.ServerReflection"
# Who calls an open service without a credential: no role anywhere, no executor.
ANONYMOUS = Principal(subject="anonymous")
# How often an open stream's credential is checked again (a revoked token ends its streams this soon).
REVALIDATE_INTERVAL = 1.0
# Streams served without a credential (an open service's, such as health's `Watch`): in all, and per client.
ANONYMOUS_STREAMS, ANONYMOUS_STREAMS_PER_CLIENT = 256, 16
_END = object()  # a stream's handler has no more messages


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
        refusals: RefusalTrail | None = None,
    ) -> None:
        if not sources:
            raise ValueError("authentication needs at least one credential source")
        self._sources = tuple(sources)
        self._open = open_services
        self._rates = rates
        self._refusals = refusals
        self._anonymous = StreamSlots(total=ANONYMOUS_STREAMS, per_client=ANONYMOUS_STREAMS_PER_CLIENT)

    def close(self) -> None:
        """Waits for the refusal being written to the audit trail, if any."""
        if self._refusals is not None:
            self._refusals.close()

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
            **{kind: self._wrapped(method, behaviour, streams=kind != "unary_unary")}
        )
        return replaced

    def _wrapped(self, method: str, behaviour: Behaviour, *, streams: bool) -> Behaviour:
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
                principal = await admit(context)
                if principal is ANONYMOUS:
                    async with self._anonymous_slot(context):
                        with acting_as(principal):
                            async for item in behaviour(request, context):
                                yield item
                    return
                guard = _StreamGuard(self._sources, principal, method, context)
                with self._serving_as(principal, method):
                    async for item in guard.run(behaviour(request, context)):
                        yield item
                if guard.revoked is not None:
                    await _abort(context, guard.revoked)

            return stream
        if inspect.iscoroutinefunction(behaviour) and streams:  # a stream served by `context.write`

            async def written(request: Any, context: Context) -> Any:
                principal = await admit(context)
                if principal is ANONYMOUS:
                    async with self._anonymous_slot(context):
                        with acting_as(principal):
                            return await behaviour(request, context)
                guard = _StreamGuard(self._sources, principal, method, context)
                with self._serving_as(principal, method):
                    result = await guard.call(behaviour(request, context))
                if guard.revoked is not None:
                    await _abort(context, guard.revoked)
                return result

            return written
        if inspect.iscoroutinefunction(behaviour):

            async def unary(request: Any, context: Context) -> Any:
                with self._serving_as(await admit(context), method):
                    return await behaviour(request, context)

            return unary

        async def refused(request: Any, context: Context) -> Any:
            # A synchronous handler would run on a thread the principal does not reach: fail closed.
            log.error("%s has a synchronous handler, which authentication cannot cover", method)
            await context.abort(grpc.StatusCode.INTERNAL, "internal error; see the server log")

        return refused

    @contextlib.contextmanager
    def _serving_as(self, principal: Principal, method: str) -> Iterator[None]:
        """The handler runs as `principal`, and a refusal it ends with goes to the audit trail."""
        with acting_as(principal):
            if self._refusals is None:
                yield
                return
            trail = self._refusals
            with noting_refusals(lambda error: trail.note(principal.subject, method, error)):
                yield

    @contextlib.asynccontextmanager
    async def _anonymous_slot(self, context: Context) -> AsyncIterator[None]:
        """A slot among the streams served without a credential (health's `Watch`), or the call ends
        RESOURCE_EXHAUSTED: open services must not let strangers hold the server's memory."""
        entered = False
        try:
            with self._anonymous.held(context.peer()):
                entered = True
                yield
        except ResourceExhausted as error:
            if entered:
                raise
            await _abort(context, error)

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
            if self._refusals is not None:
                self._refusals.note(ANONYMOUS.subject, method, error)
            await _abort(context, error)
            raise  # unreachable: abort raises
        except JobmeshError as error:
            await _abort(context, error)
            raise
        return principal


class _StreamGuard:
    """Keeps an open stream to the credential it was opened with: every REVALIDATE_INTERVAL the call's
    credential is authenticated again, and once it is refused (a token removed from its file, a JWT past its
    expiry) or stands for another grant, the stream ends `UNAUTHENTICATED`. The handler is cancelled where it
    waits; while gRPC sends one of its messages, it ends after that message."""

    def __init__(
        self, sources: Sequence[CredentialSource], principal: Principal, method: str, context: Context
    ) -> None:
        self._sources = sources
        self._principal = principal
        self._method = method
        self._context = context
        self._task = asyncio.current_task()
        self._inside = False  # the handler runs (or waits): a cancel lands in it
        self.revoked: Unauthenticated | None = None

    async def run(self, items: AsyncIterator[Any]) -> AsyncIterator[Any]:
        """Yields the handler's messages until its credential is refused."""
        watch = asyncio.create_task(self._watch())
        try:
            while self.revoked is None:
                item: Any = _END
                with self._cancellable():
                    item = await anext(items, _END)
                if item is _END or self.revoked is not None:
                    return
                yield item
        finally:
            watch.cancel()

    async def call(self, handler: Awaitable[Any]) -> Any:
        """Awaits a handler that writes its stream itself (it is cancelled once the credential is refused)."""
        watch = asyncio.create_task(self._watch())
        result = None
        try:
            with self._cancellable():
                result = await handler
        finally:
            watch.cancel()
        return result

    @contextlib.contextmanager
    def _cancellable(self) -> Iterator[None]:
        """Where the handler runs: a revocation cancels it there, and the cancel stops here."""
        self._inside = True
        try:
            yield
        except asyncio.CancelledError:
            if self.revoked is None or self._task is None:
                raise
            self._task.uncancel()
        finally:
            self._inside = False

    async def _watch(self) -> None:
        peer = {key: list(values) for key, values in self._context.auth_context().items()}
        metadata = _metadata_of(self._context)
        while True:
            await asyncio.sleep(REVALIDATE_INTERVAL)
            try:
                principal = authenticate(self._sources, metadata, peer)
            except Unauthenticated as error:
                self._end(error.detail)
                return
            if principal != self._principal:
                self._end("the credential now stands for another grant")
                return

    def _end(self, reason: str) -> None:
        log.warning(
            "open stream ended UNAUTHENTICATED: %s",
            reason,
            extra={"method": self._method, "peer": self._context.peer(), "reason": reason},
        )
        self.revoked = Unauthenticated(reason)
        if self._inside and self._task is not None:
            self._task.cancel()


async def _abort(context: Context, error: JobmeshError) -> None:
    await context.abort_with_status(rpc_status.to_status(status_of(error)))
