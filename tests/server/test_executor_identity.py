"""Executors are identities, not names: the attacks of an unauthenticated mesh, each repeated against a
server with authentication on (SQLite and PostgreSQL), each now refused.

- a fake executor: a credential without an executor grant, or another executor's name;
- an executor-name takeover: a second connection under a live executor's name;
- claiming the runs of a queue, or of a namespace, the credential does not serve;
- forged reports (log lines, a result) for an attempt the executor does not hold;
- a result with a start time an hour in the past: clamped to the claim, and flagged on the run.
"""

from __future__ import annotations

import asyncio
import queue
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, cast

import grpc
import pytest
from sqlalchemy import select

from jobmesh.adapters.store.schema import executor_sessions
from jobmesh.adapters.store.sql import SqlStore
from jobmesh.adapters.store.sql_leases import RELEASED
from jobmesh.control.v1 import executor_control_pb2 as pb
from jobmesh.control.v1 import executor_control_pb2_grpc
from jobmesh.core.ports.pipeline_store import SchedulerStore
from jobmesh.core.timestamps import to_datetime, to_timestamp
from jobmesh.executor.config import ExecutorConfig
from jobmesh.executor.handlers import HandlerRegistry
from jobmesh.executor.runtime import Executor
from jobmesh.server.executors.sessions import EXECUTOR_NAME_IN_USE
from jobmesh.v1 import (
    job_pb2,
    job_service_pb2,
    job_service_pb2_grpc,
    run_pb2,
    search_service_pb2,
    search_service_pb2_grpc,
)
from tests.server.conftest import new_store
from tests.server.errors import error_info
from tests.server.secured import Secured, secured_server
from tests.server.tokens import bearer
from tests.support import eventually


class RawStream:
    """An ExecutorControl stream driven message by message, as a hand-written client (or an attacker) in the
    server's process: its hello names the server's in-process queue."""

    def __init__(
        self,
        channel: grpc.Channel,
        server: Secured,
        token: str | None,
        name: str,
        queues: tuple[str, ...],
        *,
        running: tuple[pb.AttemptRef, ...] = (),
    ) -> None:
        self.name = name
        self._requests: queue.Queue[pb.ConnectRequest | None] = queue.Queue()
        hello = pb.ExecutorHello(
            executor_id=name, queues=queues, running=running, in_process_queue=server.in_process_queue
        )
        self._requests.put(pb.ConnectRequest(hello=hello))
        stub = executor_control_pb2_grpc.ExecutorControlStub(channel)
        metadata = bearer(token) if token else ()
        self._responses = stub.Connect(iter(self._requests.get, None), metadata=metadata, timeout=60)

    def send(self, **message: Any) -> None:
        self._requests.put(pb.ConnectRequest(**message))

    def next(self, kind: str) -> pb.ConnectResponse:
        """The next response of `kind` (others, such as heartbeat answers, are passed over)."""
        for response in self._responses:
            if response.WhichOneof("message") == kind:
                return response
        raise AssertionError(f"the stream ended before a {kind}")

    def responses(self) -> Iterator[pb.ConnectResponse]:
        """Every response, as it comes."""
        return iter(self._responses)

    def close(self) -> None:
        self._requests.put(None)
        self._responses.cancel()


@pytest.fixture(scope="module")
def secured(store: SchedulerStore, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Secured]:
    with secured_server(store, tmp_path_factory.mktemp("identity")) as server:
        yield server


@pytest.fixture(scope="module")
def channel(secured: Secured) -> Iterator[grpc.Channel]:
    with grpc.insecure_channel(secured.address) as channel:
        yield channel


@pytest.fixture
def streams(channel: grpc.Channel, secured: Secured, store: SchedulerStore) -> Iterator[Any]:
    opened: list[RawStream] = []

    def open_stream(subject: str | None, name: str, queues: tuple[str, ...] = ("default",)) -> RawStream:
        stream = RawStream(channel, secured, secured.token(subject) if subject else None, name, queues)
        opened.append(stream)
        return stream

    yield open_stream
    for stream in opened:
        stream.close()
    # The server lets go of an ended stream's name after the stream ends, in the background: the next test
    # may use the same name only once it has.
    names = {stream.name for stream in opened}
    eventually(lambda: not _held(cast(SqlStore, store), names), 30, f"the server to release {sorted(names)}")


@pytest.fixture
def own_store(store: SchedulerStore, tmp_path: Path) -> Iterator[SchedulerStore]:
    """An empty store of the module's kind, for a test that runs servers of its own: the sessions they leave
    (a closing server lets its sessions lapse rather than release them) stay out of the module server's
    way."""
    kind = "postgres" if cast(SqlStore, store).engine.dialect.name == "postgresql" else "sqlite"
    with new_store(kind, tmp_path) as own:
        yield own


def _held(store: SqlStore, names: set[str]) -> set[str]:
    """Which of `names` a server holds (a stream's session, not released)."""
    query = select(executor_sessions.c.executor_id).where(
        executor_sessions.c.executor_id.in_(names), executor_sessions.c.server_id != RELEASED
    )
    with store.engine.connect() as connection:
        return set(connection.execute(query).scalars())


def refused_with(stream: RawStream, code: grpc.StatusCode) -> grpc.RpcError:
    with pytest.raises(grpc.RpcError) as caught:
        stream.next("welcome")
    assert caught.value.code() == code, caught.value.details()
    return caught.value


def new_run(
    channel: grpc.Channel, secured: Secured, queue_name: str = "default", namespace: str = ""
) -> pb.AttemptRef:
    job = job_pb2.Job(
        schedule=job_pb2.Schedule(immediate=job_pb2.Schedule.Immediate()),
        target=job_pb2.Target(handler=job_pb2.Target.Handler(name="nothing")),
        queue=queue_name,
        namespace=namespace,
    )
    jobs = job_service_pb2_grpc.JobServiceStub(channel)
    created = jobs.CreateJob(
        job_service_pb2.CreateJobRequest(job=job), metadata=bearer(secured.token("admin"))
    )
    return pb.AttemptRef(run=created.run.name, attempt=1)


def get_run(channel: grpc.Channel, secured: Secured, ref: pb.AttemptRef) -> run_pb2.Run:
    search = search_service_pb2_grpc.SearchServiceStub(channel)
    return search.GetRun(
        search_service_pb2.GetRunRequest(name=ref.run), metadata=bearer(secured.token("admin"))
    ).run


def succeeded(ref: pb.AttemptRef) -> pb.AttemptResult:
    return pb.AttemptResult(attempt=ref, state=run_pb2.RUN_STATE_SUCCEEDED)


def claimed(stream: RawStream, ref: pb.AttemptRef) -> int:
    stream.send(claims=pb.ClaimBatch(attempts=[ref]))
    [result] = stream.next("claim_results").claim_results.results
    return int(result.outcome)


def test_a_credential_without_an_executor_grant_cannot_connect_as_an_executor(streams: Any) -> None:
    refused_with(streams("viewer", "exec-1"), grpc.StatusCode.PERMISSION_DENIED)
    refused_with(streams(None, "exec-1"), grpc.StatusCode.UNAUTHENTICATED)


def test_an_executor_credential_connects_only_under_its_own_name_and_queues(streams: Any) -> None:
    refused_with(streams("exec-2", "exec-1"), grpc.StatusCode.PERMISSION_DENIED)
    refused_with(streams("exec-1", "exec-1", ("default", "payments")), grpc.StatusCode.PERMISSION_DENIED)
    streams("exec-1", "exec-1").next("welcome")


def test_a_second_connection_under_a_live_executors_name_is_refused(streams: Any) -> None:
    live = streams("exec-1", "exec-1")
    live.next("welcome")
    error = refused_with(streams("exec-1", "exec-1"), grpc.StatusCode.ALREADY_EXISTS)
    assert error_info(error).reason == EXECUTOR_NAME_IN_USE
    assert error_info(error).metadata["executor"] == "exec-1"
    live.close()
    streams("exec-1", "exec-1").next("welcome")  # once it is gone, the name is free again


def test_a_quiet_stream_gives_its_name_up_to_a_reconnecting_executor(
    own_store: SchedulerStore, tmp_path: Path
) -> None:
    """A stream that dropped without the server noticing (no message for three heartbeat intervals) does not
    lock its executor out: the new connection ends it and takes the name."""
    interval = timedelta(milliseconds=100)
    with (
        secured_server(own_store, tmp_path, heartbeat_interval=interval) as server,
        grpc.insecure_channel(server.address) as channel,
    ):

        def connect() -> RawStream:
            return RawStream(channel, server, server.token("exec-1"), "exec-1", ("default",))

        quiet_since = time.monotonic()  # the server hears its hello later: it is quiet for less than this
        silent = connect()
        silent.next("welcome")
        # `silent` sends nothing at all, not even a heartbeat: a quiet limit (300 ms) later, the name is free.
        again = eventually(lambda: _welcomed(connect()), 5, "a quiet stream to give its name up")
        assert time.monotonic() - quiet_since >= 0.3
        with pytest.raises(AssertionError, match="the stream ended"):
            silent.next("acks")  # the old stream was ended (one left open would fail at its deadline)
        again.close()
        silent.close()


def test_one_stream_per_executor_name_across_server_processes(
    own_store: SchedulerStore, tmp_path: Path
) -> None:
    """Two servers on one database, as server workers or replicas are: a name live on one is refused on the
    other; a stream that ends frees it at once, one that goes quiet a quiet limit later; and a stream whose
    name the other server took meanwhile is ended once it speaks again."""
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    fast: dict[str, Any] = {
        "heartbeat_interval": timedelta(milliseconds=200),  # a quiet limit of 600 ms
        "session_renewal_interval": timedelta(milliseconds=100),
    }
    with (
        secured_server(own_store, tmp_path / "a", **fast) as a,
        secured_server(own_store, tmp_path / "b", **fast) as b,
        grpc.insecure_channel(a.address) as on_a,
        grpc.insecure_channel(b.address) as on_b,
    ):

        def connect(channel: grpc.Channel, server: Secured) -> RawStream:
            return RawStream(channel, server, server.token("exec-1"), "exec-1", ("default",))

        first = connect(on_a, a)
        first.next("welcome")
        error = refused_with(connect(on_b, b), grpc.StatusCode.ALREADY_EXISTS)
        assert error_info(error).reason == EXECUTOR_NAME_IN_USE
        first.close()
        hello_sent: list[float] = []

        def move() -> RawStream | None:
            hello_sent.append(time.monotonic())
            return _welcomed(connect(on_b, b))

        moved = eventually(move, 5, "the name to be free once the stream ended")
        # `moved` sends nothing after its hello: a quiet limit later, server a may take the name. Its quiet
        # began when the hello arrived, after it was sent: timed from the send, the bound holds however long
        # the welcome took to come back on a busy machine.
        back = eventually(lambda: _welcomed(connect(on_a, a)), 5, "a quiet stream to give its name up")
        assert time.monotonic() - hello_sent[-1] >= 0.6
        with _talking(back):  # a live holder: were it quiet too, the name would go to whichever spoke last
            moved.send(heartbeats=pb.HeartbeatBatch())  # the quiet stream on b speaks again: b ends it
            with pytest.raises(AssertionError, match="the stream ended"):
                moved.next("acks")
        back.close()


@contextmanager
def _talking(stream: RawStream) -> Iterator[None]:
    """STREAM sends an empty heartbeat batch every 50 ms while the block runs."""
    done = threading.Event()

    def talk() -> None:
        while not done.wait(0.05):
            stream.send(heartbeats=pb.HeartbeatBatch())

    talker = threading.Thread(target=talk, daemon=True)
    talker.start()
    try:
        yield
    finally:
        done.set()
        talker.join()


def _welcomed(stream: RawStream) -> RawStream | None:
    """The stream once welcomed; None (closed) while the name is in use."""
    try:
        stream.next("welcome")
    except grpc.RpcError as error:
        stream.close()
        if error.code() is not grpc.StatusCode.ALREADY_EXISTS:
            raise
        return None
    return stream


def test_what_a_name_held_and_its_new_stream_does_not_hold_ends_not_held(
    channel: grpc.Channel, secured: Secured, store: SchedulerStore
) -> None:
    """A grant whose answer was lost with the stream, or an attempt of a process that died and came back
    under the same name: nobody runs it, so it must not stay RUNNING while the name's session is renewed."""
    kept, orphan = new_run(channel, secured), new_run(channel, secured)
    first = RawStream(channel, secured, secured.token("exec-1"), "exec-1", ("default",))
    first.next("welcome")
    assert [claimed(first, kept), claimed(first, orphan)] == [pb.CLAIM_OUTCOME_GRANTED] * 2
    first.close()
    again = eventually(
        lambda: _welcomed(
            RawStream(channel, secured, secured.token("exec-1"), "exec-1", ("default",), running=(kept,))
        ),
        10,
        "the name to be free again",
    )

    def ended_run() -> run_pb2.Run | None:
        run = get_run(channel, secured, orphan)
        return run if run.state != run_pb2.RUN_STATE_RUNNING else None

    ended = eventually(ended_run, 10, "the attempt nobody holds to end")
    assert ended.state == run_pb2.RUN_STATE_FAILED
    assert ended.error.type == "NotHeld"
    assert get_run(channel, secured, kept).state == run_pb2.RUN_STATE_RUNNING
    again.send(results=pb.ResultBatch(results=[succeeded(kept)]))
    assert list(again.next("acks").acks.recorded) == [kept]
    again.close()
    # As the `streams` fixture does: the next test may use the name only once the server let go of it.
    eventually(lambda: not _held(cast(SqlStore, store), {"exec-1"}), 30, "the server to release exec-1")


def test_a_run_of_a_queue_the_credential_does_not_serve_is_not_granted(
    streams: Any, channel: grpc.Channel, secured: Secured
) -> None:
    stream = streams("exec-1", "exec-1")
    stream.next("welcome")
    payments = new_run(channel, secured, "payments")
    assert claimed(stream, payments) == pb.CLAIM_OUTCOME_NOT_FOUND
    # With a wrong attempt too: nothing about a run beyond its reach (not even STALE) reaches the executor.
    assert claimed(stream, pb.AttemptRef(run=payments.run, attempt=7)) == pb.CLAIM_OUTCOME_NOT_FOUND
    assert get_run(channel, secured, payments).state != run_pb2.RUN_STATE_RUNNING
    assert claimed(stream, new_run(channel, secured)) == pb.CLAIM_OUTCOME_GRANTED


def test_a_run_of_a_namespace_the_credential_does_not_serve_is_not_granted(
    streams: Any, channel: grpc.Channel, secured: Secured
) -> None:
    stream = streams("exec-3", "exec-3")  # its grant: the default queue, in namespace team-a alone
    stream.next("welcome")
    theirs = new_run(channel, secured, namespace="team-b")
    assert claimed(stream, theirs) == pb.CLAIM_OUTCOME_NOT_FOUND
    assert claimed(stream, pb.AttemptRef(run=theirs.run, attempt=2)) == pb.CLAIM_OUTCOME_NOT_FOUND
    assert get_run(channel, secured, theirs).state != run_pb2.RUN_STATE_RUNNING
    assert claimed(stream, new_run(channel, secured, namespace="team-a")) == pb.CLAIM_OUTCOME_GRANTED


def test_reports_for_an_attempt_the_executor_does_not_hold_are_refused(
    streams: Any, channel: grpc.Channel, secured: Secured
) -> None:
    holder = streams("exec-2", "exec-2")
    holder.next("welcome")
    ref = new_run(channel, secured)
    assert claimed(holder, ref) == pb.CLAIM_OUTCOME_GRANTED

    forger = streams("exec-1", "exec-1")
    forger.next("welcome")
    forger.send(logs=pb.LogBatch(chunks=[pb.LogChunk(attempt=ref, lines=[run_pb2.LogLine(text="forged")])]))
    forger.send(results=pb.ResultBatch(results=[succeeded(ref)]))
    acks = forger.next("acks").acks
    assert list(acks.fenced) == [ref]
    assert not acks.recorded

    holder.send(logs=pb.LogBatch(chunks=[pb.LogChunk(attempt=ref, lines=[run_pb2.LogLine(text="real")])]))
    holder.send(results=pb.ResultBatch(results=[succeeded(ref)]))
    assert list(holder.next("acks").acks.recorded) == [ref]  # logs are written before the result after them
    search = search_service_pb2_grpc.SearchServiceStub(channel)
    lines = [
        line.text
        for answer in search.TailRunLogs(
            search_service_pb2.TailRunLogsRequest(name=ref.run), metadata=bearer(secured.token("admin"))
        )
        for line in answer.lines
    ]
    assert lines == ["real"]
    assert get_run(channel, secured, ref).executor == "exec-2"


def test_a_start_time_an_hour_before_the_claim_is_clamped_and_flagged(
    streams: Any, channel: grpc.Channel, secured: Secured
) -> None:
    stream = streams("exec-1", "exec-1")
    stream.next("welcome")
    ref = new_run(channel, secured)
    assert claimed(stream, ref) == pb.CLAIM_OUTCOME_GRANTED
    claimed_at = to_datetime(get_run(channel, secured, ref).start_time)
    forged = datetime.now(UTC) - timedelta(hours=1)
    result = pb.AttemptResult(
        attempt=ref,
        state=run_pb2.RUN_STATE_SUCCEEDED,
        start_time=to_timestamp(forged),
        end_time=to_timestamp(datetime.now(UTC) + timedelta(hours=1)),
    )
    stream.send(results=pb.ResultBatch(results=[result]))
    assert list(stream.next("acks").acks.recorded) == [ref]
    run = get_run(channel, secured, ref)
    assert run.state == run_pb2.RUN_STATE_SUCCEEDED
    assert run.times_clamped
    assert to_datetime(run.start_time) == claimed_at
    assert to_datetime(run.end_time) <= datetime.now(UTC)
    assert run.lateness.ToTimedelta() >= timedelta(0)


def test_times_within_the_record_are_not_flagged_and_the_start_stays_the_claims(
    streams: Any, channel: grpc.Channel, secured: Secured
) -> None:
    stream = streams("exec-1", "exec-1")
    stream.next("welcome")
    ref = new_run(channel, secured)
    assert claimed(stream, ref) == pb.CLAIM_OUTCOME_GRANTED
    running = get_run(channel, secured, ref)
    started = to_datetime(running.start_time) + timedelta(milliseconds=5)
    result = pb.AttemptResult(
        attempt=ref,
        state=run_pb2.RUN_STATE_SUCCEEDED,
        start_time=to_timestamp(started),
        end_time=to_timestamp(datetime.now(UTC)),
    )
    stream.send(results=pb.ResultBatch(results=[result]))
    assert list(stream.next("acks").acks.recorded) == [ref]
    run = get_run(channel, secured, ref)
    assert not run.times_clamped
    # Written once, by the claim: the executor's own start is checked, not stored.
    assert (run.start_time, run.lateness) == (running.start_time, running.lateness)


def test_a_reported_result_is_kept_and_one_the_server_cannot_keep_fails_by_name(
    streams: Any, channel: grpc.Channel, secured: Secured
) -> None:
    """The server checks what any executor reports: JSON, 64 KiB at most, kept on a success only."""
    stream = streams("exec-1", "exec-1")
    stream.next("welcome")
    reported = {
        '{"total": 5}': (run_pb2.RUN_STATE_SUCCEEDED, "", '{"total": 5}'),
        '"' + "x" * 65536 + '"': (run_pb2.RUN_STATE_FAILED, "ResultTooLarge", ""),
        "{not json": (run_pb2.RUN_STATE_FAILED, "ResultNotSerializable", ""),
    }
    for text, (state, error_type, kept) in reported.items():
        ref = new_run(channel, secured)
        assert claimed(stream, ref) == pb.CLAIM_OUTCOME_GRANTED
        result = pb.AttemptResult(attempt=ref, state=run_pb2.RUN_STATE_SUCCEEDED, result=text)
        stream.send(results=pb.ResultBatch(results=[result]))
        assert list(stream.next("acks").acks.recorded) == [ref]
        run = get_run(channel, secured, ref)
        assert (run.state, run.error.type, run.result) == (state, error_type, kept)
    failed = new_run(channel, secured)
    assert claimed(stream, failed) == pb.CLAIM_OUTCOME_GRANTED
    result = pb.AttemptResult(attempt=failed, state=run_pb2.RUN_STATE_FAILED, result="[1]")
    stream.send(results=pb.ResultBatch(results=[result]))
    assert list(stream.next("acks").acks.recorded) == [failed]
    assert get_run(channel, secured, failed).result == ""  # only a success has a result


def test_a_real_executor_presents_its_token_from_a_file_and_runs_a_job(
    channel: grpc.Channel, secured: Secured, tmp_path: Path
) -> None:
    token_file = tmp_path / "exec-2.token"
    token_file.write_text(secured.token("exec-2") + "\n")
    config = ExecutorConfig(
        server=secured.address,
        queue_url=secured.names,
        signals_url=secured.names,
        executor_id="exec-2",
        token_file=token_file,
        reconnect_max=timedelta(milliseconds=200),
        drain_grace=timedelta(seconds=1),
    )
    worker = Executor(config, HandlerRegistry({"nothing": lambda context: None}))
    loop = asyncio.new_event_loop()
    thread = threading.Thread(target=loop.run_until_complete, args=(worker.run(),), daemon=True)
    thread.start()
    try:
        ref = new_run(channel, secured)

        def succeeded_run() -> run_pb2.Run | None:
            run = get_run(channel, secured, ref)
            return run if run.state == run_pb2.RUN_STATE_SUCCEEDED else None

        run = eventually(succeeded_run, 60, "the run to succeed on the executor")
        assert run.executor == "exec-2"
    finally:
        loop.call_soon_threadsafe(worker.drain, timedelta(0))
        thread.join(timeout=20)
        loop.close()
