"""`ServerHealth.check`, an executor's probe of its server: it returns while the server's gRPC health says
SERVING, raises ServerNotServing while it says otherwise (its store away, say), and an RpcError when nothing
answers; it presents the executor's token, for a server whose health is closed to callers without one."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import grpc
import pytest

from jobmesh.adapters.queue.factory import open_queue
from jobmesh.adapters.signals.factory import open_signals
from jobmesh.adapters.store.sql import SqlStore
from jobmesh.core.readiness import Readiness
from jobmesh.executor.config import ExecutorConfig
from jobmesh.executor.server_health import ServerHealth, ServerNotServing
from jobmesh.processes.health_endpoint import health_served
from jobmesh.server.app import start_server
from jobmesh.server.config import ServerConfig
from tests.acceptance.processes import free_port
from tests.server.secured import secured_server
from tests.support import AT_ONCE, SUITE_LOOP_LAG, arrives


@asynccontextmanager
async def server_following(store: SqlStore, readiness: Readiness) -> AsyncIterator[str]:
    """A whole server whose gRPC health follows `readiness`; yields its address."""
    names = f"memory://server-health-{uuid.uuid4().hex[:8]}"
    queue, signals = open_queue(names), open_signals(names)
    config = ServerConfig(listen="127.0.0.1:0", max_loop_lag=SUITE_LOOP_LAG)
    running = await start_server(config, store, queue, signals, readiness)
    try:
        yield f"127.0.0.1:{running.port}"
    finally:
        await running.stop(grace=0)
        signals.close()
        queue.close()


async def passes(health: ServerHealth) -> None:
    """Awaits until `health.check()` returns (called in a thread: the server runs on this loop)."""
    deadline = asyncio.get_running_loop().time() + AT_ONCE
    while True:
        try:
            await asyncio.to_thread(health.check)
            return
        except ServerNotServing:
            if asyncio.get_running_loop().time() > deadline:
                raise
        await asyncio.sleep(0.01)


def test_a_server_that_is_not_serving_fails_the_check(sqlite_store: SqlStore) -> None:
    server_readiness = Readiness("server", expected=("store",))

    async def scenario() -> None:
        async with server_following(sqlite_store, server_readiness) as address:
            health = ServerHealth(ExecutorConfig(server=address))
            try:
                with pytest.raises(ServerNotServing, match=f"the server {address} says NOT_SERVING"):
                    await asyncio.to_thread(health.check)
                server_readiness.report("store", True)
                await passes(health)  # SERVING (a moment later, on the server's loop): returns
            finally:
                health.close()

    asyncio.run(asyncio.wait_for(scenario(), 60))


def test_an_executors_readiness_says_why_its_server_cannot_take_claims(sqlite_store: SqlStore) -> None:
    server_readiness = Readiness("server", expected=("store",))
    executor_readiness = Readiness("executor")

    async def scenario() -> None:
        async with server_following(sqlite_store, server_readiness) as address:
            health = ServerHealth(ExecutorConfig(server=address))
            try:
                async with health_served(executor_readiness, {"server": health.check}, None):
                    [state] = executor_readiness.states()
                    assert (state.name, state.up) == ("server", False)
                    assert state.detail == f"ServerNotServing: the server {address} says NOT_SERVING"
                    server_readiness.report("store", True)
                    await arrives(executor_readiness.ready, AT_ONCE + 1, "the executor ready with its server")
            finally:
                health.close()

    asyncio.run(asyncio.wait_for(scenario(), 60))


def test_no_server_fails_the_check_with_an_rpc_error() -> None:
    health = ServerHealth(ExecutorConfig(server=f"127.0.0.1:{free_port()}"))
    try:
        with pytest.raises(grpc.RpcError) as raised:
            health.check()
        assert raised.value.code() == grpc.StatusCode.UNAVAILABLE
    finally:
        health.close()


def test_the_check_presents_the_executors_token(sqlite_store: SqlStore, tmp_path: Path) -> None:
    with secured_server(sqlite_store, tmp_path, open_services=frozenset()) as server:
        health = ServerHealth(ExecutorConfig(server=server.address, token=server.token("exec-1")))
        anonymous = ServerHealth(ExecutorConfig(server=server.address))
        try:
            health.check()
            with pytest.raises(grpc.RpcError) as raised:
                anonymous.check()
            assert raised.value.code() == grpc.StatusCode.UNAUTHENTICATED
        finally:
            health.close()
            anonymous.close()
