"""Job ids are global, namespaces are not (SQLite and PostgreSQL): a create of an id that another namespace's
job holds is refused ALREADY_EXISTS, with the very answer a taken id of the caller's own namespace gets. It
names the id and nothing of the other job (its namespace, etag, spec, labels, run), and a create replayed
with the other job's `request_id` does not return that job."""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import grpc
import pytest
from grpc_status import rpc_status

from jobmesh.core.ports.pipeline_store import SchedulerStore
from jobmesh.v1 import job_pb2, job_service_pb2
from tests.server.callers import NAMESPACE, OTHER_NAMESPACE, CallerApi, as_caller, callers_api
from tests.server.errors import call_error, error_info

ALREADY_EXISTS = grpc.StatusCode.ALREADY_EXISTS
# What only namespace A's callers may read of A's job.
PRIVATE = "payroll-export-2026"


@pytest.fixture(scope="module")
def api(store: SchedulerStore, tmp_path_factory: pytest.TempPathFactory) -> Iterator[CallerApi]:
    with callers_api(store, tmp_path_factory.mktemp("taken")) as api:
        yield api


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:10]}"


def job_in(namespace: str, *, private: bool = False) -> job_pb2.Job:
    text = PRIVATE if private else "echo"
    job = job_pb2.Job(
        display_name=text,
        namespace=namespace,
        labels={"report": text},
        target=job_pb2.Target(command=job_pb2.Target.Command(argv=["echo", text])),
    )
    job.schedule.immediate.SetInParent()
    return job


def create_as(
    api: CallerApi, caller: str, job: job_pb2.Job, job_id: str, request_id: str = ""
) -> job_service_pb2.CreateJobResponse:
    request = job_service_pb2.CreateJobRequest(job=job, job_id=job_id, request_id=request_id)
    response: job_service_pb2.CreateJobResponse = api.jobs.CreateJob(request, metadata=as_caller(caller))
    return response


def a_job_of_namespace_a(api: CallerApi, request_id: str = "") -> job_service_pb2.CreateJobResponse:
    return create_as(api, "operator", job_in(NAMESPACE, private=True), unique("theirs"), request_id)


def answer(error: grpc.RpcError, job_id: str) -> tuple[object, ...]:
    """All a refused caller reads, with the id it sent written as `ID`."""
    status = rpc_status.from_call(error)
    assert status is not None
    info = error_info(error)
    metadata = {key: value.replace(job_id, "ID") for key, value in info.metadata.items()}
    kinds = sorted(detail.type_url for detail in status.details)
    return error.code(), (error.details() or "").replace(job_id, "ID"), info.reason, metadata, kinds


def assert_reveals_nothing_of(error: grpc.RpcError, theirs: job_pb2.Job) -> None:
    status = rpc_status.from_call(error)
    assert status is not None
    everything = status.SerializeToString() + repr(error.trailing_metadata()).encode()
    for private in (PRIVATE, NAMESPACE, theirs.create_time.ToJsonString()):
        assert private.encode() not in everything, private
    assert set(error_info(error).metadata) == {"resource"}  # no etag (a bare version number), no state


def test_a_taken_id_of_another_namespace_gets_the_answer_a_taken_id_of_ones_own_gets(api: CallerApi) -> None:
    theirs = a_job_of_namespace_a(api).job
    taken_id = theirs.name.removeprefix("jobs/")
    own_id = create_as(api, "other-namespace", job_in(OTHER_NAMESPACE), unique("own")).job.name[5:]

    across = call_error(
        lambda: create_as(api, "other-namespace", job_in(OTHER_NAMESPACE), taken_id), ALREADY_EXISTS
    )
    at_home = call_error(
        lambda: create_as(api, "other-namespace", job_in(OTHER_NAMESPACE), own_id), ALREADY_EXISTS
    )

    assert answer(across, taken_id) == answer(at_home, own_id)
    assert dict(error_info(across).metadata) == {"resource": theirs.name}
    assert_reveals_nothing_of(across, theirs)


def test_a_replay_from_another_namespace_does_not_return_the_other_namespaces_job(api: CallerApi) -> None:
    request_id = unique("req")
    mine = a_job_of_namespace_a(api, request_id)
    taken_id = mine.job.name.removeprefix("jobs/")
    replayed = job_in(OTHER_NAMESPACE, private=True)  # A's request word for word, in B's namespace

    error = call_error(
        lambda: create_as(api, "other-namespace", replayed, taken_id, request_id), ALREADY_EXISTS
    )
    assert error_info(error).reason == "ALREADY_EXISTS"
    assert_reveals_nothing_of(error, mine.job)
    batch = job_service_pb2.BatchCreateJobsRequest(
        requests=[job_service_pb2.CreateJobRequest(job=replayed, job_id=taken_id, request_id=request_id)],
        view=job_service_pb2.BATCH_CREATE_JOBS_VIEW_FULL,
    )
    [result] = api.jobs.BatchCreateJobs(batch, metadata=as_caller("other-namespace")).results
    assert result.status.code == ALREADY_EXISTS.value[0]
    assert not result.HasField("job")
    assert not result.HasField("run")
    assert PRIVATE.encode() not in result.SerializeToString()
    assert NAMESPACE.encode() not in result.SerializeToString()

    # A's own replay is answered with A's job: the refusal above is not a replay that failed by chance.
    again = create_as(api, "operator", job_in(NAMESPACE, private=True), taken_id, request_id)
    assert again.job == mine.job
