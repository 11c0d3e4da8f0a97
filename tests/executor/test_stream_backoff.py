"""The control stream's reconnection delay: it doubles up to its cap however long the server stays away
(the count of failures once made it overflow `timedelta`, and the executor died a minute or so into an
outage)."""

from __future__ import annotations

import asyncio
from datetime import timedelta

from jobmesh.control.v1 import executor_control_pb2 as pb
from jobmesh.executor.config import ExecutorConfig
from jobmesh.executor.stream import ControlStream, StreamListener

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
