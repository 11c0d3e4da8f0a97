"""A real gRPC server (in a background thread) over each store backend, and stubs to call it."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import grpc
import pytest

from jobmesh.adapters.queue.factory import open_queue
from jobmesh.adapters.signals.factory import open_signals
from jobmesh.adapters.store.factory import open_store
from jobmesh.core.ports.pipeline_store import SchedulerStore
from jobmesh.server.app import RunningServer, start_server
from jobmesh.server.config import ServerConfig
from jobmesh.v1 import job_service_pb2_grpc, search_service_pb2_grpc
from tests.support import fresh_postgres_database, require_service_url


class ServerThread:
    """Runs the asyncio gRPC server on its own loop so that tests can use the plain blocking client."""

    def __init__(
        self, store: SchedulerStore, queue_url: str = "memory://", signals_url: str = "memory://"
    ) -> None:
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True)
        self._thread.start()
        config = ServerConfig(listen="127.0.0.1:0")
        self.queue = open_queue(queue_url)
        self.signals = open_signals(signals_url)
        self._running: RunningServer = asyncio.run_coroutine_threadsafe(
            start_server(config, store, self.queue, self.signals), self._loop
        ).result(timeout=30)
        self.address = f"127.0.0.1:{self._running.port}"

    def stop(self) -> None:
        asyncio.run_coroutine_threadsafe(self._running.stop(grace=0), self._loop).result(timeout=30)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(timeout=30)
        self._loop.close()
        self.signals.close()
        self.queue.close()


@dataclass
class Api:
    jobs: job_service_pb2_grpc.JobServiceStub
    search: search_service_pb2_grpc.SearchServiceStub
    store: SchedulerStore
    address: str


@pytest.fixture(scope="module", params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def store_url(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    if request.param == "sqlite":
        path: Path = tmp_path_factory.mktemp("api") / "jobmesh.sqlite3"
        yield f"sqlite:///{path}"
        return
    with fresh_postgres_database(require_service_url("JOBMESH_DATABASE_URL")) as url:
        yield url


@pytest.fixture(scope="module")
def api(store_url: str) -> Iterator[Api]:
    store = open_store(store_url)
    server = ServerThread(store)
    channel = grpc.insecure_channel(server.address)
    try:
        yield Api(
            jobs=job_service_pb2_grpc.JobServiceStub(channel),
            search=search_service_pb2_grpc.SearchServiceStub(channel),
            store=store,
            address=server.address,
        )
    finally:
        channel.close()
        server.stop()
        store.close()
