"""The control stream's reconnection delay: it doubles up to its cap however long the server stays away
(the count of failures once made it overflow `timedelta`, and the executor died a minute or so into an
outage), and a welcome alone does not reset it: a server whose database is down welcomes a stream and ends
it at once, and executors reconnected ten times a second."""

from __future__ import annotations

import asyncio
import time
from datetime import timedelta

import grpc

from jobmesh.control.v1 import executor_control_pb2 as pb
from jobmesh.executor.config import ExecutorConfig
from jobmesh.executor.stream import ControlStream, StreamListener
from tests.executor.fake_control import FakeControl

FAILURES = 120  # 2 ** 119 tenths of a millisecond is far past what a timedelta holds


class NeverWelcomed(ControlStream):
    """Every session fails at once, as against a server that is down or refuses the executor."""

    def __init__(self, config: ExecutorConfig, listener: StreamListener) -> None:
        super().__init__(config, listener)
        self.sessions = 0

    async def _session(self) -> bool:
        self.sessions += 1
        if self.sessions == FAILURES:
            self.close()
        return False


class Silent:
    def hello(self) -> pb.ExecutorHello:
        return pb.ExecutorHello()

    def connected(self, welcome: pb.ExecutorWelcome) -> None: ...

    def disconnected(self, unsent: list[pb.ConnectRequest]) -> None: ...

    def acks(self, acks: pb.AckBatch) -> None: ...

    def heartbeat_answer(self, answer: pb.HeartbeatAnswer) -> None: ...

    def cancels(self, cancels: pb.CancelBatch) -> None: ...


def test_the_delay_stays_at_its_cap_through_any_number_of_failures() -> None:
    config = ExecutorConfig(
        reconnect_min=timedelta(microseconds=100), reconnect_max=timedelta(microseconds=200)
    )
    stream = NeverWelcomed(config, Silent())
    asyncio.run(asyncio.wait_for(stream.run(), 60))
    assert stream.sessions == FAILURES


QUICK = ExecutorConfig(reconnect_min=timedelta(milliseconds=20), reconnect_max=timedelta(milliseconds=400))
WATCHED = 3.0  # seconds


async def _streaming(fake: FakeControl, seconds: float) -> None:
    stream = ControlStream(_against(fake), Silent())
    running = asyncio.create_task(stream.run())
    try:
        await asyncio.sleep(seconds)
    finally:
        stream.close()
        await asyncio.wait_for(running, 10)


def _against(fake: FakeControl) -> ExecutorConfig:
    return ExecutorConfig(
        server=fake.address, reconnect_min=QUICK.reconnect_min, reconnect_max=QUICK.reconnect_max
    )


def test_a_stream_ended_right_after_its_welcome_backs_off_like_any_failure() -> None:
    async def scenario() -> int:
        fake = FakeControl()
        fake.end_after_welcome = grpc.StatusCode.UNAVAILABLE
        await fake.start()
        try:
            await _streaming(fake, WATCHED)
        finally:
            await fake.stop()
        return len(fake.hellos)

    hellos = asyncio.run(scenario())
    # Doubling from 20 ms to 400 ms, jittered by half: about 15 in 3 s. Reset by each welcome, the delay
    # stayed at 10-20 ms: over a hundred.
    assert 4 <= hellos <= 30


def test_a_stream_that_lasted_reconnects_at_the_shortest_delay() -> None:
    async def scenario() -> float:
        fake = FakeControl()
        await fake.start()
        stream = ControlStream(_against(fake), Silent())
        running = asyncio.create_task(stream.run())
        try:
            await fake.wait_until(lambda: len(fake.hellos) == 1)
            await asyncio.sleep(QUICK.reconnect_max.total_seconds() * 1.5)  # established
            await fake.stop()
            await fake.start()
            restarted = time.monotonic()
            await fake.wait_until(lambda: len(fake.hellos) == 2)
            return time.monotonic() - restarted
        finally:
            stream.close()
            await asyncio.wait_for(running, 10)
            await fake.stop()

    # At the cap it would be 200-400 ms, and more while the server was away.
    assert asyncio.run(scenario()) < QUICK.reconnect_max.total_seconds() / 2
