"""The embeddable executor, as a user's program runs it: the SDK's `Executor` (the mesh's own) serving the
program's Python handlers, fed by a server that shares its queue, the runs created and followed with the
SDK's `AsyncClient`."""

from __future__ import annotations

import asyncio
import uuid
from datetime import timedelta
from pathlib import Path

from jobmesh.adapters.queue.factory import open_queue
from jobmesh.adapters.signals.factory import open_signals
from jobmesh.adapters.store.factory import open_store
from jobmesh.client import (
    AsyncClient,
    Executor,
    ExecutorConfig,
    HandlerContext,
    HandlerRegistry,
    RunState,
    handler,
    immediately,
)
from jobmesh.server.app import start_server
from jobmesh.server.config import ServerConfig
from tests.support import SUITE_LOOP_LAG

handlers = HandlerRegistry()


@handlers.handler("greet")
def greet(context: HandlerContext) -> None:
    context.report_progress(0.5, "halfway")
    context.log(f"hello {context.payload.decode()} (attempt {context.attempt})")


class LedgerClosed(Exception):
    pass


@handlers.handler("book")
async def book(context: HandlerContext) -> None:
    raise LedgerClosed(f"cannot book {context.payload.decode()}")


def test_an_embedded_executor_serves_the_programs_handlers(tmp_path: Path) -> None:
    shared = f"memory://sdk-embedded-{uuid.uuid4().hex[:8]}"  # what the server publishes to, it takes from

    async def scenario() -> None:
        store = await asyncio.to_thread(open_store, f"sqlite:///{tmp_path / 'store.sqlite3'}")
        running = await start_server(
            ServerConfig(listen="127.0.0.1:0", max_loop_lag=SUITE_LOOP_LAG),
            store,
            open_queue(shared),
            open_signals(shared),
        )
        address = f"127.0.0.1:{running.port}"
        executor = Executor(ExecutorConfig(server=address, queue_url=shared, signals_url=shared), handlers)
        serving = asyncio.create_task(executor.run())
        try:
            async with AsyncClient(address) as client:
                greeted = await client.create_job(immediately(), handler("greet", b"world"))
                booked = await client.create_job(immediately(), handler("book", b"room 4"))
                assert greeted.run is not None
                assert booked.run is not None
                done = await client.wait_for_run(greeted.run.name, timedelta(seconds=30))
                assert done.state == RunState.SUCCEEDED
                assert done.progress_message == "halfway"
                lines = [line.text async for line in client.tail_run_logs(done.name)]
                assert lines == ["hello world (attempt 1)"]
                failed = await client.wait_for_run(booked.run.name, timedelta(seconds=30))
                assert failed.state == RunState.FAILED
                assert (failed.error.type, failed.error.message) == ("LedgerClosed", "cannot book room 4")
        finally:
            executor.drain(timedelta(0))
            await serving
            await running.stop(grace=0)
            await asyncio.to_thread(store.close)

    asyncio.run(scenario())
