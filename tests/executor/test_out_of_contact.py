"""An executor takes runs only while the server accepts its stream: one that the server refuses never joins
its queue's group (it would hold partitions whose runs it cannot claim), and one that loses contact for a
while steps aside from the group until its stream is back."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import grpc
import pytest

from jobmesh.adapters.queue.factory import open_queue
from jobmesh.core.ports.queue import RunConsumer, RunQueue
from jobmesh.executor import runtime
from jobmesh.v1 import run_pb2
from tests.executor.fake_control import FakeControl
from tests.executor.support import command, dispatched, key, running_executor
from tests.executor.test_runtime import scenario


class RecordingQueue:
    """A queue that records what its consumers are asked: `joined` per `consumer()`, then their calls."""

    def __init__(self, queue: RunQueue) -> None:
        self._queue = queue
        self.calls: list[str] = []

    def __getattr__(self, name: str) -> Any:
        return getattr(self._queue, name)

    def consumer(self, group: str, queues: Sequence[str], *, member: str = "") -> RunConsumer:
        self.calls.append("joined")
        return _RecordingConsumer(self._queue.consumer(group, queues, member=member), self.calls)


class _RecordingConsumer:
    def __init__(self, consumer: RunConsumer, calls: list[str]) -> None:
        self._consumer = consumer
        self._calls = calls

    def __getattr__(self, name: str) -> Any:
        attribute = getattr(self._consumer, name)
        if name in {"step_aside", "rejoin", "close"}:
            self._calls.append(name)
        return attribute


@pytest.mark.parametrize(
    "code",
    [grpc.StatusCode.PERMISSION_DENIED, grpc.StatusCode.UNAUTHENTICATED, grpc.StatusCode.ALREADY_EXISTS],
)
def test_a_refused_executor_never_joins_its_group_and_joins_once_accepted(code: grpc.StatusCode) -> None:
    async def test(fake: FakeControl) -> None:
        fake.refuse_with = code
        queue = RecordingQueue(open_queue(f"memory://refused-{code.name.lower()}"))
        async with running_executor(fake, queue=queue, connected=False) as rig:
            await fake.wait_until(lambda: len(fake.hellos) >= 3)  # refused, and trying again
            run = dispatched(command("echo", "accepted"))
            rig.publish(run)
            assert queue.calls == []
            assert fake.claims == []
            fake.refuse_with = None
            await fake.wait_until(lambda: fake.results_for(key(run)))
            assert fake.results_for(key(run))[0].state == run_pb2.RUN_STATE_SUCCEEDED
            assert queue.calls == ["joined"]
        assert queue.calls == ["joined", "close"]

    scenario(test)


def test_out_of_contact_for_a_while_the_executor_steps_aside_until_its_stream_is_back(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(runtime, "STEP_ASIDE_OUT_OF_CONTACT", 0.5)

    async def test(fake: FakeControl) -> None:
        queue = RecordingQueue(open_queue("memory://out-of-contact"))
        async with running_executor(fake, queue=queue) as rig:
            await fake.wait_until(lambda: queue.calls == ["joined"])
            await fake.stop()
            fake.refuse_with = grpc.StatusCode.PERMISSION_DENIED  # a revoked credential, say
            await fake.start()
            await fake.wait_until(lambda: "step_aside" in queue.calls)
            hellos = len(fake.hellos)
            await fake.wait_until(lambda: len(fake.hellos) > hellos)  # still trying
            assert queue.calls == ["joined", "step_aside"]
            fake.refuse_with = None
            await fake.wait_until(lambda: "rejoin" in queue.calls)
            run = dispatched(command("echo", "back"))
            rig.publish(run)
            await fake.wait_until(lambda: fake.results_for(key(run)))
            assert queue.calls == ["joined", "step_aside", "rejoin"]

    scenario(test)


def test_a_short_reconnection_keeps_the_executor_in_its_group() -> None:
    async def test(fake: FakeControl) -> None:
        queue = RecordingQueue(open_queue("memory://short-reconnection"))
        async with running_executor(fake, queue=queue) as rig:
            await fake.wait_until(lambda: queue.calls == ["joined"])
            await fake.stop()
            await fake.wait_until(lambda: not rig.executor.stream.connected)
            await fake.start()
            await fake.wait_until(lambda: rig.executor.stream.connected)
            run = dispatched(command("echo", "still here"))
            rig.publish(run)
            await fake.wait_until(lambda: fake.results_for(key(run)))
            assert queue.calls == ["joined"]

    scenario(test)
