"""An executor whose queue cannot be the mesh's stops at its first connection, saying why, instead of waiting
for runs that never come: its server says where the mesh queues them (`ExecutorWelcome.queue_kind`). One
whose queue can be the mesh's, or that is not told, takes runs as before; a refusal that is not about the
queue is tried again, as any other."""

from __future__ import annotations

import asyncio
import time
import uuid
from datetime import timedelta
from typing import Any

import grpc
import pytest

from jobmesh.adapters.queue.factory import open_queue
from jobmesh.control.v1 import executor_control_pb2 as pb
from jobmesh.core.ports.queue import RunQueue
from jobmesh.executor.config import ExecutorConfig
from jobmesh.executor.policy import ExecutionPolicy
from jobmesh.executor.queue_reach import QueueUnreachable
from jobmesh.executor.runtime import Executor
from jobmesh.v1 import run_pb2
from tests.executor.fake_control import FakeControl
from tests.executor.support import command, dispatched, key, running_executor
from tests.executor.test_out_of_contact import RecordingQueue
from tests.executor.test_runtime import scenario
from tests.support import BrokerQueue

SAYS_SO_WITHIN = 5.0  # seconds, from `run()` to the error: what the executor promises


def _executor(fake: FakeControl, queue: RunQueue) -> Executor:
    config = ExecutorConfig(
        server=fake.address,
        executor_id=f"reach-{uuid.uuid4().hex[:8]}",
        reconnect_max=timedelta(milliseconds=200),
        policy=ExecutionPolicy.unrestricted(),
    )
    return Executor(config, queue=queue)


def test_an_in_process_executor_told_the_mesh_is_on_kafka_stops_at_once() -> None:
    async def test(fake: FakeControl) -> None:
        fake.queue_kind = pb.QUEUE_KIND_KAFKA
        queue = RecordingQueue(open_queue(f"memory://reach-{uuid.uuid4().hex[:8]}"))
        executor = _executor(fake, queue)
        began = time.monotonic()
        with pytest.raises(QueueUnreachable, match="queues its runs on Kafka") as caught:
            await asyncio.wait_for(executor.run(), 60)
        assert time.monotonic() - began <= SAYS_SO_WITHIN
        assert "--queue-url kafka://HOST:PORT" in caught.value.message  # the fix
        assert caught.value.field == "queue_url"
        assert [hello.in_process_queue for hello in fake.hellos] == [queue.in_process_id]  # no retry
        assert queue.calls == []  # it never joined its queue's group

    scenario(test)


@pytest.mark.parametrize(
    ("said", "broker"),
    [
        (pb.QUEUE_KIND_KAFKA, True),
        (pb.QUEUE_KIND_IN_PROCESS, False),
        (pb.QUEUE_KIND_UNSPECIFIED, False),  # a server that does not say
    ],
)
def test_an_executor_whose_queue_can_be_the_meshs_takes_runs(said: Any, broker: bool) -> None:
    async def test(fake: FakeControl) -> None:
        fake.queue_kind = said
        memory = open_queue(f"memory://reach-{uuid.uuid4().hex[:8]}")
        queue = BrokerQueue(memory) if broker else RecordingQueue(memory)
        async with running_executor(fake, queue=queue) as rig:
            run = dispatched(command("echo", "taken"))
            rig.publish(run)
            await fake.wait_until(lambda: fake.results_for(key(run)))
            assert fake.results_for(key(run))[0].state == run_pb2.RUN_STATE_SUCCEEDED
        assert fake.hellos[0].in_process_queue == ("" if broker else memory.in_process_id)

    scenario(test)


def test_a_failed_precondition_that_is_not_about_the_queue_is_tried_again() -> None:
    async def test(fake: FakeControl) -> None:
        fake.refuse_with = grpc.StatusCode.FAILED_PRECONDITION  # no ErrorInfo: not QUEUE_UNREACHABLE
        queue = RecordingQueue(open_queue(f"memory://reach-{uuid.uuid4().hex[:8]}"))
        executor = _executor(fake, queue)
        running = asyncio.create_task(executor.run())
        try:
            await fake.wait_until(lambda: len(fake.hellos) >= 3 or running.done())
            assert not running.done()
            assert executor.stream.unreachable is None
        finally:
            executor.drain(grace=timedelta(0))
            await asyncio.wait_for(running, 15)

    scenario(test)
