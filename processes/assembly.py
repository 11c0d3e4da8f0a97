"""The long-running jobmesh processes: server, watcher, executor, and `dev` (all three in one process).

Each opens its adapters from URLs (store, queue, signals), runs until SIGINT or SIGTERM, then stops in order:
no new work, in-flight work drained, adapters closed. Each imports its own side when it starts (an executor
has no use for the server, the store or Alembic): importing all of them costs a process about a second of
CPU.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import hashlib
import logging
import signal
from collections.abc import AsyncIterator, Callable
from datetime import timedelta
from pathlib import Path
from typing import TYPE_CHECKING

from sqlalchemy.engine import make_url

from jobmesh.adapters.queue.factory import open_queue
from jobmesh.adapters.signals.factory import open_signals
from jobmesh.core.hooks import RunHooks
from jobmesh.core.ports.queue import RunQueue
from jobmesh.core.ports.signals import SignalBus
from jobmesh.core.readiness import Readiness
from jobmesh.executor.config import ExecutorConfig
from jobmesh.processes.banner import grpcurl_command
from jobmesh.processes.config_builders import Connections
from jobmesh.processes.dashboard import DashboardConfig, Envoy, ip_of
from jobmesh.processes.health_endpoint import health_served
from jobmesh.processes.observability import run_hooks
from jobmesh.processes.ports import ensure_addresses_free, ensure_free
from jobmesh.processes.refusal import Refused
from jobmesh.processes.settings import BY_NAME
from jobmesh.server.config import ServerConfig
from jobmesh.transport.tls import ChannelTls
from jobmesh.watcher.config import WatcherConfig

if TYPE_CHECKING:
    from jobmesh.adapters.store.sql import SqlStore
    from jobmesh.executor.handlers import HandlerRegistry
    from jobmesh.server.app import RunningServer

log = logging.getLogger(__name__)
DEV_DRAIN_GRACE = timedelta(seconds=5)
_ANY = ("", "0.0.0.0", "::")  # wildcard hosts: not a name a certificate carries


def redacted(url: str) -> str:
    return make_url(url).render_as_string(hide_password=True) if "://" in url else url


def _ensure_sqlite_folder(url: str) -> None:
    parsed = make_url(url)
    if parsed.get_backend_name() == "sqlite" and parsed.database not in (None, "", ":memory:"):
        Path(parsed.database).expanduser().parent.mkdir(parents=True, exist_ok=True)


def _on_signals(handler: Callable[[], None]) -> None:
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, handler)


def stop_on_signals() -> asyncio.Event:
    stop = asyncio.Event()
    _on_signals(stop.set)
    return stop


@contextlib.asynccontextmanager
async def adapters(connections: Connections) -> AsyncIterator[tuple[SqlStore, RunQueue, SignalBus]]:
    from jobmesh.adapters.store.factory import open_store

    _ensure_sqlite_folder(connections.database_url)
    store = await asyncio.to_thread(
        open_store, connections.database_url, retention_days=connections.retention.days
    )
    queue = open_queue(connections.queue_url)
    signals = open_signals(connections.signals_url)
    try:
        yield store, queue, signals
    finally:
        signals.close()
        queue.close()
        store.close()


@contextlib.asynccontextmanager
async def _closing(hooks: RunHooks) -> AsyncIterator[None]:
    """Closes the hooks when the process stops (a tracer exports its last spans)."""
    try:
        yield
    finally:
        hooks.close()


def run_migrations(connections: Connections) -> None:
    """`jobmesh migrate`: the schema brought to the latest version."""
    from jobmesh.adapters.store.migrate import upgrade

    _ensure_sqlite_folder(connections.database_url)
    upgrade(connections.database_url)
    print(f"schema up to date: {redacted(connections.database_url)}")


async def run_server(
    connections: Connections, config: ServerConfig, ready: Callable[[], None] | None = None
) -> None:
    """`jobmesh server`: the gRPC server alone (one of its workers: `ready` is called once it serves)."""
    from jobmesh.server.app import start_server

    if not config.share_port:  # a worker's ports are its parent's, checked there
        ensure_addresses_free(config)
    config = journal_of_database(config, connections)
    hooks = run_hooks("server")
    stop = stop_on_signals()
    readiness = Readiness("server")
    async with (
        _closing(hooks),
        adapters(connections) as (store, queue, signals),
        health_served(
            readiness,
            _dependencies(store, queue, signals),
            config.health_listen,
            share_port=config.share_port,
        ),
    ):
        running = await start_server(config, store, queue, signals, readiness, hooks=hooks)
        _announce("jobmesh server", config, connections, running)
        if ready is not None:
            ready()
        await stop.wait()
        print("jobmesh server: stopping", flush=True)
        await running.stop()


def journal_of_database(config: ServerConfig, connections: Connections) -> ServerConfig:
    """The journal in a folder of the database's own under the configured one: servers of one database
    apply each other's journals (a dead one's), never those of another database."""
    if config.journal_dir is None:
        return config
    digest = hashlib.sha256(redacted(connections.database_url).encode()).hexdigest()[:16]
    return dataclasses.replace(config, journal_dir=config.journal_dir / digest)


def _dependencies(store: SqlStore, queue: RunQueue, signals: SignalBus) -> dict[str, Callable[[], None]]:
    """What a process that holds the adapters probes for its readiness."""
    return {
        "store": store.check_reachable,
        "queue": queue.check_reachable,
        "signals": signals.check_reachable,
    }


async def run_watcher(connections: Connections, config: WatcherConfig) -> None:
    """`jobmesh watcher`: the scheduling loop alone (any number run; one leads)."""
    from jobmesh.watcher.service import Watcher

    hooks = run_hooks("watcher")
    stop = stop_on_signals()
    readiness = Readiness("watcher")
    async with _closing(hooks), adapters(connections) as (store, queue, signals):
        print(f"jobmesh watcher {config.watcher_id}: store {redacted(connections.database_url)}", flush=True)
        async with health_served(readiness, _dependencies(store, queue, signals), config.health_listen):
            await Watcher(config, store, queue, signals, readiness=readiness, hooks=hooks).run(stop)


def _announce(
    banner: str,
    config: ServerConfig,
    connections: Connections,
    running: RunningServer,
    tls: ChannelTls | None = None,
) -> None:
    """What serves where, and a command to try that works as printed (`tls`: how a client verifies it)."""
    host = config.listen.rsplit(":", 1)[0]
    security = "plaintext" if config.tls is None else "TLS"
    store = redacted(connections.database_url)
    print(f"{banner}: gRPC on {host}:{running.port} ({security}; store: {store}); Ctrl-C stops", flush=True)
    if running.executor_port is not None and config.executor_listen is not None:
        executors = f"{config.executor_listen.rsplit(':', 1)[0]}:{running.executor_port}"
        print(f"  executors: {executors} (mutual TLS; ExecutorControl is served there only)", flush=True)
    if (command := grpcurl_command(config, running.port, tls)) is not None:
        print(f"  try: {command}", flush=True)


async def run_executor(config: ExecutorConfig, handlers: HandlerRegistry | None = None) -> None:
    """`jobmesh executor`: a worker. SIGTERM or SIGINT drains it; a second signal stops running work now."""
    from jobmesh.executor.queue_reach import QueueUnreachable
    from jobmesh.executor.runtime import Executor
    from jobmesh.executor.server_health import ServerHealth

    print(f"jobmesh executor {config.executor_id}: server {config.server}, queues {', '.join(config.queues)}")
    if handlers:
        print(f"  handlers: {', '.join(handlers.names())}", flush=True)
    print(f"  executor {config.policy.describe()}", flush=True)
    hooks = run_hooks("executor")
    executor = Executor(config, handlers, hooks=hooks)
    print(f"  executor {executor.sandbox.describe()}", flush=True)
    signalled = False

    def on_signal() -> None:
        nonlocal signalled
        if signalled:
            log.warning("second signal: stopping running work now")
        executor.drain(grace=timedelta(0) if signalled else None)
        signalled = True

    _on_signals(on_signal)
    # Its server's health is asked only for an endpoint that serves the answer: an RPC a second per executor.
    server_health = ServerHealth(config) if config.health_listen else None
    checks = {"server": server_health.check} if server_health is not None else {}
    try:
        async with health_served(executor.readiness, checks, config.health_listen):
            await executor.run()
    except QueueUnreachable as error:
        raise Refused(error.message) from None
    finally:
        if server_health is not None:
            server_health.close()
        hooks.close()


async def _start_dashboard(
    config: DashboardConfig, server_host: str, server_port: int, upstream_tls: ChannelTls | None
) -> Envoy | None:
    if not config.dashboard:
        return None
    if upstream_tls is not None and upstream_tls.server_name is None and server_host.strip("[]") not in _ANY:
        upstream_tls = dataclasses.replace(upstream_tls, server_name=server_host.strip("[]"))
    envoy = Envoy(config, (ip_of(server_host), server_port), upstream_tls)
    envoy.start()
    await envoy.ready()
    return envoy


async def run_dev(
    connections: Connections,
    server_config: ServerConfig,
    watcher_config: WatcherConfig,
    executor_config: ExecutorConfig,
    *,
    handlers: HandlerRegistry | None = None,
    dashboard: DashboardConfig | None = None,
) -> None:
    """`jobmesh dev`: server, watcher and executor in one process, sharing in-process queue and signals, and
    Envoy in front for the dashboard (unless it is off)."""
    from jobmesh.executor.runtime import Executor
    from jobmesh.executor.sandbox import try_bubblewrap
    from jobmesh.processes.demo import DEMO_JOB_ID, create_demo_job
    from jobmesh.server.app import start_server
    from jobmesh.watcher.service import Watcher

    dashboard = dashboard or DashboardConfig(dashboard=False)
    ensure_addresses_free(server_config)
    server_config = journal_of_database(server_config, connections)
    if dashboard.dashboard:
        setting = BY_NAME["dashboard_listen"]
        ensure_free(dashboard.dashboard_listen, setting, "dashboard's", "or --dashboard off")
    try_bubblewrap(executor_config.isolation, executor_config.job_user)  # before gRPC's threads start
    hooks = run_hooks("dev")
    stop = stop_on_signals()
    readiness = Readiness("dev")  # one process: the server's, the watcher's and the executor's
    async with (
        _closing(hooks),
        adapters(connections) as (store, queue, signals),
        health_served(readiness, _dependencies(store, queue, signals), server_config.health_listen),
    ):
        running = await start_server(server_config, store, queue, signals, readiness, hooks=hooks)
        host = server_config.listen.rsplit(":", 1)[0]
        try:
            upstream_tls = (executor_config.tls or ChannelTls()) if server_config.tls is not None else None
            envoy = await _start_dashboard(dashboard, host, running.port, upstream_tls)
        except OSError:
            await running.stop()
            raise
        hidden = (*executor_config.hidden_files, *server_config.secret_files)
        executor = Executor(
            dataclasses.replace(executor_config, server=f"{host}:{running.port}", hidden_files=hidden),
            handlers,
            queue=queue,
            signals=signals,
            readiness=readiness,
            hooks=hooks,
        )
        watcher = Watcher(watcher_config, store, queue, signals, readiness=readiness, hooks=hooks)
        tasks = [asyncio.create_task(watcher.run(stop)), asyncio.create_task(executor.run())]
        _announce("jobmesh dev", server_config, connections, running, executor_config.tls)
        print(f"  executor {executor_config.policy.describe()}", flush=True)
        print(f"  executor {executor.sandbox.describe()}", flush=True)
        if envoy is not None:
            print(f"  dashboard: open {dashboard.url}  (Envoy: the app and the API, gRPC-Web)", flush=True)
        if dashboard.demo and await create_demo_job(
            f"{host}:{running.port}", executor_config.call_token, executor_config.tls
        ):
            print(f"  demo: this empty store got the job `{DEMO_JOB_ID}`, run every 10 s", flush=True)
        stopped = asyncio.create_task(stop.wait())
        done, _ = await asyncio.wait([stopped, *tasks], return_when=asyncio.FIRST_COMPLETED)
        stopped.cancel()
        failed = next((task for task in done if task is not stopped and task.exception() is not None), None)
        print("jobmesh dev: stopping", flush=True)
        if envoy is not None:
            envoy.stop()
        executor.drain(grace=min(DEV_DRAIN_GRACE, executor_config.drain_grace))
        stop.set()
        await asyncio.gather(*tasks, return_exceptions=True)
        await running.stop()
        if failed is not None:  # the watcher or the executor failed: the mesh is not whole, so it ends
            failed.result()
