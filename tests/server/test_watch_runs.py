"""`WatchRuns` and `TailRunLogs` served from the live feed: every change of a large transaction, long filters,
resuming without a gap, slow readers cut, stream limits, and log tails woken by writes."""

from __future__ import annotations

import threading
import time
import uuid
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING

import grpc
import pytest

from jobmesh.core.ports.pipeline_store import SchedulerStore
from jobmesh.core.ports.store import NewJob
from jobmesh.core.records import RunState
from jobmesh.server.app import Services
from jobmesh.server.config import ServerConfig
from jobmesh.v1 import job_pb2, job_service_pb2, run_pb2, search_service_pb2, search_service_pb2_grpc
from tests.adapters.store.builders import job, log, run
from tests.server.conftest import Api
from tests.server.errors import call_error, error_info, field_violations
from tests.support import SUITE_LOOP_LAG

PER_CLIENT = 6
BUFFER = 1000


@pytest.fixture(scope="module")
def server_config() -> ServerConfig:
    return ServerConfig(
        listen="127.0.0.1:0",
        max_live_streams_per_client=PER_CLIENT,
        watch_buffer_runs=BUFFER,
        max_loop_lag=SUITE_LOOP_LAG,
    )


def tag() -> str:
    return f"t{uuid.uuid4().hex[:10]}"


if TYPE_CHECKING:  # what a stub's stream call returns (named in grpc's type stubs only)
    Stream = grpc._CallIterator[search_service_pb2.WatchRunsResponse]


def watch(api: Api, filter_text: str = "", resume_token: str = "") -> Stream:
    request = search_service_pb2.WatchRunsRequest(
        parent="jobs/-", filter=filter_text, resume_token=resume_token, show_upcoming=True
    )
    return api.search.WatchRuns(request, timeout=120)


def scheduled(api: Api, team: str) -> job_service_pb2.CreateJobResponse:
    """A job for an hour from now (through the API): its first run comes SCHEDULED and stays so."""
    spec = job_pb2.Job(
        labels={"team": team}, target=job_pb2.Target(command=job_pb2.Target.Command(argv=["true"]))
    )
    spec.schedule.run_at.FromDatetime(datetime.now(UTC) + timedelta(hours=1))
    request = job_service_pb2.CreateJobRequest(job=spec, job_id=tag())
    response: job_service_pb2.CreateJobResponse = api.jobs.CreateJob(request)
    return response


def store_batch(store: SchedulerStore, label: str, count: int, first: int = 0) -> set[str]:
    """`count` jobs labelled `batch: label` with their first runs, in one transaction; the runs' names."""
    ids = [f"{label}-{index}" for index in range(first, first + count)]
    store.create_jobs([NewJob(job(i, labels={"batch": label}), run(i, "first")) for i in ids])
    return {f"jobs/{i}/runs/first" for i in ids}


def names_until(stream: Stream, wanted: set[str]) -> tuple[set[str], str]:
    """Reads until every wanted run has come; the runs seen and the last resume token."""
    seen: set[str] = set()
    token = ""
    while not wanted <= seen:
        message = next(stream)
        seen |= {r.name for r in message.runs}
        token = message.resume_token
    return seen, token


def read_all(stream: Stream, seen: set[str]) -> None:
    for message in stream:
        seen |= {r.name for r in message.runs}


def test_every_change_of_a_five_thousand_run_transaction_comes(api: Api) -> None:
    label = tag()
    stream = watch(api, f'labels.batch = "{label}"')
    try:
        first = next(stream)
        assert list(first.runs) == []
        assert first.resume_token
        wanted = store_batch(api.store, label, 5000)
        seen, _ = names_until(stream, wanted)
        assert seen == wanted
    finally:
        stream.cancel()


def test_a_filter_of_thirty_two_comparisons_is_served(api: Api) -> None:
    label = tag()
    since = (datetime.now(UTC) - timedelta(days=1)).isoformat()
    comparisons = [f'labels.team = "{label}"', *(f'create_time > "{since}"' for _ in range(31))]
    stream = watch(api, " AND ".join(comparisons))
    try:
        assert list(next(stream).runs) == []
        created = scheduled(api, label)
        assert [r.name for r in next(stream).runs] == [created.run.name]
        api.jobs.CancelRun(job_service_pb2.CancelRunRequest(name=created.run.name))
        assert [(r.name, r.state) for r in next(stream).runs] == [
            (created.run.name, run_pb2.RUN_STATE_CANCELLED)
        ]
    finally:
        stream.cancel()


def test_a_stream_resumed_from_its_token_misses_nothing_and_repeats_nothing(api: Api) -> None:
    label = tag()
    stream = watch(api, f'labels.team = "{label}"')
    try:
        next(stream)
        one = scheduled(api, label)
        message = next(stream)
        assert [r.name for r in message.runs] == [one.run.name]
        token = message.resume_token
    finally:
        stream.cancel()

    # While no stream is open: one run changes, another comes.
    api.jobs.CancelRun(job_service_pb2.CancelRunRequest(name=one.run.name))
    two = scheduled(api, label)

    resumed = watch(api, f'labels.team = "{label}"', resume_token=token)
    try:
        first = next(resumed)
        assert list(first.runs) == [], "a resumed stream has no initial page"
        changes: list[tuple[str, int]] = []
        while len(changes) < 2:
            changes += [(r.name, r.state) for r in next(resumed).runs]
        assert changes == [
            (one.run.name, run_pb2.RUN_STATE_CANCELLED),
            (two.run.name, run_pb2.RUN_STATE_SCHEDULED),
        ]
    finally:
        resumed.cancel()


def test_a_reader_that_falls_behind_is_cut_and_resumes_without_a_gap(
    api: Api, grpc_servicer: Services
) -> None:
    label = tag()
    # A reader with a small flow-control window that never grows: the server's writes wait for it soon.
    channel = grpc.insecure_channel(
        api.address, options=[("grpc.http2.bdp_probe", 0), ("grpc.http2.lookahead_bytes", 16 * 1024)]
    )
    slow = search_service_pb2_grpc.SearchServiceStub(channel)
    request = search_service_pb2.WatchRunsRequest(
        show_upcoming=True, parent="jobs/-", filter=f'labels.batch = "{label}"'
    )
    stream = slow.WatchRuns(request, timeout=120)
    next(stream)
    wanted: set[str] = set()
    # The stream is not read meanwhile: once the writes wait, the changes waiting for them pass its buffer.
    for _ in range(20):
        if any(watcher.fell_behind for watcher in grpc_servicer.feed.watchers):
            break
        wanted |= store_batch(api.store, label, BUFFER, first=len(wanted))
        time.sleep(0.2)
    assert any(watcher.fell_behind for watcher in grpc_servicer.feed.watchers), "the reader was never cut"
    seen: set[str] = set()
    cut = call_error(lambda: read_all(stream, seen), grpc.StatusCode.RESOURCE_EXHAUSTED)
    channel.close()
    info = error_info(cut)
    assert info.reason == "STREAM_FELL_BEHIND"
    assert len(seen) < len(wanted)

    resumed = watch(api, f'labels.batch = "{label}"', resume_token=info.metadata["resume_token"])
    try:
        rest, _ = names_until(resumed, wanted - seen)
        assert seen | rest == wanted
    finally:
        resumed.cancel()


def test_streams_past_the_limit_for_one_client_are_refused_until_one_closes(api: Api) -> None:
    streams = [watch(api) for _ in range(PER_CLIENT)]
    try:
        for stream in streams:
            next(stream)  # admitted: its first message came
        refused = call_error(lambda: next(watch(api)), grpc.StatusCode.RESOURCE_EXHAUSTED)
        assert error_info(refused).reason == "TOO_MANY_STREAMS"
        assert error_info(refused).metadata["scope"] == "client"
        streams.pop().cancel()
        deadline = time.monotonic() + 10
        while True:  # the server frees the slot once it sees the cancel
            stream = watch(api)
            streams.append(stream)
            try:
                next(stream)
                break
            except grpc.RpcError as error:
                refusals = (error.code(), time.monotonic() < deadline)
            assert refusals == (grpc.StatusCode.RESOURCE_EXHAUSTED, True), (
                "the closed stream's slot stays taken"
            )
            time.sleep(0.1)
    finally:
        for stream in streams:
            stream.cancel()


@pytest.mark.parametrize(
    "token",
    [
        "not base64!",
        "WzEsMl0",  # [1,2]
        "WyIxIiwiIiwiIl0",  # ["1","",""]
        "Wy0xLCIiLCIiXQ",  # [-1,"",""]
        "WzEsIiIsInIiXQ",  # [1,"","r"]
        "WzEsIkpPQiIsInIiXQ",  # [1,"JOB","r"]
        "x" * 300,
    ],
)
def test_a_forged_resume_token_is_invalid_argument(api: Api, token: str) -> None:
    error = call_error(lambda: next(watch(api, resume_token=token)), grpc.StatusCode.INVALID_ARGUMENT)
    assert "resume_token" in field_violations(error)


def test_a_token_from_the_future_waits_for_the_future(api: Api) -> None:
    """A token may lie ahead of this server's feed (another server read further): nothing before it comes."""
    label = tag()
    stream = watch(api, f'labels.team = "{label}"')
    try:
        next(stream)
        scheduled(api, label)
        token = next(stream).resume_token
    finally:
        stream.cancel()
    again = watch(api, f'labels.team = "{label}"', resume_token=token)
    try:
        next(again)
        two = scheduled(api, label)
        assert [r.name for r in next(again).runs] == [two.run.name]
    finally:
        again.cancel()


def test_a_followed_tail_gets_each_new_line_and_ends_with_its_run(api: Api) -> None:
    job_id = tag()
    api.store.create_jobs([NewJob(job(job_id), None)])
    api.store.create_run(run(job_id, "r1", state=RunState.QUEUED, attempt=1))
    name = f"jobs/{job_id}/runs/r1"
    tail = api.search.TailRunLogs(search_service_pb2.TailRunLogsRequest(name=name, follow=True), timeout=30)
    got: list[str] = []
    done = threading.Event()

    def read() -> None:
        for message in tail:
            got.extend(line.text for line in message.lines)
        done.set()

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    for sequence in (1, 2, 3):
        api.store.append_logs([log(job_id, "r1", sequence, f"line {sequence}", stream="STDOUT")])
        deadline = time.monotonic() + 5
        while len(got) < sequence:
            assert time.monotonic() < deadline, f"line {sequence} never came"
            time.sleep(0.01)
    api.jobs.CancelRun(job_service_pb2.CancelRunRequest(name=name))
    assert done.wait(10), "the tail did not end with its run"
    assert got == ["line 1", "line 2", "line 3"]
