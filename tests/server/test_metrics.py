"""The server's metrics: creates counted once each (an idempotent replay and a refused create not at all),
every call's duration by method and status code, overload refusals by reason, and its sampled gauges."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta

import grpc
import pytest
from prometheus_client import REGISTRY

from jobmesh.core.errors import ResourceExhausted
from jobmesh.server.gauges import ServerGauges
from jobmesh.server.loop_lag import LoopLag
from jobmesh.server.stream_lag import StreamLag
from jobmesh.server.workers import Workers
from jobmesh.v1 import job_pb2, job_service_pb2
from tests.server.conftest import Api
from tests.support import eventually

CREATE = "/jobmesh.v1.JobService/CreateJob"
GET_JOB = "/jobmesh.v1.JobService/GetJob"


def value(name: str, **labels: str) -> float:
    return REGISTRY.get_sample_value(name, labels) or 0.0


def later_job() -> job_pb2.Job:
    job = job_pb2.Job(target=job_pb2.Target(command=job_pb2.Target.Command(argv=["true"])))
    job.schedule.run_at.FromDatetime(datetime.now(UTC) + timedelta(hours=1))
    return job


def test_creates_are_counted_once_each(api: Api) -> None:
    before = value("jobmesh_jobs_created_total")
    request_id = f"req-{uuid.uuid4().hex[:8]}"
    for _ in range(3):
        api.jobs.CreateJob(job_service_pb2.CreateJobRequest(job=later_job()))
    replayed = job_service_pb2.CreateJobRequest(job=later_job(), request_id=request_id)
    first = api.jobs.CreateJob(replayed)
    again = api.jobs.CreateJob(replayed)
    assert again.job.name == first.job.name  # the replay answers the job made before
    batch = job_service_pb2.BatchCreateJobsRequest(
        requests=[job_service_pb2.CreateJobRequest(job=later_job()) for _ in range(5)]
    )
    api.jobs.BatchCreateJobs(batch)
    with pytest.raises(grpc.RpcError):
        api.jobs.CreateJob(job_service_pb2.CreateJobRequest(job=later_job(), job_id="Not A Valid Id!"))
    assert value("jobmesh_jobs_created_total") - before == 3 + 1 + 5


def test_every_call_is_timed_by_method_and_status_code(api: Api) -> None:
    ok_before = value("jobmesh_rpc_duration_seconds_count", method=CREATE, code="OK")
    missing_before = value("jobmesh_rpc_duration_seconds_count", method=GET_JOB, code="NOT_FOUND")
    api.jobs.CreateJob(job_service_pb2.CreateJobRequest(job=later_job()))
    with pytest.raises(grpc.RpcError) as missing:
        api.jobs.GetJob(job_service_pb2.GetJobRequest(name="jobs/never-made"))
    assert missing.value.code() is grpc.StatusCode.NOT_FOUND
    assert value("jobmesh_rpc_duration_seconds_count", method=CREATE, code="OK") - ok_before == 1
    # An abort sends its status before the handler's frames unwind: the client may hear it first.
    eventually(
        lambda: (
            value("jobmesh_rpc_duration_seconds_count", method=GET_JOB, code="NOT_FOUND") - missing_before
        ),
        5,
        "the refused call to be timed",
    )
    assert value("jobmesh_rpc_duration_seconds_count", method=GET_JOB, code="NOT_FOUND") - missing_before == 1
    assert value("jobmesh_rpc_duration_seconds_sum", method=CREATE, code="OK") > 0


def test_overload_refusals_are_counted_by_reason() -> None:
    workers = Workers(
        StreamLag(),
        LoopLag(),
        max_pending_creates=1,
        max_stream_lag=timedelta(seconds=10),
        max_loop_lag=timedelta(seconds=10),
        retry_after=timedelta(seconds=1),
    )
    before = value("jobmesh_server_refusals_total", reason="pending_creates")
    try:
        with workers.creating(1), pytest.raises(ResourceExhausted), workers.creating(1):
            pass
    finally:
        workers.close()
    assert value("jobmesh_server_refusals_total", reason="pending_creates") - before == 1
    assert value("jobmesh_server_refusals_total", reason="loop_lag") >= 0


def test_the_gauges_sample_what_the_server_measures() -> None:
    stream_lag = StreamLag()
    waiting = stream_lag.arrived()
    gauges = ServerGauges(
        executors=lambda: 3, loop_lag=LoopLag(), stream_lag=stream_lag, pending_creates=lambda: 7
    )
    gauges.sample()
    assert value("jobmesh_executors_connected") == 3
    assert value("jobmesh_server_pending_creates") == 7
    assert value("jobmesh_server_claim_lag_seconds") > 0  # a claim still waiting counts
    stream_lag.abandoned(waiting)
