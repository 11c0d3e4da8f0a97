"""The principal of the call being served: current for the handler's code, and let go quietly whichever
context ends it. A stream whose client cancelled it while the server sent a message is closed by the event
loop in a task of its own, in another context, where the principal set for the call cannot be reset: such
streams of a server with authentication on used to log `ValueError: ... created in a different Context`."""

from __future__ import annotations

import asyncio
import contextvars
import gc
import logging
from collections.abc import AsyncGenerator, AsyncIterator, Mapping, Sequence
from types import MappingProxyType
from typing import Any

import grpc
import pytest

from jobmesh.server.app import new_grpc_server
from jobmesh.server.auth.authentication import Authentication
from jobmesh.server.principals import UNRESTRICTED, Principal, Role, acting_as, current_principal

OPERATOR = Principal(subject="operator-of-team-a", roles=MappingProxyType({"team-a": Role.OPERATOR}))
POUR = "/jobmesh.test.Flood/Pour"
CHUNK = b"x" * (256 * 1024)  # a few of them fill the connection's window: the server waits to send


def test_the_principal_is_current_inside_and_the_one_before_after() -> None:
    assert current_principal() is UNRESTRICTED
    with acting_as(OPERATOR):
        assert current_principal() is OPERATOR
    assert current_principal() is UNRESTRICTED


def test_a_stream_closed_from_another_context_ends_without_an_error() -> None:
    async def stream() -> AsyncGenerator[str, None]:
        with acting_as(OPERATOR):
            yield current_principal().subject
            yield "never read"

    async def serve_one_then_close_elsewhere() -> str:
        served = stream()
        first = await anext(served)
        # What the event loop does with a generator its cancelled call let go: close it in a task of its own.
        closing = asyncio.get_running_loop().create_task(served.aclose(), context=contextvars.Context())
        await closing
        return first

    assert asyncio.run(serve_one_then_close_elsewhere()) == OPERATOR.subject


class _AnyBearer:
    """A credential source that takes any bearer token for OPERATOR."""

    def principal_of(
        self, metadata: Mapping[str, str], peer: Mapping[str, Sequence[bytes]]
    ) -> Principal | None:
        return OPERATOR if "authorization" in metadata else None


def _same(data: bytes) -> bytes:
    return data


async def _pour(request: bytes, context: grpc.aio.ServicerContext[Any, Any]) -> AsyncIterator[bytes]:
    while True:
        yield CHUNK


async def _cancel_streams_while_the_server_sends(count: int) -> None:
    server = new_grpc_server(authentication=Authentication([_AnyBearer()]))
    handler: grpc.RpcMethodHandler[bytes, bytes] = grpc.unary_stream_rpc_method_handler(_pour)
    server.add_generic_rpc_handlers(
        [grpc.method_handlers_generic_handler("jobmesh.test.Flood", {"Pour": handler})]
    )
    port = server.add_insecure_port("127.0.0.1:0")
    await server.start()
    try:
        async with grpc.aio.insecure_channel(f"127.0.0.1:{port}") as channel:
            for _ in range(count):
                pour = channel.unary_stream(POUR, _same, _same)
                call = pour(b"", metadata=(("authorization", "Bearer any"),))
                assert await call.read() == CHUNK
                await asyncio.sleep(0.2)  # the server fills the window and waits to send the next
                call.cancel()
            await asyncio.sleep(0.2)
            # The generators the cancelled calls let go are closed now, each in a task of its own.
            gc.collect()
            await asyncio.sleep(0.2)
    finally:
        await server.stop(None)


def test_streams_cancelled_while_the_server_sends_log_no_context_error(
    caplog: pytest.LogCaptureFixture,
) -> None:
    with caplog.at_level(logging.ERROR):
        asyncio.run(_cancel_streams_while_the_server_sends(3))
    failures = [record for record in caplog.records if record.exc_info and record.exc_info[0] is ValueError]
    assert failures == [], [record.exc_info[1] for record in failures if record.exc_info]
