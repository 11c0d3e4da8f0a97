"""Changes by filter (issue 23): runs cancelled and replayed, jobs paused and resumed by a list filter, with
a dry-run count first, a cap per call and idempotent retries, on SQLite and PostgreSQL."""

from __future__ import annotations

import grpc
import pytest
from sqlalchemy import update

from jobmesh.adapters.store.schema import job_runs
from jobmesh.server.api import bulk_commands
from jobmesh.v1 import audit_pb2, job_pb2, job_service_pb2, run_pb2, search_service_pb2
from tests.server.conftest import Api
from tests.server.errors import call_error, field_violations
from tests.server.test_job_service import command_job, unique

PENDING = {run_pb2.RUN_STATE_SCHEDULED, run_pb2.RUN_STATE_QUEUED}


def _labelled_jobs(api: Api, count: int, **schedule: object) -> str:
    """`count` jobs labelled `batch = <a new value>` (immediate ones each with a pending run); the value."""
    batch = unique("batch")
    job = command_job(**schedule)
    job.labels["batch"] = batch
    requests = [job_service_pb2.CreateJobRequest(job=job) for _ in range(count)]
    for start in range(0, count, 1000):
        answer = api.jobs.BatchCreateJobs(
            job_service_pb2.BatchCreateJobsRequest(requests=requests[start : start + 1000]), timeout=120
        )
        assert all(result.status.code == 0 for result in answer.results)
    return batch


def _runs(api: Api, filter_text: str) -> list[run_pb2.Run]:
    runs: list[run_pb2.Run] = []
    token = ""
    while True:
        page = api.search.ListRuns(
            search_service_pb2.ListRunsRequest(
                parent="jobs/-", filter=filter_text, page_size=1000, page_token=token
            )
        )
        runs += page.runs
        if not (token := page.next_page_token):
            return runs


def _dead_letter(api: Api, runs: list[run_pb2.Run]) -> None:
    engine = api.store.engine  # type: ignore[attr-defined]
    with engine.begin() as connection:
        connection.execute(
            update(job_runs)
            .where(job_runs.c.run_id.in_([run.name.split("/")[-1] for run in runs]))
            .values(state="DEAD_LETTERED")
        )


def test_a_thousand_runs_cancelled_by_label_after_a_dry_run_count(api: Api) -> None:
    batch = _labelled_jobs(api, 1000)
    by_label = f'labels.batch = "{batch}"'
    assert {run.state for run in _runs(api, by_label)} <= PENDING
    request = job_service_pb2.BulkCancelRunsRequest(
        parent="jobs/-", filter=by_label, reason="bulk test", validate_only=True, request_id=batch
    )
    dry = api.jobs.BulkCancelRuns(request, timeout=120)
    assert (dry.matched_count, dry.changed_count, list(dry.failures)) == (1000, 0, [])
    assert {run.state for run in _runs(api, by_label)} <= PENDING  # nothing changed

    request.validate_only = False
    done = api.jobs.BulkCancelRuns(request, timeout=120)
    assert (done.matched_count, done.changed_count, list(done.failures)) == (1000, 1000, [])
    runs = _runs(api, by_label)
    assert len(runs) == 1000
    assert {(run.state, run.error.message) for run in runs} == {(run_pb2.RUN_STATE_CANCELLED, "bulk test")}

    retried = api.jobs.BulkCancelRuns(request, timeout=120)
    assert (retried.matched_count, retried.changed_count) == (0, 0)  # a retry changes nothing
    audit = api.search.ListAuditEvents(
        search_service_pb2.ListAuditEventsRequest(filter=f'resource = "{runs[0].name}"')
    )
    assert [event.action for event in audit.audit_events].count(audit_pb2.AUDIT_ACTION_CANCEL) == 1


def test_a_bulk_cancel_leaves_runs_outside_its_filter(api: Api) -> None:
    mine, other = _labelled_jobs(api, 3), _labelled_jobs(api, 2)
    request = job_service_pb2.BulkCancelRunsRequest(parent="jobs/-", filter=f'labels.batch = "{mine}"')
    assert api.jobs.BulkCancelRuns(request).changed_count == 3
    assert {run.state for run in _runs(api, f'labels.batch = "{other}"')} <= PENDING


def test_dead_letters_replayed_by_filter_once_per_request_id(api: Api) -> None:
    batch = _labelled_jobs(api, 4)
    by_label = f'labels.batch = "{batch}"'
    _dead_letter(api, _runs(api, by_label)[:3])
    request = job_service_pb2.BulkReplayRunsRequest(
        parent="jobs/-", filter=f"{by_label} AND state = DEAD_LETTERED", validate_only=True, request_id=batch
    )
    assert api.jobs.BulkReplayRuns(request).matched_count == 3
    assert not _runs(api, f"{by_label} AND trigger = REPLAY")

    request.validate_only = False
    assert api.jobs.BulkReplayRuns(request).changed_count == 3
    assert api.jobs.BulkReplayRuns(request).changed_count == 3  # the retry returns the same replays
    replays = _runs(api, f"{by_label} AND trigger = REPLAY")
    dead = {run.name for run in _runs(api, f"{by_label} AND state = DEAD_LETTERED")}
    assert len(replays) == 3
    assert {run.replay_of for run in replays} == dead


def test_jobs_paused_and_resumed_by_filter(api: Api) -> None:
    batch = _labelled_jobs(api, 3, expression="*/5 * * * *")
    by_label = f'labels.batch = "{batch}"'
    dry = api.jobs.BulkPauseJobs(job_service_pb2.BulkPauseJobsRequest(filter=by_label, validate_only=True))
    assert (dry.matched_count, dry.changed_count) == (3, 0)
    paused = api.jobs.BulkPauseJobs(job_service_pb2.BulkPauseJobsRequest(filter=by_label))
    assert (paused.matched_count, paused.changed_count) == (3, 3)
    jobs = api.search.ListJobs(search_service_pb2.ListJobsRequest(filter=by_label)).jobs
    assert {job.state for job in jobs} == {job_pb2.JOB_STATE_PAUSED}
    assert api.jobs.BulkPauseJobs(job_service_pb2.BulkPauseJobsRequest(filter=by_label)).matched_count == 0

    resumed = api.jobs.BulkResumeJobs(job_service_pb2.BulkResumeJobsRequest(filter=by_label))
    assert (resumed.matched_count, resumed.changed_count) == (3, 3)
    jobs = api.search.ListJobs(search_service_pb2.ListJobsRequest(filter=by_label)).jobs
    assert {job.state for job in jobs} == {job_pb2.JOB_STATE_ACTIVE}


def test_a_filter_past_the_cap_is_refused_and_changes_nothing(
    api: Api, monkeypatch: pytest.MonkeyPatch
) -> None:
    batch = _labelled_jobs(api, 4)
    by_label = f'labels.batch = "{batch}"'
    monkeypatch.setattr(bulk_commands, "MAX_BULK_ITEMS", 3)
    request = job_service_pb2.BulkCancelRunsRequest(parent="jobs/-", filter=by_label)
    error = call_error(lambda: api.jobs.BulkCancelRuns(request), grpc.StatusCode.INVALID_ARGUMENT)
    assert "more than the 3 one call may change" in field_violations(error)["filter"]
    assert {run.state for run in _runs(api, by_label)} <= PENDING
    request.validate_only = True
    assert api.jobs.BulkCancelRuns(request).matched_count == 4  # a dry run counts past the cap


@pytest.mark.parametrize(
    ("request_", "field"),
    [
        (job_service_pb2.BulkCancelRunsRequest(parent="jobs/-", filter="labels.batch ~ x"), "filter"),
        (job_service_pb2.BulkCancelRunsRequest(parent="jobs/-", filter="colour = red"), "filter"),
        (job_service_pb2.BulkCancelRunsRequest(parent="nope"), "parent"),
        (job_service_pb2.BulkCancelRunsRequest(parent="jobs/-", reason="x" * 1025), "reason"),
        (job_service_pb2.BulkReplayRunsRequest(parent="jobs/-", request_id="x" * 200), "request_id"),
        (job_service_pb2.BulkReplayRunsRequest(parent="jobs/-", filter="state = DONE"), "filter"),
        (job_service_pb2.BulkPauseJobsRequest(filter="attempt = 1"), "filter"),
        (job_service_pb2.BulkResumeJobsRequest(filter='name = "runs/x"'), "filter"),
    ],
    ids=lambda value: type(value).__name__ if not isinstance(value, str) else value,
)
def test_bad_input_names_its_field(api: Api, request_: object, field: str) -> None:
    method = getattr(api.jobs, type(request_).__name__.removesuffix("Request"))
    error = call_error(lambda: method(request_), grpc.StatusCode.INVALID_ARGUMENT)
    assert field in field_violations(error)


def test_a_bulk_call_on_a_missing_job_is_not_found(api: Api) -> None:
    request = job_service_pb2.BulkCancelRunsRequest(parent=f"jobs/{unique()}")
    call_error(lambda: api.jobs.BulkCancelRuns(request), grpc.StatusCode.NOT_FOUND)
