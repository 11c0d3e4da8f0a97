"""Retries against a small in-process server that refuses calls as scripted: `RESOURCE_EXHAUSTED` with a
`RetryInfo` is retried no sooner than it asks, `UNAVAILABLE` with backoff, a call that is not safe to repeat
never, and attempts stop at the policy's limit. And the backoff's own shape."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator
from concurrent import futures
from datetime import timedelta
from typing import Any

import grpc
import pytest
from google.protobuf import any_pb2
from google.rpc import code_pb2, error_details_pb2, status_pb2
from grpc_status import rpc_status

from jobmesh.client import (
    AsyncClient,
    Client,
    ResourceExhausted,
    RetryConfig,
    RunState,
    Unavailable,
    command,
    immediately,
)
from jobmesh.client._errors import JobmeshError
from jobmesh.client._retry import retry_wait
from jobmesh.v1 import job_pb2, job_service_pb2, job_service_pb2_grpc, run_pb2, search_service_pb2_grpc
from jobmesh.v1 import search_service_pb2 as search

FAST = RetryConfig(initial_interval=timedelta(milliseconds=10), max_interval=timedelta(milliseconds=50))


def refusal(code: int, retry_after: timedelta | None = None) -> grpc.Status:
    status = status_pb2.Status(code=code, message="not now")
    if retry_after is not None:
        info = error_details_pb2.RetryInfo()
        info.retry_delay.FromTimedelta(retry_after)
        packed = any_pb2.Any()
        packed.Pack(info)
        status.details.append(packed)
    refused: grpc.Status = rpc_status.to_status(status)
    return refused


class Scripted(job_service_pb2_grpc.JobServiceServicer):
    """Refuses each call with the next scripted status until the script runs out, then answers."""

    def __init__(self) -> None:
        self.script: list[grpc.Status] = []
        self.calls: list[tuple[str, float, Any]] = []

    def _answer(self, method: str, request: Any, context: grpc.ServicerContext) -> None:
        self.calls.append((method, time.monotonic(), request))
        if self.script:
            context.abort_with_status(self.script.pop(0))

    def GetJob(self, request: Any, context: grpc.ServicerContext) -> job_service_pb2.GetJobResponse:
        self._answer("GetJob", request, context)
        return job_service_pb2.GetJobResponse(job=job_pb2.Job(name=request.name))

    def CreateJob(self, request: Any, context: grpc.ServicerContext) -> job_service_pb2.CreateJobResponse:
        self._answer("CreateJob", request, context)
        return job_service_pb2.CreateJobResponse(job=job_pb2.Job(name="jobs/made"))

    def DeleteJob(self, request: Any, context: grpc.ServicerContext) -> job_service_pb2.DeleteJobResponse:
        self._answer("DeleteJob", request, context)
        return job_service_pb2.DeleteJobResponse(job=job_pb2.Job(name=request.name))


class Watched(search_service_pb2_grpc.SearchServiceServicer):
    """A run that has ended; its watch stream is refused as scripted before it opens."""

    def __init__(self, script: list[grpc.Status]) -> None:
        self.script = script
        self.watches = 0

    def WatchRuns(self, request: Any, context: grpc.ServicerContext) -> Iterator[search.WatchRunsResponse]:
        self.watches += 1
        if self.script:
            context.abort_with_status(self.script.pop(0))
        yield search.WatchRunsResponse(resume_token="1")

    def GetRun(self, request: Any, context: grpc.ServicerContext) -> search.GetRunResponse:
        return search.GetRunResponse(run=run_pb2.Run(name=request.name, state=run_pb2.RUN_STATE_SUCCEEDED))


WATCHED = Watched([])  # type: ignore[abstract]


@pytest.fixture(scope="module")
def scripted() -> Iterator[tuple[Scripted, str]]:
    servicer = Scripted()  # type: ignore[abstract]  # the stubs' other methods answer UNIMPLEMENTED
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=4))
    job_service_pb2_grpc.add_JobServiceServicer_to_server(servicer, server)
    search_service_pb2_grpc.add_SearchServiceServicer_to_server(WATCHED, server)
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    try:
        yield servicer, f"127.0.0.1:{port}"
    finally:
        server.stop(None)


@pytest.fixture
def service(scripted: tuple[Scripted, str]) -> Scripted:
    scripted[0].script.clear()
    scripted[0].calls.clear()
    return scripted[0]


def test_resource_exhausted_is_retried_no_sooner_than_its_retry_info(
    service: Scripted, scripted: tuple[Scripted, str]
) -> None:
    service.script = [refusal(code_pb2.RESOURCE_EXHAUSTED, timedelta(milliseconds=400))]
    with Client(scripted[1], retry=FAST) as client:
        assert client.get_job("waited").name == "jobs/waited"
    (_, first, _), (_, second, _) = service.calls
    assert second - first >= 0.4  # the backoff alone would have waited 10 ms


def test_a_create_is_retried_with_the_same_request_id(
    service: Scripted, scripted: tuple[Scripted, str]
) -> None:
    service.script = [refusal(code_pb2.UNAVAILABLE), refusal(code_pb2.RESOURCE_EXHAUSTED)]
    with Client(scripted[1], retry=FAST) as client:
        assert client.create_job(immediately(), command(["true"])).job.name == "jobs/made"
    request_ids = [request.request_id for _, _, request in service.calls]
    assert len(request_ids) == 3
    assert len(set(request_ids)) == 1
    assert request_ids[0]


def test_a_delete_is_not_retried(service: Scripted, scripted: tuple[Scripted, str]) -> None:
    service.script = [refusal(code_pb2.UNAVAILABLE)]
    with Client(scripted[1], retry=FAST) as client, pytest.raises(Unavailable):
        client.delete_job("once")
    assert [method for method, _, _ in service.calls] == ["DeleteJob"]


def test_retries_stop_at_max_attempts_with_the_last_error(
    service: Scripted, scripted: tuple[Scripted, str]
) -> None:
    service.script = [refusal(code_pb2.RESOURCE_EXHAUSTED, timedelta(milliseconds=5))] * 5
    retry = RetryConfig(max_attempts=3, initial_interval=timedelta(milliseconds=5))
    with Client(scripted[1], retry=retry) as client, pytest.raises(ResourceExhausted) as raised:
        client.get_job("busy")
    assert len(service.calls) == 3
    assert raised.value.retry_delay == timedelta(milliseconds=5)


def test_other_codes_are_not_retried(service: Scripted, scripted: tuple[Scripted, str]) -> None:
    service.script = [refusal(code_pb2.INTERNAL)]
    with Client(scripted[1], retry=FAST) as client, pytest.raises(JobmeshError) as raised:
        client.get_job("broken")
    assert raised.value.code == grpc.StatusCode.INTERNAL
    assert len(service.calls) == 1


def test_an_unreachable_server_is_unavailable_after_the_retries() -> None:
    retry = RetryConfig(max_attempts=2, initial_interval=timedelta(milliseconds=5))
    with (
        Client("127.0.0.1:1", retry=retry, deadline=timedelta(seconds=5)) as client,
        pytest.raises(Unavailable),
    ):
        client.get_job("anything")


def test_a_wait_reconnects_its_watch_while_the_server_refuses_it(scripted: tuple[Scripted, str]) -> None:
    WATCHED.script[:] = [refusal(code_pb2.UNAVAILABLE), refusal(code_pb2.RESOURCE_EXHAUSTED)]
    WATCHED.watches = 0
    with Client(scripted[1], retry=FAST) as client:
        run = client.wait_for_run("jobs/a/runs/b", timedelta(seconds=10))
    assert (run.name, run.state) == ("jobs/a/runs/b", RunState.SUCCEEDED)
    assert WATCHED.watches == 3


def test_a_wait_gives_up_when_its_retries_are_spent(scripted: tuple[Scripted, str]) -> None:
    WATCHED.script[:] = [refusal(code_pb2.UNAVAILABLE)] * 3
    WATCHED.watches = 0
    retry = RetryConfig(max_attempts=2, initial_interval=timedelta(milliseconds=5))
    with Client(scripted[1], retry=retry) as client, pytest.raises(Unavailable):
        client.wait_for_run("jobs/a/runs/b")
    assert WATCHED.watches == 2


def error(code: grpc.StatusCode, retry_delay: timedelta | None = None) -> JobmeshError:
    return JobmeshError(code, "refused", retry_delay=retry_delay)


def test_the_backoff_grows_is_capped_and_jittered() -> None:
    config = RetryConfig(
        max_attempts=10,
        initial_interval=timedelta(milliseconds=100),
        multiplier=2,
        max_interval=timedelta(seconds=1),
        jitter=0.2,
    )
    unavailable = error(grpc.StatusCode.UNAVAILABLE)
    waits = [retry_wait(config, unavailable, n) for n in range(6)]
    for wait, base in zip(waits, [0.1, 0.2, 0.4, 0.8, 1.0, 1.0], strict=True):
        assert wait is not None
        assert base * 0.8 <= wait <= base * 1.2
    assert retry_wait(config, unavailable, 9) is None  # the tenth attempt was the last
    assert retry_wait(config, error(grpc.StatusCode.NOT_FOUND), 0) is None
    told = retry_wait(config, error(grpc.StatusCode.RESOURCE_EXHAUSTED, timedelta(seconds=3)), 0)
    assert told is not None
    assert 3.0 <= told <= 3.6


@pytest.mark.parametrize(
    "settings",
    [
        {"max_attempts": 0},
        {"initial_interval": timedelta(0)},
        {"initial_interval": timedelta(seconds=2), "max_interval": timedelta(seconds=1)},
        {"multiplier": 0.5},
        {"jitter": 1.5},
    ],
)
def test_a_bad_retry_config_is_refused(settings: dict[str, Any]) -> None:
    with pytest.raises(ValueError, match=r"must|need"):
        RetryConfig(**settings)


class Cut(search_service_pb2_grpc.SearchServiceServicer):
    """Streams that the server cuts midway: each tail after its first line, the first watch after its first
    message (as a stream that fell behind, with the token to resume from)."""

    def __init__(self) -> None:
        self.tails: list[int] = []
        self.watches: list[str] = []

    def TailRunLogs(
        self, request: Any, context: grpc.ServicerContext
    ) -> Iterator[search.TailRunLogsResponse]:
        self.tails.append(request.after_sequence)
        for sequence in range(request.after_sequence + 1, 4):
            yield search.TailRunLogsResponse(
                lines=[run_pb2.LogLine(sequence=sequence, text=f"line {sequence}")]
            )
            if len(self.tails) % 2:  # every first stream of a tail
                context.abort_with_status(refusal(code_pb2.UNAVAILABLE))

    def WatchRuns(self, request: Any, context: grpc.ServicerContext) -> Iterator[search.WatchRunsResponse]:
        self.watches.append(request.resume_token)
        if len(self.watches) == 1:
            yield search.WatchRunsResponse(runs=[run_pb2.Run(name="jobs/a/runs/1")], resume_token="t1")
            info = error_details_pb2.ErrorInfo(reason="STREAM_FELL_BEHIND", metadata={"resume_token": "t2"})
            status = status_pb2.Status(code=code_pb2.RESOURCE_EXHAUSTED, message="fell behind")
            status.details.add().Pack(info)
            context.abort_with_status(rpc_status.to_status(status))
        yield search.WatchRunsResponse(runs=[run_pb2.Run(name="jobs/a/runs/2")], resume_token="t3")


def test_cut_streams_resume_where_they_were() -> None:
    cut = Cut()  # type: ignore[abstract]
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=2))
    search_service_pb2_grpc.add_SearchServiceServicer_to_server(cut, server)
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    try:
        with Client(f"127.0.0.1:{port}", retry=FAST) as client:
            lines = [line.text for line in client.tail_run_logs("jobs/a/runs/1", follow=True)]
            watched = [run.name for changes in client.watch_runs("a") for run in changes.runs]

            async def tail_async() -> list[str]:
                async with AsyncClient(f"127.0.0.1:{port}", retry=FAST) as aio:
                    return [line.text async for line in aio.tail_run_logs("jobs/a/runs/1")]

            async_lines = asyncio.run(tail_async())
    finally:
        server.stop(None)
    assert lines == ["line 1", "line 2", "line 3"]
    assert cut.tails == [0, 1, 0, 1]  # each second stream starts after the line received
    assert watched == ["jobs/a/runs/1", "jobs/a/runs/2"]
    assert cut.watches == ["", "t2"]  # resumed from the error's token, not the last message's
    assert async_lines == ["line 1", "line 2", "line 3"]
