"""The server's gRPC health follows its process's readiness: SERVING while every dependency is up, NOT_SERVING
while one is away (for the server as a whole and for each of its services), told to a Watch as it changes."""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc

from jobmesh.adapters.queue.factory import open_queue
from jobmesh.adapters.signals.factory import open_signals
from jobmesh.adapters.store.sql import SqlStore
from jobmesh.core.readiness import Readiness
from jobmesh.server.app import SERVICE_NAMES, start_server
from jobmesh.server.config import ServerConfig
from tests.support import AT_ONCE, SUITE_LOOP_LAG

SERVING = health_pb2.HealthCheckResponse.SERVING
NOT_SERVING = health_pb2.HealthCheckResponse.NOT_SERVING
JOB_SERVICE = "jobmesh.v1.JobService"


@asynccontextmanager
async def serving(store: SqlStore, readiness: Readiness | None) -> AsyncIterator[health_pb2_grpc.HealthStub]:
    """A whole server on a free port whose health follows `readiness` (when given), and a stub of it."""
    names = f"memory://health-{uuid.uuid4().hex[:8]}"
    queue, signals = open_queue(names), open_signals(names)
    config = ServerConfig(listen="127.0.0.1:0", max_loop_lag=SUITE_LOOP_LAG)
    running = await start_server(config, store, queue, signals, readiness)
    try:
        async with grpc.aio.insecure_channel(f"127.0.0.1:{running.port}") as channel:
            yield health_pb2_grpc.HealthStub(channel)
    finally:
        await running.stop(grace=0)
        signals.close()
        queue.close()


async def status(health: health_pb2_grpc.HealthStub, service: str = "") -> int:
    answer = await health.Check(health_pb2.HealthCheckRequest(service=service), timeout=10)
    return int(answer.status)


async def soon(health: health_pb2_grpc.HealthStub, service: str, expected: int, what: str) -> None:
    """Awaits until `service`'s status is `expected`: the health follows a report a moment later, on the
    server's loop."""
    deadline = time.monotonic() + AT_ONCE
    while (found := await status(health, service)) != expected:
        assert time.monotonic() < deadline, f"{what}: {service!r} still {name_of(found)}"
        await asyncio.sleep(0.01)


def name_of(code: int) -> str:
    return str(health_pb2.HealthCheckResponse.ServingStatus.Name(code))


def test_health_says_not_serving_while_a_dependency_is_away(sqlite_store: SqlStore) -> None:
    readiness = Readiness("server", expected=("store", "queue"))
    readiness.report("store", True)
    readiness.report("queue", True)

    async def scenario() -> None:
        async with serving(sqlite_store, readiness) as health:
            for service in ("", *SERVICE_NAMES):
                assert await status(health, service) == SERVING, service

            # Reported from a probe's thread, as a process's probes do.
            await asyncio.to_thread(readiness.report, "store", False, "StoreUnavailable: refused")
            for service in ("", JOB_SERVICE, *SERVICE_NAMES):
                await soon(health, service, NOT_SERVING, "with no store")

            await asyncio.to_thread(readiness.report, "store", True)
            for service in ("", JOB_SERVICE, *SERVICE_NAMES):
                await soon(health, service, SERVING, "with its store back")

    asyncio.run(asyncio.wait_for(scenario(), 60))


def test_a_server_whose_dependencies_have_not_answered_yet_is_not_serving(sqlite_store: SqlStore) -> None:
    readiness = Readiness("server", expected=("store",))

    async def scenario() -> None:
        async with serving(sqlite_store, readiness) as health:
            assert await status(health) == NOT_SERVING
            assert await status(health, JOB_SERVICE) == NOT_SERVING
            readiness.report("store", True)  # on the server's loop, this time
            await soon(health, JOB_SERVICE, SERVING, "once the store answered")

    asyncio.run(asyncio.wait_for(scenario(), 60))


def test_a_watch_sees_each_change(sqlite_store: SqlStore) -> None:
    readiness = Readiness("server", expected=("signals",))
    readiness.report("signals", True)

    async def scenario() -> list[str]:
        async with serving(sqlite_store, readiness) as health:
            watch = health.Watch(health_pb2.HealthCheckRequest(service=JOB_SERVICE))
            seen: list[str] = []

            async def next_status() -> str:
                answer = await asyncio.wait_for(watch.read(), AT_ONCE)
                seen.append(name_of(answer.status))
                return seen[-1]

            try:
                assert await next_status() == "SERVING"
                await asyncio.to_thread(readiness.report, "signals", False, "SignalsUnavailable: refused")
                assert await next_status() == "NOT_SERVING"
                # Reports that change nothing send nothing.
                for _ in range(3):
                    await asyncio.to_thread(readiness.report, "signals", False, "SignalsUnavailable: again")
                await asyncio.to_thread(readiness.report, "signals", True)
                assert await next_status() == "SERVING"
            finally:
                watch.cancel()
            return seen

    assert asyncio.run(asyncio.wait_for(scenario(), 60)) == ["SERVING", "NOT_SERVING", "SERVING"]


def test_without_a_readiness_the_server_is_serving(sqlite_store: SqlStore) -> None:
    async def scenario() -> None:
        async with serving(sqlite_store, None) as health:
            assert await status(health) == SERVING
            assert await status(health, JOB_SERVICE) == SERVING

    asyncio.run(asyncio.wait_for(scenario(), 60))
