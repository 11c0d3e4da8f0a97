"""Servicer tests: the server's services on a real gRPC server on a free port, over the in-process queue and
signals and a real store (SQLite, and PostgreSQL where it runs), called through blocking stubs.

The server comes from pytest-grpc's fixtures (`grpc_add_to_server`, `grpc_servicer`, `grpc_stub_cls`, and
the `grpc_server`, `grpc_channel` and `grpc_stub` they feed). Two of its fixtures are replaced here: its
server is a synchronous `grpc.server`, which cannot run `grpc.aio` servicers, so `_grpc_server` is a
`grpc.aio` server on an event loop of its own, shaped like the synchronous one; and its `grpc_addr` leaves
the probing socket open, so the free port is found with a socket that is closed at once.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
import uuid
from collections.abc import Callable, Coroutine, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import grpc
import pytest

from jobmesh.adapters.queue.factory import open_queue
from jobmesh.adapters.signals.factory import open_signals
from jobmesh.adapters.store.factory import open_store
from jobmesh.core.ports.pipeline_store import SchedulerStore
from jobmesh.server.app import Services, build_services, new_grpc_server
from jobmesh.server.config import ServerConfig
from jobmesh.v1 import job_service_pb2_grpc, search_service_pb2_grpc
from tests.acceptance.processes import free_port
from tests.support import SUITE_LOOP_LAG, fresh_postgres_database, require_service_url

T = TypeVar("T")


class AioServerThread:
    """A `grpc.aio` server on an event loop in a thread of its own, with the synchronous `grpc.Server` methods
    that pytest-grpc and the generated `add_*_to_server` functions call."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self.loop.run_forever, name="aio-server", daemon=True)
        self._thread.start()
        self._server: grpc.aio.Server = self.run(self._create())

    def run(self, coroutine: Coroutine[Any, Any, T]) -> T:
        return asyncio.run_coroutine_threadsafe(coroutine, self.loop).result(timeout=30)

    async def _create(self) -> grpc.aio.Server:
        return new_grpc_server()

    async def _stop(self, grace: float | None) -> None:
        """Stops the server, then the calls it cancelled (a stream's tasks) before the loop closes."""
        await self._server.stop(grace)
        others = [task for task in asyncio.all_tasks() if task is not asyncio.current_task()]
        for task in others:
            task.cancel()
        await asyncio.gather(*others, return_exceptions=True)

    def _on_loop(self, call: Callable[[], T]) -> T:
        async def call_there() -> T:
            return call()

        return self.run(call_there())

    def add_generic_rpc_handlers(self, handlers: Any) -> None:
        self._on_loop(lambda: self._server.add_generic_rpc_handlers(handlers))

    def add_registered_method_handlers(self, service: str, handlers: Any) -> None:
        self._on_loop(lambda: self._server.add_registered_method_handlers(service, handlers))

    def add_insecure_port(self, address: str) -> int:
        return self._on_loop(lambda: self._server.add_insecure_port(address))

    def start(self) -> None:
        self.run(self._server.start())

    def stop(self, grace: float | None) -> None:
        self.run(self._stop(grace))
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join(timeout=30)
        self.loop.close()


@dataclass
class Api:
    jobs: job_service_pb2_grpc.JobServiceStub
    search: search_service_pb2_grpc.SearchServiceStub
    store: SchedulerStore
    address: str


@contextlib.contextmanager
def new_store(kind: str, folder: Path) -> Iterator[SchedulerStore]:
    """An empty store: SQLite in `folder` (`kind` "sqlite"), or a fresh PostgreSQL database."""
    if kind == "sqlite":
        url_of: contextlib.AbstractContextManager[str] = contextlib.nullcontext(
            f"sqlite:///{folder / 'jobmesh.sqlite3'}"
        )
    else:
        url_of = fresh_postgres_database(require_service_url("JOBMESH_DATABASE_URL"))
    with url_of as url:
        store = open_store(url)
        try:
            yield store
        finally:
            store.close()


@pytest.fixture(scope="module", params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def store(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[SchedulerStore]:
    with new_store(request.param, tmp_path_factory.mktemp("api")) as store:
        yield store


# Both take the store so that each store backend gets a server of its own: pytest-grpc's `grpc_server`, which
# depends on the store through `grpc_servicer`, stops the server when the module moves to the next backend.
@pytest.fixture(scope="module")
def grpc_addr(store: SchedulerStore) -> str:
    return f"127.0.0.1:{free_port()}"


@pytest.fixture(scope="module")
def _grpc_server(store: SchedulerStore) -> AioServerThread:
    return AioServerThread()  # pytest-grpc's `grpc_server` starts and stops it


@pytest.fixture(scope="module")
def server_config() -> ServerConfig:
    """The servers' config; a module overrides it to test a limit."""
    return ServerConfig(listen="127.0.0.1:0", max_loop_lag=SUITE_LOOP_LAG)


@pytest.fixture(scope="module")
def grpc_servicer(store: SchedulerStore, server_config: ServerConfig) -> Iterator[Services]:
    name = f"memory://servicers-{uuid.uuid4().hex[:8]}"
    queue, signals = open_queue(name), open_signals(name)
    services = build_services(server_config, store, queue, signals)
    yield services
    services.close()
    signals.close()
    queue.close()


@pytest.fixture(scope="module")
def grpc_add_to_server() -> Callable[[Services, Any], None]:
    return lambda services, server: services.add_to(server)


@pytest.fixture(scope="module")
def grpc_stub_cls() -> type[job_service_pb2_grpc.JobServiceStub]:
    return job_service_pb2_grpc.JobServiceStub


@pytest.fixture(scope="module")
def api(  # noqa: PLR0917 - pytest passes fixtures by name
    grpc_stub: job_service_pb2_grpc.JobServiceStub,
    grpc_channel: grpc.Channel,
    grpc_server: AioServerThread,
    grpc_servicer: Services,
    grpc_addr: str,
    store: SchedulerStore,
) -> Api:
    grpc_server.run(grpc_servicer.serving())
    return Api(grpc_stub, search_service_pb2_grpc.SearchServiceStub(grpc_channel), store, grpc_addr)
