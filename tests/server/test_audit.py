"""The audit trail through the API, on SQLite and PostgreSQL: one event for each change, with who, what, which
resource, namespace, time and request id; none for a refused or failed call, or one that changed nothing; the
list's filter, order, paging and scope."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from datetime import UTC, datetime

import grpc
import pytest
from google.protobuf import field_mask_pb2
from sqlalchemy import update

from jobmesh.adapters.store.schema import job_runs
from jobmesh.core.ports.pipeline_store import SchedulerStore
from jobmesh.v1 import audit_pb2, job_pb2, job_service_pb2, search_service_pb2
from tests.server.callers import NAMESPACE, CallerApi, as_caller, callers_api
from tests.server.conftest import Api
from tests.server.errors import call_error, field_violations

OPERATOR = as_caller("operator")
A = audit_pb2


@pytest.fixture(scope="module")
def api(store: SchedulerStore, tmp_path_factory: pytest.TempPathFactory) -> Iterator[CallerApi]:
    with callers_api(store, tmp_path_factory.mktemp("callers")) as api:
        yield api


def cron_job() -> job_pb2.Job:
    return job_pb2.Job(
        namespace=NAMESPACE,
        schedule=job_pb2.Schedule(cron=job_pb2.Schedule.Cron(expression="0 0 1 1 *")),
        target=job_pb2.Target(command=job_pb2.Target.Command(argv=["true"])),
    )


def events(api: Api, text: str, caller: str = "admin", page_size: int = 0) -> list[audit_pb2.AuditEvent]:
    request = search_service_pb2.ListAuditEventsRequest(filter=text, page_size=page_size)
    return list(api.search.ListAuditEvents(request, metadata=as_caller(caller)).audit_events)


def test_each_change_writes_one_event_and_a_failed_one_none(api: Api) -> None:
    job_id, request_id = f"audited-{uuid.uuid4().hex[:8]}", f"req-{uuid.uuid4().hex[:8]}"
    before = datetime.now(UTC)
    job = api.jobs.CreateJob(
        job_service_pb2.CreateJobRequest(job=cron_job(), job_id=job_id, request_id=request_id),
        metadata=OPERATOR,
    ).job
    # Retried with the same request id: nothing new happens, nothing new is written.
    api.jobs.CreateJob(
        job_service_pb2.CreateJobRequest(job=cron_job(), job_id=job_id, request_id=request_id),
        metadata=OPERATOR,
    )
    job.display_name = "renamed"
    mask = field_mask_pb2.FieldMask(paths=["display_name"])
    job = api.jobs.UpdateJob(
        job_service_pb2.UpdateJobRequest(job=job, update_mask=mask), metadata=OPERATOR
    ).job
    stale = job_pb2.Job(name=job.name, display_name="stale", etag="1")
    call_error(
        lambda: api.jobs.UpdateJob(
            job_service_pb2.UpdateJobRequest(job=stale, update_mask=mask), metadata=OPERATOR
        ),
        grpc.StatusCode.ABORTED,
    )
    call_error(
        lambda: api.jobs.PauseJob(
            job_service_pb2.PauseJobRequest(name=job.name), metadata=as_caller("viewer")
        ),
        grpc.StatusCode.PERMISSION_DENIED,
    )
    api.jobs.PauseJob(job_service_pb2.PauseJobRequest(name=job.name), metadata=OPERATOR)
    api.jobs.PauseJob(job_service_pb2.PauseJobRequest(name=job.name), metadata=OPERATOR)  # already paused
    api.jobs.ResumeJob(job_service_pb2.ResumeJobRequest(name=job.name), metadata=OPERATOR)
    run = api.jobs.RunJobNow(
        job_service_pb2.RunJobNowRequest(name=job.name, request_id="now-1"), metadata=OPERATOR
    ).run
    api.jobs.CancelRun(job_service_pb2.CancelRunRequest(name=run.name), metadata=OPERATOR)
    api.jobs.CancelRun(
        job_service_pb2.CancelRunRequest(name=run.name), metadata=OPERATOR
    )  # already cancelled
    failed = api.jobs.RunJobNow(job_service_pb2.RunJobNowRequest(name=job.name), metadata=OPERATOR).run
    with api.store.engine.begin() as connection:  # type: ignore[attr-defined]
        connection.execute(
            update(job_runs).where(job_runs.c.run_id == failed.name.split("/")[-1]).values(state="FAILED")
        )
    replay = api.jobs.ReplayRun(job_service_pb2.ReplayRunRequest(name=failed.name), metadata=OPERATOR).run
    call_error(
        lambda: api.jobs.DeleteJob(job_service_pb2.DeleteJobRequest(name=job.name), metadata=OPERATOR),
        grpc.StatusCode.PERMISSION_DENIED,
    )
    api.jobs.DeleteJob(job_service_pb2.DeleteJobRequest(name=job.name), metadata=as_caller("admin"))

    trail = list(reversed(events(api, f'job = "{job.name}"')))
    assert [(e.action, e.resource, e.actor) for e in trail] == [
        (A.AUDIT_ACTION_CREATE, job.name, "operator"),
        (A.AUDIT_ACTION_UPDATE, job.name, "operator"),
        (A.AUDIT_ACTION_PAUSE, job.name, "operator"),
        (A.AUDIT_ACTION_RESUME, job.name, "operator"),
        (A.AUDIT_ACTION_RUN_NOW, run.name, "operator"),
        (A.AUDIT_ACTION_CANCEL, run.name, "operator"),
        (A.AUDIT_ACTION_RUN_NOW, failed.name, "operator"),
        (A.AUDIT_ACTION_REPLAY, replay.name, "operator"),
        (A.AUDIT_ACTION_DELETE, job.name, "admin"),
    ]
    assert {e.namespace for e in trail} == {NAMESPACE}
    assert [e.request_id for e in trail][:5] == [request_id, "", "", "", "now-1"]
    times = [e.time.ToDatetime(UTC) for e in trail]
    assert times == sorted(times)
    assert times[0] >= before.replace(microsecond=0)
    assert all(e.name.startswith("auditEvents/") for e in trail)


def test_a_batch_audits_the_items_it_created(api: Api) -> None:
    taken = f"taken-{uuid.uuid4().hex[:8]}"
    api.jobs.CreateJob(job_service_pb2.CreateJobRequest(job=cron_job(), job_id=taken))
    fresh = f"fresh-{uuid.uuid4().hex[:8]}"
    elsewhere = cron_job()
    elsewhere.namespace = "elsewhere"
    requests = [
        job_service_pb2.CreateJobRequest(job=cron_job(), job_id=fresh),
        job_service_pb2.CreateJobRequest(job=cron_job(), job_id=taken),  # ALREADY_EXISTS
        job_service_pb2.CreateJobRequest(job=elsewhere, job_id=f"x-{fresh}"),  # PERMISSION_DENIED
    ]
    results = api.jobs.BatchCreateJobs(
        job_service_pb2.BatchCreateJobsRequest(requests=requests), metadata=OPERATOR
    ).results
    codes = [grpc.StatusCode.OK, grpc.StatusCode.ALREADY_EXISTS, grpc.StatusCode.PERMISSION_DENIED]
    assert [r.status.code for r in results] == [code.value[0] for code in codes]
    assert [e.resource for e in events(api, f'job = "jobs/{fresh}"')] == [f"jobs/{fresh}"]
    assert [e.actor for e in events(api, f'job = "jobs/{taken}"')] == ["setup"]
    assert events(api, f'job = "jobs/x-{fresh}"') == []


def test_the_list_filters_pages_and_is_scoped(api: Api) -> None:
    job = api.jobs.CreateJob(job_service_pb2.CreateJobRequest(job=cron_job()), metadata=OPERATOR).job
    for _ in range(4):
        api.jobs.PauseJob(job_service_pb2.PauseJobRequest(name=job.name), metadata=OPERATOR)
        api.jobs.ResumeJob(job_service_pb2.ResumeJobRequest(name=job.name), metadata=OPERATOR)
    scope = f'job = "{job.name}"'
    pauses = events(api, f"{scope} AND action = PAUSE")
    assert len(pauses) == 4
    assert {e.action for e in pauses} == {A.AUDIT_ACTION_PAUSE}
    assert len(events(api, f'{scope} AND actor = "operator"')) == 9
    assert events(api, f'{scope} AND actor = "someone else"') == []
    assert len(events(api, f'resource = "{job.name}" AND namespace = "{NAMESPACE}"', page_size=1000)) >= 9
    middle = events(api, scope)[4].time.ToJsonString()
    assert len(events(api, f'{scope} AND time <= "{middle}"')) == 5

    pages, token = [], ""
    while True:
        request = search_service_pb2.ListAuditEventsRequest(
            filter=scope, page_size=4, page_token=token, order_by="time"
        )
        page = api.search.ListAuditEvents(request, metadata=as_caller("viewer"))
        pages.append([e.name for e in page.audit_events])
        token = page.next_page_token
        if not token:
            break
    assert [len(p) for p in pages] == [4, 4, 1]
    assert [name for p in pages for name in p] == [e.name for e in reversed(events(api, scope))]

    assert events(api, scope, caller="other-namespace") == []
    for bad in ('colour = "red"', "action = EXPLODE", "time > yesterday", "labels:team", "job = nope"):
        assert "filter" in field_violations(
            _refused(api, search_service_pb2.ListAuditEventsRequest(filter=bad))
        )
    garbage = search_service_pb2.ListAuditEventsRequest(filter=scope, page_token="garbage")
    assert "page_token" in field_violations(_refused(api, garbage))
    other_filter = search_service_pb2.ListAuditEventsRequest(
        filter="action = PAUSE", page_token=token_of(api, scope)
    )
    assert "page_token" in field_violations(_refused(api, other_filter))
    assert "order_by" in field_violations(
        _refused(api, search_service_pb2.ListAuditEventsRequest(order_by="actor"))
    )


def token_of(api: Api, text: str) -> str:
    request = search_service_pb2.ListAuditEventsRequest(filter=text, page_size=1)
    token: str = api.search.ListAuditEvents(request).next_page_token
    assert token
    return token


def _refused(api: Api, request: search_service_pb2.ListAuditEventsRequest) -> grpc.RpcError:
    return call_error(lambda: api.search.ListAuditEvents(request), grpc.StatusCode.INVALID_ARGUMENT)
