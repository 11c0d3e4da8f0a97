"""The server tells each executor it welcomes where the mesh queues its runs (`ExecutorWelcome.queue_kind`);
on an in-process queue it welcomes only the executors of its own process, which name that queue in their
hello, and refuses any other with FAILED_PRECONDITION, reason QUEUE_UNREACHABLE and what to change, once
their credential has been checked (a caller that may not connect learns nothing of the queue)."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Iterator
from datetime import timedelta
from typing import Any

import grpc
import pytest

from jobmesh.adapters.queue.factory import open_queue
from jobmesh.adapters.signals.factory import open_signals
from jobmesh.control.v1 import executor_control_pb2 as pb
from jobmesh.control.v1 import executor_control_pb2_grpc
from jobmesh.core.ports.pipeline_store import SchedulerStore
from jobmesh.server.app import start_server
from jobmesh.server.config import ServerConfig
from jobmesh.server.executors.queue_reach import OUTSIDE_EXECUTORS_FIX
from tests.server.errors import error_info
from tests.server.secured import Secured, secured_server
from tests.server.test_executor_identity import RawStream
from tests.support import SUITE_LOOP_LAG, BrokerQueue


@pytest.fixture(scope="module")
def secured(store: SchedulerStore, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Secured]:
    with secured_server(store, tmp_path_factory.mktemp("reach")) as server:
        yield server


def _hello(secured: Secured, subject: str | None, in_process_queue: str) -> pb.ConnectResponse:
    """The first answer to a raw hello as `exec-1`, naming `in_process_queue`."""
    hello = pb.ExecutorHello(executor_id="exec-1", queues=["default"], in_process_queue=in_process_queue)
    metadata = (("authorization", f"Bearer {secured.token(subject)}"),) if subject else ()
    with grpc.insecure_channel(secured.address) as channel:
        stream = executor_control_pb2_grpc.ExecutorControlStub(channel).Connect(
            iter([pb.ConnectRequest(hello=hello)]), metadata=metadata, timeout=30
        )
        try:
            first: pb.ConnectResponse = next(stream)
            return first
        finally:
            stream.cancel()


def test_an_executor_of_the_servers_process_is_told_its_queue_is_in_process(secured: Secured) -> None:
    with grpc.insecure_channel(secured.address) as channel:
        stream = RawStream(channel, secured, secured.token("exec-1"), "exec-1", ("default",))
        try:
            welcome = stream.next("welcome").welcome
        finally:
            stream.close()
    assert welcome.queue_kind == pb.QUEUE_KIND_IN_PROCESS
    assert welcome.heartbeat_interval.ToTimedelta() > timedelta(0)
    assert welcome.server_id


@pytest.mark.parametrize("named", ["", "another-process-queue"])
def test_an_executor_outside_the_process_is_refused_with_the_fix(secured: Secured, named: str) -> None:
    with pytest.raises(grpc.RpcError) as caught:
        _hello(secured, "exec-1", named)
    error: Any = caught.value
    assert error.code() == grpc.StatusCode.FAILED_PRECONDITION
    assert error.details() == OUTSIDE_EXECUTORS_FIX
    info = error_info(error)
    assert (info.reason, dict(info.metadata)) == ("QUEUE_UNREACHABLE", {"queue_kind": "IN_PROCESS"})


@pytest.mark.parametrize(("subject", "code"), [("viewer", "PERMISSION_DENIED"), (None, "UNAUTHENTICATED")])
def test_the_credential_is_checked_before_the_queue(secured: Secured, subject: str | None, code: str) -> None:
    with pytest.raises(grpc.RpcError) as caught:
        _hello(secured, subject, "")
    assert caught.value.code().name == code


def test_a_server_on_a_broker_welcomes_any_executor_and_says_kafka(store: SchedulerStore) -> None:
    names = f"memory://reach-{uuid.uuid4().hex[:8]}"

    async def scenario() -> pb.ExecutorWelcome:
        queue: Any = BrokerQueue(open_queue(names))
        running = await start_server(
            ServerConfig(listen="127.0.0.1:0", max_loop_lag=SUITE_LOOP_LAG), store, queue, open_signals(names)
        )
        try:
            async with grpc.aio.insecure_channel(f"127.0.0.1:{running.port}") as channel:
                call = executor_control_pb2_grpc.ExecutorControlStub(channel).Connect()
                await call.write(pb.ConnectRequest(hello=pb.ExecutorHello(executor_id=f"anywhere-{names}")))
                first = await call.read()
                call.cancel()
        finally:
            await running.stop(grace=0)
        assert isinstance(first, pb.ConnectResponse)
        return first.welcome

    welcome = asyncio.run(scenario())
    assert welcome.queue_kind == pb.QUEUE_KIND_KAFKA
