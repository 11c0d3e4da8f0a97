"""`CountRuns`, and `WatchRuns` with `include_run_counts`: the mesh's counts per state equal what `ListRuns`
lists with each state's filter; a stream brings them first, then once more per change of the counts (a
transaction of many runs makes one message), and bad requests are refused."""

from __future__ import annotations

import uuid
from collections import Counter
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING

import grpc
import pytest

from jobmesh.core.ports.store import NewJob
from jobmesh.core.records import RunState
from jobmesh.server.config import ServerConfig
from jobmesh.v1 import job_pb2, job_service_pb2, run_pb2, search_service_pb2
from tests.adapters.store.builders import job, run
from tests.server.conftest import Api
from tests.server.errors import call_error, field_violations
from tests.support import SUITE_LOOP_LAG

if TYPE_CHECKING:
    Stream = grpc._CallIterator[search_service_pb2.WatchRunsResponse]

ALL = "jobs/-"
PAST = datetime.now(UTC) - timedelta(minutes=10)


@pytest.fixture(scope="module")
def server_config() -> ServerConfig:
    return ServerConfig(listen="127.0.0.1:0", max_loop_lag=SUITE_LOOP_LAG)


def tag() -> str:
    return f"c{uuid.uuid4().hex[:10]}"


def due_runs(api: Api, count: int) -> list[str]:
    """`count` jobs with a run due ten minutes ago, in one transaction (no watcher here: they stay
    SCHEDULED); the runs' names."""
    ids = [f"{tag()}-{index}" for index in range(count)]
    api.store.create_jobs(
        [NewJob(job(i), run(i, "first", schedule_time=PAST, due_time=PAST, create_time=PAST)) for i in ids]
    )
    return [f"jobs/{i}/runs/first" for i in ids]


def upcoming_run(api: Api) -> str:
    spec = job_pb2.Job(target=job_pb2.Target(command=job_pb2.Target.Command(argv=["true"])))
    spec.schedule.run_at.FromDatetime(datetime.now(UTC) + timedelta(hours=1))
    response = api.jobs.CreateJob(job_service_pb2.CreateJobRequest(job=spec, job_id=tag()))
    return str(response.run.name)


def listed(api: Api, state: str) -> int:
    """How many runs `ListRuns` lists with `state = {state}`, page by page."""
    total, token = 0, ""
    while True:
        page = api.search.ListRuns(
            search_service_pb2.ListRunsRequest(
                parent=ALL, filter=f"state = {state}", page_size=1000, page_token=token
            )
        )
        total += len(page.runs)
        token = page.next_page_token
        if not token:
            return total


def by_state(counts: search_service_pb2.RunCounts) -> Counter[int]:
    totals: Counter[int] = Counter()
    for count in counts.counts:
        totals[count.state] += count.run_count
    return totals


def counted(api: Api) -> search_service_pb2.RunCounts:
    answer = api.search.CountRuns(search_service_pb2.CountRunsRequest(parent=ALL))
    return answer.run_counts


def test_the_counts_equal_what_list_runs_lists_per_state(api: Api) -> None:
    names = due_runs(api, 30)
    for name in names[:7]:
        api.jobs.CancelRun(job_service_pb2.CancelRunRequest(name=name))
    upcoming_run(api)
    counts = counted(api)
    assert counts.read_time.ToDatetime(UTC) <= datetime.now(UTC)
    totals = by_state(counts)
    for state in RunState:
        wire = run_pb2.RunState.Value(f"RUN_STATE_{state.value}")
        assert totals[wire] == listed(api, state.value), state
    assert totals[run_pb2.RUN_STATE_CANCELLED] >= 7
    assert sum(c.upcoming_run_count for c in counts.counts) >= 1
    assert all(c.upcoming_run_count == 0 for c in counts.counts if c.state != run_pb2.RUN_STATE_SCHEDULED)
    assert {c.namespace for c in counts.counts} == {"default"}


def watch_counts(api: Api, resume_token: str = "") -> Stream:
    request = search_service_pb2.WatchRunsRequest(
        parent=ALL, initial_page_size=1, include_run_counts=True, resume_token=resume_token
    )
    return api.search.WatchRuns(request, timeout=60)


def test_a_stream_brings_the_counts_first_then_once_per_change_of_them(api: Api) -> None:
    stream = watch_counts(api)
    try:
        first = next(stream)
        assert first.HasField("run_counts")
        before = by_state(first.run_counts)[run_pb2.RUN_STATE_SCHEDULED]
        due_runs(api, 50)  # one transaction: the counts change once
        messages_with_counts: list[search_service_pb2.WatchRunsResponse] = []
        runs_seen = 0
        while runs_seen < 50 or not messages_with_counts:
            message = next(stream)
            runs_seen += len(message.runs)
            if message.HasField("run_counts"):
                messages_with_counts.append(message)
                assert message.resume_token
        [message] = messages_with_counts
        assert by_state(message.run_counts)[run_pb2.RUN_STATE_SCHEDULED] == before + 50
    finally:
        stream.cancel()


def test_a_resumed_stream_starts_with_the_counts_too(api: Api) -> None:
    stream = watch_counts(api)
    try:
        token = next(stream).resume_token
    finally:
        stream.cancel()
    resumed = watch_counts(api, resume_token=token)
    try:
        first = next(resumed)
        assert list(first.runs) == []
        assert by_state(first.run_counts) == by_state(counted(api))
    finally:
        resumed.cancel()


def test_a_stream_without_include_run_counts_brings_none(api: Api) -> None:
    stream = api.search.WatchRuns(search_service_pb2.WatchRunsRequest(parent=ALL), timeout=60)
    try:
        assert not next(stream).HasField("run_counts")
        names = due_runs(api, 2)
        seen: set[str] = set()
        while not set(names) <= seen:
            message = next(stream)
            assert not message.HasField("run_counts")
            seen |= {r.name for r in message.runs}
    finally:
        stream.cancel()


@pytest.mark.parametrize("parent", ["", "jobs/nightly", "jobs", "jobs/-/runs/x", "namespaces/default"])
def test_counts_of_anything_but_every_job_are_refused(api: Api, parent: str) -> None:
    error = call_error(
        lambda: api.search.CountRuns(search_service_pb2.CountRunsRequest(parent=parent)),
        grpc.StatusCode.INVALID_ARGUMENT,
    )
    assert "parent" in field_violations(error)


def test_a_stream_of_one_job_cannot_ask_for_the_counts(api: Api) -> None:
    [name] = due_runs(api, 1)
    parent = name.rsplit("/runs/", 1)[0]

    def watch() -> None:
        request = search_service_pb2.WatchRunsRequest(parent=parent, include_run_counts=True)
        next(api.search.WatchRuns(request, timeout=30))

    error = call_error(watch, grpc.StatusCode.INVALID_ARGUMENT)
    assert "parent" in field_violations(error)


def test_changes_that_come_together_make_one_message_of_counts(api: Api) -> None:
    """Counts are pushed coalesced (at most about once a second), not once per run changed."""
    stream = watch_counts(api)
    try:
        before = by_state(next(stream).run_counts)[run_pb2.RUN_STATE_SCHEDULED]
        writes = 20
        for _ in range(writes):  # a transaction each
            due_runs(api, 1)
        messages_with_counts = 0
        while True:
            message = next(stream)
            if message.HasField("run_counts"):
                messages_with_counts += 1
                if by_state(message.run_counts)[run_pb2.RUN_STATE_SCHEDULED] == before + writes:
                    break
        assert messages_with_counts < writes
    finally:
        stream.cancel()
