"""The long-running jobmesh processes: server, watcher, executor, and `dev` (all three in one process).

Each opens its adapters from URLs (store, queue, signals), runs until SIGINT or SIGTERM, then stops in order:
no new work, in-flight work drained, adapters closed.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import signal
from collections.abc import AsyncIterator
from pathlib import Path

from sqlalchemy.engine import make_url

from jobmesh.adapters.queue.factory import open_queue
from jobmesh.adapters.signals.factory import open_signals
from jobmesh.adapters.store.factory import open_store
from jobmesh.adapters.store.sql import SqlStore
from jobmesh.core.ports.queue import RunQueue
from jobmesh.core.ports.signals import SignalBus
from jobmesh.executor.config import ExecutorConfig
from jobmesh.executor.handlers import HandlerRegistry
from jobmesh.executor.main import run_executor
from jobmesh.executor.runtime import Executor
from jobmesh.server.app import start_server
from jobmesh.server.config import ServerConfig
from jobmesh.watcher.config import WatcherConfig
from jobmesh.watcher.service import Watcher

log = logging.getLogger("jobmesh")


def redacted(url: str) -> str:
    return make_url(url).render_as_string(hide_password=True) if "://" in url else url


def _ensure_sqlite_folder(url: str) -> None:
    parsed = make_url(url)
    if parsed.get_backend_name() == "sqlite" and parsed.database not in (None, "", ":memory:"):
        Path(parsed.database).expanduser().parent.mkdir(parents=True, exist_ok=True)


def stop_on_signals() -> asyncio.Event:
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    return stop


@contextlib.asynccontextmanager
async def adapters(config: ServerConfig) -> AsyncIterator[tuple[SqlStore, RunQueue, SignalBus]]:
    _ensure_sqlite_folder(config.database_url)
    store = await asyncio.to_thread(
        open_store,
        config.database_url,
        retention_days=config.retention_days,
        partition_ahead_days=config.partition_ahead_days,
    )
    queue = open_queue(config.queue_url)
    signals = open_signals(config.signals_url)
    try:
        yield store, queue, signals
    finally:
        signals.close()
        queue.close()
        store.close()


async def serve(config: ServerConfig, banner: str) -> None:
    """`jobmesh server`: the gRPC server alone."""
    stop = stop_on_signals()
    async with adapters(config) as (store, queue, signals):
        running = await start_server(config, store, queue, signals)
        _announce(banner, config, running.port)
        await stop.wait()
        print(f"{banner}: stopping", flush=True)
        await running.stop()


async def watch(config: ServerConfig, watcher_config: WatcherConfig) -> None:
    """`jobmesh watcher`: the scheduling loop alone (any number run; one leads)."""
    stop = stop_on_signals()
    async with adapters(config) as (store, queue, signals):
        print(
            f"jobmesh watcher {watcher_config.watcher_id}: store {redacted(config.database_url)}", flush=True
        )
        await Watcher(watcher_config, store, queue, signals).run(stop)


def _announce(banner: str, config: ServerConfig, port: int) -> None:
    host = config.listen.rsplit(":", 1)[0]
    print(f"{banner}: gRPC on {host}:{port} (store: {redacted(config.database_url)})", flush=True)
    print(f"  try: grpcurl -plaintext {host}:{port} list   (Ctrl-C stops)", flush=True)


async def execute(config: ExecutorConfig, handlers: HandlerRegistry | None = None) -> None:
    """`jobmesh executor`: a worker (SIGTERM drains it)."""
    print(f"jobmesh executor {config.executor_id}: server {config.server}, queues {', '.join(config.queues)}")
    if handlers:
        print(f"  handlers: {', '.join(handlers.names())}", flush=True)
    await run_executor(config, handlers)


async def dev(config: ServerConfig) -> None:
    """`jobmesh dev`: server, watcher and executor in one process, sharing in-process queue and signals."""
    stop = stop_on_signals()
    async with adapters(config) as (store, queue, signals):
        running = await start_server(config, store, queue, signals)
        host = config.listen.rsplit(":", 1)[0]
        executor = Executor(
            ExecutorConfig(server=f"{host}:{running.port}", queue_url=config.queue_url),
            queue=queue,
            signals=signals,
        )
        watcher = Watcher(WatcherConfig(), store, queue, signals)
        tasks = [asyncio.create_task(watcher.run(stop)), asyncio.create_task(executor.run())]
        _announce("jobmesh dev", config, running.port)
        await stop.wait()
        print("jobmesh dev: stopping", flush=True)
        executor.drain(grace=5.0)
        await asyncio.gather(*tasks, return_exceptions=True)
        await running.stop()
