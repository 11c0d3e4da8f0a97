"""Quotas per namespace on a whole server (SQLite and PostgreSQL), against the attacks they answer: one
operator's 2,000 every-second cron jobs are refused past the namespace's cron-job quota, creates past its
job quota and runs past its runs per minute (a bulk replay's as a whole) are refused, each
`RESOURCE_EXHAUSTED` with a `QuotaFailure` naming the namespace, while other namespaces go on; an executor's
61 MiB log flood for one attempt is capped by the server, which also clamps a line's time that lies in the
future. Namespaces with quotas of their own (`namespace_quotas`) get those instead of the defaults, each
one, the others keeping the defaults."""

from __future__ import annotations

import dataclasses
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import grpc
import pytest

from jobmesh.control.v1 import executor_control_pb2 as pb
from jobmesh.core.definitions import new_run as new_run_of
from jobmesh.core.ports.pipeline_store import SchedulerStore
from jobmesh.core.records import DEFAULT_HEARTBEAT_TIMEOUT, RunState, RunTrigger
from jobmesh.core.timestamps import to_timestamp
from jobmesh.v1 import (
    job_pb2,
    job_service_pb2,
    job_service_pb2_grpc,
    run_pb2,
    search_service_pb2,
    search_service_pb2_grpc,
)
from tests.server.errors import call_error, error_info, quota_violations
from tests.server.secured import Secured, secured_server
from tests.server.test_executor_identity import RawStream, claimed, new_run, succeeded
from tests.server.tokens import bearer

CRON_QUOTA, JOB_QUOTA, RUNS_A_MINUTE, LOG_CAP = 50, 80, 20, 1024 * 1024
# Namespaces with limits of their own: tighter, looser and lifted ones.
OWN_QUOTAS: dict[str, dict[str, int | timedelta]] = {
    "tight": {"jobs": 5, "cron_jobs": 3, "min_cron_interval": timedelta(minutes=1)},
    "brisk": {"runs_per_minute": 2},
    "roomy": {"jobs": 0, "cron_jobs": CRON_QUOTA + 10},
    "chatty": {"attempt_log_bytes": 64 * 1024},
}
EXHAUSTED = grpc.StatusCode.RESOURCE_EXHAUSTED


@pytest.fixture(scope="module")
def secured(store: SchedulerStore, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Secured]:
    with secured_server(
        store,
        tmp_path_factory.mktemp("quotas"),
        quota_jobs=JOB_QUOTA,
        quota_cron_jobs=CRON_QUOTA,
        quota_min_cron_interval=timedelta(seconds=1),
        quota_runs_per_minute=RUNS_A_MINUTE,
        quota_attempt_log_bytes=LOG_CAP,
        namespace_quotas=OWN_QUOTAS,
    ) as server:
        yield server


@pytest.fixture(scope="module")
def channel(secured: Secured) -> Iterator[grpc.Channel]:
    with grpc.insecure_channel(secured.address) as channel:
        yield channel


def namespace() -> str:
    return f"team-{uuid.uuid4().hex[:8]}"


def job(namespace: str, schedule: job_pb2.Schedule) -> job_pb2.Job:
    target = job_pb2.Target(handler=job_pb2.Target.Handler(name="nothing"))
    return job_pb2.Job(schedule=schedule, target=target, namespace=namespace)


EVERY_SECOND = job_pb2.Schedule(cron=job_pb2.Schedule.Cron(expression="* * * * * *"))
NEXT_YEAR = job_pb2.Schedule(run_at=to_timestamp(datetime.now(UTC) + timedelta(days=365)))
NOW = job_pb2.Schedule(immediate=job_pb2.Schedule.Immediate())


def create(channel: grpc.Channel, secured: Secured, made: job_pb2.Job) -> Any:
    jobs = job_service_pb2_grpc.JobServiceStub(channel)
    request = job_service_pb2.CreateJobRequest(job=made)
    return jobs.CreateJob(request, metadata=bearer(secured.token("admin")), timeout=30)


def test_2000_every_second_cron_jobs_are_refused_past_the_cron_quota(
    channel: grpc.Channel, secured: Secured
) -> None:
    mine, refusals = namespace(), []
    for _ in range(2000):
        try:
            create(channel, secured, job(mine, EVERY_SECOND))
        except grpc.RpcError as error:
            refusals.append(error)
    assert len(refusals) == 2000 - CRON_QUOTA
    assert {error.code() for error in refusals} == {EXHAUSTED}
    assert error_info(refusals[0]).reason == "QUOTA_EXCEEDED"
    [(subject, description)] = quota_violations(refusals[-1])
    assert subject == f"namespace:{mine}"
    assert description.startswith(f"cron_jobs: the namespace may hold {CRON_QUOTA}")
    create(channel, secured, job(namespace(), EVERY_SECOND))  # another namespace has its own quota


def test_creates_past_the_job_quota_are_refused(channel: grpc.Channel, secured: Secured) -> None:
    mine = namespace()
    for _ in range(JOB_QUOTA):
        create(channel, secured, job(mine, NEXT_YEAR))
    error = call_error(lambda: create(channel, secured, job(mine, NEXT_YEAR)), EXHAUSTED)
    [(subject, description)] = quota_violations(error)
    assert (subject, description.split(":")[0]) == (f"namespace:{mine}", "jobs")


def test_runs_past_the_runs_per_minute_are_refused(channel: grpc.Channel, secured: Secured) -> None:
    mine = namespace()
    made = [create(channel, secured, job(mine, NOW)) for _ in range(RUNS_A_MINUTE)]
    error = call_error(lambda: create(channel, secured, job(mine, NOW)), EXHAUSTED)
    assert quota_violations(error)[0][1].startswith(f"runs_per_minute: {RUNS_A_MINUTE} runs a minute")
    jobs = job_service_pb2_grpc.JobServiceStub(channel)
    again = job_service_pb2.RunJobNowRequest(name=made[0].job.name)
    error = call_error(lambda: jobs.RunJobNow(again, metadata=bearer(secured.token("admin"))), EXHAUSTED)
    assert quota_violations(error)[0][0] == f"namespace:{mine}"


def test_a_bulk_replay_past_the_runs_per_minute_is_refused_whole(
    channel: grpc.Channel, secured: Secured, store: SchedulerStore
) -> None:
    mine = namespace()
    made = create(channel, secured, job(mine, NEXT_YEAR)).job.name  # makes no run
    record = store.get_job(made.removeprefix("jobs/"))
    now = datetime.now(UTC)
    for _ in range(RUNS_A_MINUTE + 1):
        dead = dataclasses.replace(
            new_run_of(record, now, now, RunTrigger.SCHEDULE, heartbeat_timeout=DEFAULT_HEARTBEAT_TIMEOUT),
            state=RunState.DEAD_LETTERED,
        )
        store.create_run(dead)
    jobs = job_service_pb2_grpc.JobServiceStub(channel)
    replay = job_service_pb2.BulkReplayRunsRequest(parent=made)
    admin = bearer(secured.token("admin"))
    error = call_error(lambda: jobs.BulkReplayRuns(replay, metadata=admin), EXHAUSTED)
    assert quota_violations(error)[0][0] == f"namespace:{mine}"
    search = search_service_pb2_grpc.SearchServiceStub(channel)
    replays = search_service_pb2.ListRunsRequest(parent=made, filter="trigger = REPLAY")
    assert list(search.ListRuns(replays, metadata=admin).runs) == []  # none of them was made
    replay.validate_only = True
    assert jobs.BulkReplayRuns(replay, metadata=admin).matched_count == RUNS_A_MINUTE + 1  # counting is free


FLOOD = 61 * 1024 * 1024
LINE = "x" * 16 * 1024  # the longest line the server keeps
FUTURE = to_timestamp(datetime(2100, 1, 1, tzinfo=UTC))


def test_a_61_mib_log_flood_is_capped_by_the_server_and_future_times_are_clamped(
    channel: grpc.Channel, secured: Secured
) -> None:
    stream = RawStream(channel, secured, secured.token("exec-1"), "exec-1", ("default",))
    stream.next("welcome")
    ref = new_run(channel, secured)
    assert claimed(stream, ref) == pb.CLAIM_OUTCOME_GRANTED
    batch = pb.LogBatch(
        chunks=[pb.LogChunk(attempt=ref, lines=[run_pb2.LogLine(text=LINE, time=FUTURE)] * 64)]
    )
    for _ in range(FLOOD // (64 * len(LINE))):
        stream.send(logs=batch)
    stream.send(results=pb.ResultBatch(results=[succeeded(ref)]))
    assert list(stream.next("acks").acks.recorded) == [ref]  # the logs before it are written
    stream.close()
    search = search_service_pb2_grpc.SearchServiceStub(channel)
    request = search_service_pb2.TailRunLogsRequest(name=ref.run)
    lines = [
        line
        for answer in search.TailRunLogs(request, metadata=bearer(secured.token("admin")), timeout=60)
        for line in answer.lines
    ]
    kept = [line for line in lines if line.text == LINE]
    assert len(kept) * len(LINE) <= LOG_CAP
    assert len(kept) == LOG_CAP // len(LINE)
    assert "log cap of 1,048,576 bytes per attempt is reached" in lines[-1].text
    latest = datetime.now(UTC) + timedelta(minutes=1)
    assert all(line.time.ToDatetime(UTC) < latest for line in lines)


def test_a_namespaces_own_quotas_replace_the_defaults(channel: grpc.Channel, secured: Secured) -> None:
    """`tight` may hold 5 jobs, 3 of them cron jobs firing a minute apart at the most: each refusal names its
    own limit; a namespace without quotas of its own still has the defaults."""
    every_minute = job_pb2.Schedule(cron=job_pb2.Schedule.Cron(expression="* * * * *"))
    error = call_error(lambda: create(channel, secured, job("tight", EVERY_SECOND)), EXHAUSTED)
    [(subject, description)] = quota_violations(error)
    assert subject == "namespace:tight"
    assert description.startswith("min_cron_interval: its cron jobs may fire every 60 s at the most")
    for _ in range(3):
        create(channel, secured, job("tight", every_minute))
    error = call_error(lambda: create(channel, secured, job("tight", every_minute)), EXHAUSTED)
    assert quota_violations(error)[0][1].startswith("cron_jobs: the namespace may hold 3")
    for _ in range(2):
        create(channel, secured, job("tight", NEXT_YEAR))
    error = call_error(lambda: create(channel, secured, job("tight", NEXT_YEAR)), EXHAUSTED)
    assert quota_violations(error) == [
        ("namespace:tight", "jobs: the namespace may hold 5; this would make 6")
    ]
    assert error_info(error).reason == "QUOTA_EXCEEDED"
    other = namespace()
    for _ in range(4):
        create(channel, secured, job(other, EVERY_SECOND))  # the defaults: 1 s apart, 50 cron jobs


def test_a_namespaces_quota_may_be_looser_or_lifted(channel: grpc.Channel, secured: Secured) -> None:
    """`roomy` holds more jobs than the default quota lets any other namespace hold (none for it), and more
    cron jobs: 10 past the default, then refused at its own."""
    for _ in range(JOB_QUOTA + 1):
        create(channel, secured, job("roomy", NEXT_YEAR))
    for _ in range(CRON_QUOTA + 10):
        create(channel, secured, job("roomy", EVERY_SECOND))
    error = call_error(lambda: create(channel, secured, job("roomy", EVERY_SECOND)), EXHAUSTED)
    assert quota_violations(error)[0][1].startswith(f"cron_jobs: the namespace may hold {CRON_QUOTA + 10};")


def test_a_namespaces_own_runs_per_minute(channel: grpc.Channel, secured: Secured) -> None:
    create(channel, secured, job("brisk", NOW))
    create(channel, secured, job("brisk", NOW))
    error = call_error(lambda: create(channel, secured, job("brisk", NOW)), EXHAUSTED)
    assert quota_violations(error) == [
        ("namespace:brisk", "runs_per_minute: 2 runs a minute; 1 more now would pass it")
    ]
    for _ in range(3):
        create(channel, secured, job(namespace(), NOW))  # the default: 20 a minute


def test_a_namespaces_own_log_cap_is_applied_by_the_server(channel: grpc.Channel, secured: Secured) -> None:
    """The flood of an attempt of `chatty`, whose cap is 64 KiB, keeps 4 lines of 16 KiB; one of the default
    namespace on the same stream keeps its default 1 MiB."""
    stream = RawStream(channel, secured, secured.token("exec-1"), "exec-1", ("default",))
    stream.next("welcome")
    refs = {"chatty": new_run(channel, secured, namespace="chatty"), "default": new_run(channel, secured)}
    for ref in refs.values():
        assert claimed(stream, ref) == pb.CLAIM_OUTCOME_GRANTED
    for _ in range(LOG_CAP // (64 * len(LINE)) + 1):
        chunks = [pb.LogChunk(attempt=ref, lines=[run_pb2.LogLine(text=LINE)] * 64) for ref in refs.values()]
        stream.send(logs=pb.LogBatch(chunks=chunks))
    stream.send(results=pb.ResultBatch(results=[succeeded(ref) for ref in refs.values()]))
    assert sorted(stream.next("acks").acks.recorded, key=str) == sorted(refs.values(), key=str)
    stream.close()
    search = search_service_pb2_grpc.SearchServiceStub(channel)
    for name, cap in (("chatty", 64 * 1024), ("default", LOG_CAP)):
        request = search_service_pb2.TailRunLogsRequest(name=refs[name].run)
        answers = search.TailRunLogs(request, metadata=bearer(secured.token("admin")), timeout=60)
        lines = [line for answer in answers for line in answer.lines]
        assert len([line for line in lines if line.text == LINE]) == cap // len(LINE), name
        assert f"log cap of {cap:,} bytes per attempt is reached" in lines[-1].text
