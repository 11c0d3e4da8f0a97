"""One cancel, once: with a held attempt, a cancel puts one cancel message on its executor's stream, whichever
routes bring it to the server holding that stream (the call itself, the change feed, the signal bus), and
heartbeat answers send it again only while the executor has not acknowledged it. The cancel key that an
executor whose stream is down polls is left as well. SQLite and PostgreSQL."""

from __future__ import annotations

import contextlib
import queue
import threading
import time
from collections.abc import Iterator
from datetime import timedelta

import grpc
import pytest

from jobmesh.adapters.signals.factory import open_signals
from jobmesh.control.v1 import executor_control_pb2 as pb
from jobmesh.core.attempts import AttemptRef
from jobmesh.core.ports.pipeline_store import SchedulerStore
from jobmesh.v1 import job_service_pb2, job_service_pb2_grpc, run_pb2
from tests.server.secured import Secured, secured_server
from tests.server.test_executor_identity import RawStream, claimed, get_run, new_run
from tests.server.tokens import bearer

INTERVAL = timedelta(milliseconds=400)  # the server's heartbeat interval: the resend interval too


class Executor:
    """A hand-driven executor: holds one attempt, heartbeats every interval, and counts the cancels its
    stream brings; it acknowledges them in its next heartbeat batch unless told to drop them."""

    def __init__(self, stream: RawStream) -> None:
        self.stream = stream
        self.cancels: queue.Queue[list[pb.AttemptRef]] = queue.Queue()
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._unacknowledged: list[pb.AttemptRef] = []

    def start(self) -> None:
        self._reader.start()

    def _read(self) -> None:
        with contextlib.suppress(grpc.RpcError):  # the stream's end at the test's
            for response in self.stream.responses():
                if response.WhichOneof("message") == "cancels":
                    self.cancels.put(list(response.cancels.attempts))

    def beat(self, held: pb.AttemptRef, acknowledged: list[pb.AttemptRef]) -> None:
        self.stream.send(heartbeats=pb.HeartbeatBatch(attempts=[held], cancels_received=acknowledged))

    def cancels_within(
        self, seconds: float, held: pb.AttemptRef, *, acknowledge: bool
    ) -> list[pb.AttemptRef]:
        """The cancels received while heartbeating for `seconds`; each acknowledged by the next beat (of
        this call or the next) when `acknowledge`, else dropped."""
        received: list[pb.AttemptRef] = []
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            self.beat(held, self._unacknowledged if acknowledge else [])
            self._unacknowledged = []
            beat_due = time.monotonic() + INTERVAL.total_seconds()
            while (left := beat_due - time.monotonic()) > 0:
                try:
                    attempts = self.cancels.get(timeout=left)
                except queue.Empty:
                    break
                received += attempts
                self._unacknowledged += attempts
        return received


@pytest.fixture(scope="module")
def server(store: SchedulerStore, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Secured]:
    with secured_server(
        store, tmp_path_factory.mktemp("cancel-once"), heartbeat_interval=INTERVAL
    ) as secured:
        yield secured


@pytest.fixture
def channel(server: Secured) -> Iterator[grpc.Channel]:
    with grpc.insecure_channel(server.address) as channel:
        yield channel


@pytest.fixture
def executor(channel: grpc.Channel, server: Secured) -> Iterator[Executor]:
    name = "exec-1"
    stream = RawStream(channel, server, server.token(name), name, ("default",))
    stream.next("welcome")
    held = Executor(stream)
    yield held
    stream.close()


def _held_and_cancelled(channel: grpc.Channel, server: Secured, executor: Executor) -> pb.AttemptRef:
    ref = new_run(channel, server)
    assert claimed(executor.stream, ref) == pb.CLAIM_OUTCOME_GRANTED
    executor.start()
    jobs = job_service_pb2_grpc.JobServiceStub(channel)
    answer = jobs.CancelRun(
        job_service_pb2.CancelRunRequest(name=ref.run, reason="stop it"),
        metadata=bearer(server.token("admin")),
    )
    assert answer.run.state == run_pb2.RUN_STATE_CANCELLING
    return ref


def test_one_cancel_of_a_held_attempt_puts_one_cancel_on_its_stream(
    channel: grpc.Channel, server: Secured, executor: Executor
) -> None:
    ref = _held_and_cancelled(channel, server, executor)
    # Long enough for the change feed to see the run CANCELLING and for several heartbeat answers.
    received = executor.cancels_within(8 * INTERVAL.total_seconds(), ref, acknowledge=True)
    assert received == [ref]
    assert get_run(channel, server, ref).state == run_pb2.RUN_STATE_CANCELLING  # still being stopped
    # An executor whose stream is down finds it on the signal bus.
    signals = open_signals(server.names)
    try:
        assert signals.cancelled([AttemptRef.from_proto(ref)]) == {AttemptRef.from_proto(ref)}
    finally:
        signals.close()


def test_a_cancel_not_acknowledged_is_sent_again_until_it_is(
    channel: grpc.Channel, server: Secured, executor: Executor
) -> None:
    ref = _held_and_cancelled(channel, server, executor)
    # The executor drops what it gets: each heartbeat interval or so, the cancel comes again.
    dropped = executor.cancels_within(6 * INTERVAL.total_seconds(), ref, acknowledge=False)
    assert dropped.count(ref) >= 2
    assert len(dropped) <= 7  # again with a heartbeat answer an interval later, not with every one
    # Acknowledged at last: one more may be on its way, then none.
    executor.cancels_within(2 * INTERVAL.total_seconds(), ref, acknowledge=True)
    assert executor.cancels_within(6 * INTERVAL.total_seconds(), ref, acknowledge=True) == []
