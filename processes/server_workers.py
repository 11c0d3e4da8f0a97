"""`jobmesh server --workers N`: N server processes on one address, so that every core of a host serves.

Each worker is a whole server (its own connections, executor sessions and live feed), and the kernel spreads
incoming connections over them (gRPC binds its ports with SO_REUSEPORT). Each serves TLS itself when it is on,
following the certificate files on its own. Executor streams, cancels and
heartbeats already cross servers through the signal bus and the database, so the workers share nothing
else (their metrics are gathered in a folder the parent gives them: `processes.metrics_exposition`). The
parent only supervises: it passes SIGTERM and SIGINT on, starts a worker again when one dies, and
its workers die with it (PR_SET_PDEATHSIG), whatever signal kills it.

The parent names each worker (its server id), so that when one dies it releases the executor names the
worker held in the store at once: the executors whose streams it held connect to another worker straight
away, instead of being refused as connected elsewhere until those names lapse (a quiet limit, ~9 s).
"""

from __future__ import annotations

import asyncio
import ctypes
import dataclasses
import logging
import multiprocessing
import multiprocessing.connection
import os
import signal
import socket
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from multiprocessing.context import SpawnProcess
from multiprocessing.synchronize import Event
from typing import TYPE_CHECKING

from jobmesh.core.errors import JobmeshError
from jobmesh.processes.config_builders import Connections
from jobmesh.processes.logs import LogSettings, configure_logging, current_log_settings
from jobmesh.processes.metrics_exposition import SharedMetrics
from jobmesh.processes.ports import ensure_addresses_free
from jobmesh.server.config import ServerConfig, new_server_id

if TYPE_CHECKING:
    from jobmesh.adapters.store.sql import SqlStore
    from jobmesh.core.ports.pipeline_store import PipelineStore

log = logging.getLogger(__name__)
PR_SET_PDEATHSIG = 1
READY_TIMEOUT = 120.0  # seconds a worker may take to serve (migrations, a slow database)
STOP_TIMEOUT = 30.0  # seconds the workers have to stop after SIGTERM before they are killed
RESTART_DELAY = 1.0  # seconds before a dead worker is started again
SUPERVISE_POLL = 0.2  # seconds between looks for a signal (a worker's death wakes the parent at once)
_spawn = multiprocessing.get_context("spawn")  # never fork a process that holds gRPC's threads


def run_server_workers(connections: Connections, config: ServerConfig, count: int) -> int:
    """Runs `count` workers until SIGTERM or SIGINT; the exit status."""
    stopping: list[int] = []
    for signum in (signal.SIGTERM, signal.SIGINT):
        signal.signal(signum, lambda received, _: stopping.append(received))
    ensure_addresses_free(config)
    reserved, address = _reserve(config.listen)
    held = [reserved]
    shared = dataclasses.replace(config, listen=address, share_port=True)
    if config.executor_listen is not None:
        reserved_executors, executor_address = _reserve(config.executor_listen)
        held.append(reserved_executors)
        shared = dataclasses.replace(shared, executor_listen=executor_address)
    metrics = SharedMetrics()  # before the first worker starts: each imports the metrics in multiprocess mode
    workers = _Workers(connections, shared, metrics)
    try:
        if not workers.start(count, stopping):
            return 1
        for socket_ in held:
            socket_.close()  # the workers hold the ports now
        tls = "TLS" if config.tls is not None else "plaintext"
        executors_line = (
            f", executors (mutual TLS) on {shared.executor_listen}" if shared.executor_listen else ""
        )
        print(
            f"jobmesh server: {count} workers serving gRPC ({tls}) on {address}{executors_line}", flush=True
        )
        workers.open_sessions()
        return workers.supervise(stopping)
    finally:
        for socket_ in held:
            socket_.close()
        workers.stop()
        metrics.close()


def _reserve(listen: str) -> tuple[socket.socket, str]:
    """A socket bound (not listening) to `listen` with SO_REUSEPORT, so that port 0 becomes one port that
    every worker binds, and no other program takes it meanwhile."""
    host, port = listen.rsplit(":", 1)
    bare = host.strip("[]")
    family = socket.AF_INET6 if ":" in bare else socket.AF_INET
    reserved = socket.socket(family, socket.SOCK_STREAM)
    reserved.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
    reserved.bind((bare or "0.0.0.0", int(port)))
    return reserved, f"{host}:{reserved.getsockname()[1]}"


@dataclass
class _ServerWorker:
    process: SpawnProcess
    ready: Event
    server_id: str  # the name under which it holds its executors' sessions in the store
    released: bool = False  # dead, and the release of those sessions is under way or done


class _Workers:
    def __init__(self, connections: Connections, config: ServerConfig, metrics: SharedMetrics) -> None:
        self._connections = connections
        self._metrics = metrics
        self._config = config
        self._running: list[_ServerWorker] = []
        self._sessions: SqlStore | None = None

    def start(self, count: int, stopping: list[int]) -> bool:
        """Starts them all; False when one dies before serving or a signal comes first."""
        self._running = [self._started() for _ in range(count)]

        def serving() -> bool:
            return all(worker.ready.is_set() for worker in self._running)

        _until(lambda: serving() or bool(stopping) or any(not w.process.is_alive() for w in self._running))
        if stopping:
            return False
        if dead := [worker.process for worker in self._running if not worker.process.is_alive()]:
            log.error("a server worker exited (%s) before it served: see its error above", dead[0].exitcode)
            return False
        if not serving():
            log.error("the server workers did not all serve within %.0f s: stopping", READY_TIMEOUT)
            return False
        return True

    def open_sessions(self) -> None:
        """Opens the store in which the workers hold their executors' names, once they all serve. Opening it
        costs a tenth of a second of CPU (the store's modules; no connection before a worker dies): paid
        now, not while a dead worker's executors are refused, nor while the workers start beside it."""
        from jobmesh.adapters.store.factory import open_store

        self._sessions = open_store(
            self._connections.database_url, migrate=False, retention_days=self._connections.retention.days
        )

    def supervise(self, stopping: list[int]) -> int:
        """Until a signal: a worker that dies has its executors' names released, and is started again,
        unless it dies again before serving."""
        while not stopping:
            self._release_dead()
            for index, worker in enumerate(self._running):
                # Once a signal came, a worker that exits was stopped by it too: not started again.
                if not stopping and not worker.process.is_alive() and not self._restart(index, stopping):
                    return 1
            sentinels = [worker.process.sentinel for worker in self._running]
            multiprocessing.connection.wait(sentinels, timeout=SUPERVISE_POLL)
        return 0

    def _release_dead(self) -> None:
        """Releases the executor names of the workers that died (each once), each on a thread of its own: an
        unreachable database may hold a connection attempt for minutes, and the supervision goes on."""
        if self._sessions is None:
            return
        for worker in self._running:
            if not worker.released and not worker.process.is_alive():
                worker.released = True
                threading.Thread(
                    target=release_names_of,
                    args=(self._sessions, worker.server_id),
                    name="jobmesh-release-names",
                    daemon=True,
                ).start()

    def _restart(self, index: int, stopping: list[int]) -> bool:
        # Released here too, before the record of the dead worker is replaced: the supervision's own release
        # may have seen it still alive (its sentinel fires when its files close, a moment before the kernel
        # lets it be reaped), and then its executors waited out the quiet limit.
        self._release_dead()
        dead = self._running[index].process
        if dead.pid is not None:
            self._metrics.worker_died(dead.pid)
        log.warning("server worker %s exited (%s): starting it again", dead.pid, dead.exitcode)
        time.sleep(RESTART_DELAY)
        if stopping:
            return True  # a signal came meanwhile: the supervision ends, and no worker is started
        worker = self._running[index] = self._started()

        def settled() -> bool:
            self._release_dead()  # another worker that dies meanwhile does not wait for this one
            return worker.ready.is_set() or not worker.process.is_alive()

        if _until(settled) and worker.process.is_alive():
            return True
        log.error("the new server worker did not come to serve: stopping")
        return False

    def stop(self) -> None:
        for worker in self._running:
            if worker.process.is_alive() and worker.process.pid is not None:
                os.kill(worker.process.pid, signal.SIGTERM)
        deadline = time.monotonic() + STOP_TIMEOUT
        for worker in self._running:
            worker.process.join(max(deadline - time.monotonic(), 0.0))
            if worker.process.is_alive():
                worker.process.kill()
                worker.process.join()
        if self._sessions is not None:
            self._sessions.close()

    def _started(self) -> _ServerWorker:
        ready = _spawn.Event()
        config = dataclasses.replace(self._config, server_id=new_server_id())
        process = _spawn.Process(
            target=_worker,
            args=(self._connections, config, os.getpid(), ready, current_log_settings()),
            daemon=False,
        )
        process.start()
        log.info("server worker %s started as %s", process.pid, config.server_id)
        return _ServerWorker(process, ready, config.server_id)


def release_names_of(sessions: PipelineStore, server_id: str) -> None:
    """The executor names that the dead worker `server_id` held are free for any worker now. When the store
    cannot be reached one line says so, and the names lapse a quiet limit later as they would have."""
    try:
        released = sessions.release_server_sessions(server_id)
    except JobmeshError as error:
        log.warning(
            "executor names of dead server worker %s not released (free a quiet limit later): %s",
            server_id,
            error,
        )
        return
    if released:
        log.info("executors %s of dead server worker %s released", sorted(released), server_id)


def _until(done: Callable[[], bool], timeout: float = READY_TIMEOUT) -> bool:
    deadline = time.monotonic() + timeout
    while not done():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)
    return True


def _worker(
    connections: Connections, config: ServerConfig, parent: int, ready: Event, log_settings: LogSettings
) -> None:
    """One worker: a whole server, stopped by SIGTERM or SIGINT, killed with its parent; it logs as its
    parent was told to."""
    ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    if os.getppid() != parent:  # the parent died before the line above
        sys.exit(1)
    # Here, not at the top: the supervising parent serves nothing, and the server side is most of what a
    # process imports (about a second of CPU).
    from jobmesh.processes import assembly

    configure_logging("server", worker=config.server_id, settings=log_settings)
    asyncio.run(assembly.run_server(connections, config, ready=ready.set))
