"""`jobmesh server --workers N`: N server processes on one address, so that every core of a host serves.

Each worker is a whole server (its own connections, executor sessions and live feed), and the kernel spreads
incoming connections over them (gRPC binds its ports with SO_REUSEPORT). Each serves TLS itself when it is on,
following the certificate files on its own. Executor streams, cancels and
heartbeats already cross servers through the signal bus and the database, so the workers share nothing
else. The parent only supervises: it passes SIGTERM and SIGINT on, starts a worker again when one dies, and
its workers die with it (PR_SET_PDEATHSIG), whatever signal kills it.
"""

from __future__ import annotations

import asyncio
import ctypes
import dataclasses
import logging
import multiprocessing
import os
import signal
import socket
import sys
import time
from collections.abc import Callable
from multiprocessing.context import SpawnProcess
from multiprocessing.synchronize import Event

from jobmesh.processes.logs import configure_logging
from jobmesh.processes.ports import ensure_addresses_free
from jobmesh.processes.settings import Connections
from jobmesh.server.config import ServerConfig

log = logging.getLogger(__name__)
PR_SET_PDEATHSIG = 1
READY_TIMEOUT = 120.0  # seconds a worker may take to serve (migrations, a slow database)
STOP_TIMEOUT = 30.0  # seconds the workers have to stop after SIGTERM before they are killed
RESTART_DELAY = 1.0  # seconds before a dead worker is started again
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
    workers = _Workers(connections, shared)
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
        return workers.supervise(stopping)
    finally:
        for socket_ in held:
            socket_.close()
        workers.stop()


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


class _Workers:
    def __init__(self, connections: Connections, config: ServerConfig) -> None:
        self._connections = connections
        self._config = config
        self._running: list[tuple[SpawnProcess, Event]] = []

    def start(self, count: int, stopping: list[int]) -> bool:
        """Starts them all; False when one dies before serving or a signal comes first."""
        self._running = [self._started() for _ in range(count)]

        def serving() -> bool:
            return all(ready.is_set() for _, ready in self._running)

        _until(lambda: serving() or bool(stopping) or any(not p.is_alive() for p, _ in self._running))
        if stopping:
            return False
        if dead := [process for process, _ in self._running if not process.is_alive()]:
            log.error("a server worker exited (%s) before it served: see its error above", dead[0].exitcode)
            return False
        if not serving():
            log.error("the server workers did not all serve within %.0f s: stopping", READY_TIMEOUT)
            return False
        return True

    def supervise(self, stopping: list[int]) -> int:
        """Until a signal: a worker that dies is started again, unless it dies again before serving."""
        while not stopping:
            for index, (process, _) in enumerate(self._running):
                if not process.is_alive() and not self._restart(index):
                    return 1
            time.sleep(0.2)
        return 0

    def _restart(self, index: int) -> bool:
        dead, _ = self._running[index]
        log.warning("server worker %s exited (%s): starting it again", dead.pid, dead.exitcode)
        time.sleep(RESTART_DELAY)
        process, ready = self._running[index] = self._started()
        if _until(lambda: ready.is_set() or not process.is_alive()) and process.is_alive():
            return True
        log.error("the new server worker did not come to serve: stopping")
        return False

    def stop(self) -> None:
        for process, _ in self._running:
            if process.is_alive() and process.pid is not None:
                os.kill(process.pid, signal.SIGTERM)
        deadline = time.monotonic() + STOP_TIMEOUT
        for process, _ in self._running:
            process.join(max(deadline - time.monotonic(), 0.0))
            if process.is_alive():
                process.kill()
                process.join()

    def _started(self) -> tuple[SpawnProcess, Event]:
        ready = _spawn.Event()
        process = _spawn.Process(
            target=_worker, args=(self._connections, self._config, os.getpid(), ready), daemon=False
        )
        process.start()
        return process, ready


def _until(done: Callable[[], bool], timeout: float = READY_TIMEOUT) -> bool:
    deadline = time.monotonic() + timeout
    while not done():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)
    return True


def _worker(connections: Connections, config: ServerConfig, parent: int, ready: Event) -> None:
    """One worker: a whole server, stopped by SIGTERM or SIGINT, killed with its parent."""
    ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    if os.getppid() != parent:  # the parent died before the line above
        sys.exit(1)
    # Here, not at the top: the supervising parent serves nothing, and the server side is most of what a
    # process imports (about a second of CPU).
    from jobmesh.processes import assembly

    configure_logging()
    asyncio.run(assembly.run_server(connections, config, ready=ready.set))
