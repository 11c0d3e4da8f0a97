"""JobService and SearchService through a real gRPC server, against SQLite and PostgreSQL."""

from __future__ import annotations

import uuid
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime, timedelta

import grpc
import pytest
from google.protobuf import field_mask_pb2

from jobmesh.v1 import job_pb2, job_service_pb2, run_pb2, search_service_pb2
from tests.server.conftest import Api
from tests.server.errors import call_error, error_info, field_violations


def unique(prefix: str = "job") -> str:
    return f"{prefix}-{uuid.uuid4().hex[:10]}"


def command_job(**schedule: object) -> job_pb2.Job:
    job = job_pb2.Job(
        display_name="echo",
        labels={"team": "billing"},
        target=job_pb2.Target(command=job_pb2.Target.Command(argv=["echo", "hello"])),
    )
    if not schedule:
        job.schedule.immediate.SetInParent()
    elif "run_at" in schedule:
        job.schedule.run_at.FromDatetime(schedule["run_at"])  # type: ignore[arg-type]
    else:
        job.schedule.cron.CopyFrom(job_pb2.Schedule.Cron(**schedule))  # type: ignore[arg-type]
    return job


def create(
    api: Api, job: job_pb2.Job, job_id: str = "", request_id: str = ""
) -> job_service_pb2.CreateJobResponse:
    request = job_service_pb2.CreateJobRequest(job=job, job_id=job_id or unique(), request_id=request_id)
    response: job_service_pb2.CreateJobResponse = api.jobs.CreateJob(request)
    return response


def test_immediate_job_creates_its_run_at_once(api: Api) -> None:
    before = datetime.now(UTC)
    response = create(api, command_job())
    assert response.job.name.startswith("jobs/")
    assert response.job.state == job_pb2.JOB_STATE_COMPLETED
    assert response.job.etag == "1"
    assert response.run.name.startswith(response.job.name + "/runs/")
    assert response.run.state == run_pb2.RUN_STATE_SCHEDULED
    assert response.run.trigger == run_pb2.RUN_TRIGGER_SCHEDULE
    assert response.run.schedule_time.ToDatetime(UTC) >= before - timedelta(seconds=1)
    fetched = api.search.GetRun(search_service_pb2.GetRunRequest(name=response.run.name)).run
    assert fetched.name == response.run.name


def test_run_at_job_keeps_its_time(api: Api) -> None:
    at = (datetime.now(UTC) + timedelta(minutes=10)).replace(microsecond=0)
    response = create(api, command_job(run_at=at))
    assert response.run.schedule_time.ToDatetime(UTC) == at
    assert response.run.due_time.ToDatetime(UTC) == at


def test_cron_job_far_occurrence_waits_for_the_watcher(api: Api) -> None:
    response = create(api, command_job(expression="0 3 * * *", time_zone="Europe/Paris"))
    assert response.job.state == job_pb2.JOB_STATE_ACTIVE
    assert not response.HasField("run")
    next_run = response.job.next_run_time.ToDatetime(UTC)
    assert next_run > datetime.now(UTC)
    assert next_run.astimezone(__import__("zoneinfo").ZoneInfo("Europe/Paris")).hour == 3


def test_every_second_cron_creates_its_first_occurrence_at_once(api: Api) -> None:
    response = create(api, command_job(expression="* * * * * *"))
    assert response.run.state == run_pb2.RUN_STATE_SCHEDULED
    first = response.run.schedule_time.ToDatetime(UTC)
    # The next fire time from when the answer was made: the run's own time, or a later one if it has passed.
    assert response.job.next_run_time.ToDatetime(UTC) in {first, first + timedelta(seconds=1)}


def test_get_missing_job_is_not_found(api: Api) -> None:
    error = call_error(
        lambda: api.jobs.GetJob(job_service_pb2.GetJobRequest(name="jobs/nope")), grpc.StatusCode.NOT_FOUND
    )
    assert error_info(error).metadata["resource"] == "jobs/nope"


def test_bad_definitions_list_every_violation(api: Api) -> None:
    job = job_pb2.Job(
        schedule=job_pb2.Schedule(
            cron=job_pb2.Schedule.Cron(expression="61 * * * *", time_zone="Mars/Olympus")
        ),
        target=job_pb2.Target(command=job_pb2.Target.Command(argv=[])),
    )
    job.execution_timeout.seconds = -5
    request = job_service_pb2.CreateJobRequest(job=job, job_id="Bad_Id")
    error = call_error(lambda: api.jobs.CreateJob(request), grpc.StatusCode.INVALID_ARGUMENT)
    violations = field_violations(error)
    assert set(violations) >= {
        "job_id",
        "job.schedule.cron.expression",
        "job.schedule.cron.time_zone",
        "job.target.command.argv",
        "job.execution_timeout",
    }


@pytest.mark.parametrize(
    ("mutate", "field"),
    [
        (
            lambda job: job.schedule.run_at.FromDatetime(datetime.now(UTC) + timedelta(days=4000)),
            "job.schedule.run_at",
        ),
        (
            lambda job: job.target.CopyFrom(
                job_pb2.Target(handler=job_pb2.Target.Handler(name="h", payload=b"x" * 200_000))
            ),
            "job.target.handler.payload",
        ),
        (lambda job: job.labels.update({"Bad Key": "v"}), "job.labels['Bad Key']"),
        (lambda job: setattr(job, "display_name", "nul\x00byte"), "job.display_name"),
        (lambda job: job.retry_policy.initial_backoff.FromSeconds(-1), "job.retry_policy.initial_backoff"),
        (lambda job: setattr(job, "priority", 42), "job.priority"),
        (lambda job: job.ClearField("target"), "job.target"),
    ],
)
def test_each_kind_of_bad_input_names_its_field(api: Api, mutate: object, field: str) -> None:
    job = command_job()
    mutate(job)  # type: ignore[operator]
    request = job_service_pb2.CreateJobRequest(job=job)
    error = call_error(lambda: api.jobs.CreateJob(request), grpc.StatusCode.INVALID_ARGUMENT)
    assert field in field_violations(error)


def test_concurrent_single_creates_each_get_their_own_job_and_one_request_id_makes_one(api: Api) -> None:
    """Creates of many callers at once share transactions (group commit): each is answered with its own job,
    a taken id is refused to its caller alone, and one request id still makes one job."""
    job = command_job(run_at=datetime.now(UTC) + timedelta(hours=1))
    request_id, taken = unique("req"), unique("taken")
    api.jobs.CreateJob(job_service_pb2.CreateJobRequest(job=job, job_id=taken))

    def create(n: int) -> str:
        if n % 4 == 0:
            request = job_service_pb2.CreateJobRequest(job=job, request_id=request_id)
        elif n % 4 == 1:
            request = job_service_pb2.CreateJobRequest(job=job, job_id=taken)
        else:
            request = job_service_pb2.CreateJobRequest(job=job, job_id=f"{taken}-{n}")
        try:
            return api.jobs.CreateJob(request, timeout=60).job.name
        except grpc.RpcError as error:
            return str(error.code())

    with ThreadPoolExecutor(32) as pool:
        names = list(pool.map(create, range(64)))
    assert len({names[n] for n in range(0, 64, 4)}) == 1
    assert names[0].startswith("jobs/")
    assert {names[n] for n in range(1, 64, 4)} == {str(grpc.StatusCode.ALREADY_EXISTS)}
    assert [names[n] for n in range(64) if n % 4 >= 2] == [
        f"jobs/{taken}-{n}" for n in range(64) if n % 4 >= 2
    ]


def test_request_id_makes_create_idempotent(api: Api) -> None:
    job = command_job(run_at=datetime.now(UTC) + timedelta(hours=1))
    request_id = unique("req")
    first = api.jobs.CreateJob(job_service_pb2.CreateJobRequest(job=job, request_id=request_id))
    again = api.jobs.CreateJob(job_service_pb2.CreateJobRequest(job=job, request_id=request_id))
    assert again.job.name == first.job.name
    assert again.run.name == first.run.name
    job.display_name = "something else"
    error = call_error(
        lambda: api.jobs.CreateJob(job_service_pb2.CreateJobRequest(job=job, request_id=request_id)),
        grpc.StatusCode.ALREADY_EXISTS,
    )
    assert error_info(error).reason == "REQUEST_ID_REUSED"


def test_taken_job_id_is_already_exists(api: Api) -> None:
    job_id = unique()
    create(api, command_job(), job_id=job_id)
    call_error(lambda: create(api, command_job(), job_id=job_id), grpc.StatusCode.ALREADY_EXISTS)


def test_batch_create_reports_each_item(api: Api) -> None:
    taken = unique()
    create(api, command_job(), job_id=taken)
    good = job_service_pb2.CreateJobRequest(job=command_job())
    bad = job_service_pb2.CreateJobRequest(job=job_pb2.Job())
    dup = job_service_pb2.CreateJobRequest(job=command_job(), job_id=taken)
    response = api.jobs.BatchCreateJobs(
        job_service_pb2.BatchCreateJobsRequest(requests=[good, bad, dup, good])
    )
    codes = [result.status.code for result in response.results]
    assert codes == [
        grpc.StatusCode.OK.value[0],
        grpc.StatusCode.INVALID_ARGUMENT.value[0],
        grpc.StatusCode.ALREADY_EXISTS.value[0],
        grpc.StatusCode.OK.value[0],
    ]
    assert response.results[0].job.name != response.results[3].job.name
    assert response.results[1].status.details, "per-item errors carry details"


def test_batch_create_answers_names_and_times_unless_asked_for_whole_resources(api: Api) -> None:
    due = datetime.now(UTC).replace(microsecond=0) + timedelta(hours=3)
    request = job_service_pb2.CreateJobRequest(job=command_job(run_at=due))
    [basic] = api.jobs.BatchCreateJobs(job_service_pb2.BatchCreateJobsRequest(requests=[request])).results
    assert basic.job.name.startswith("jobs/")
    assert basic.run.name.startswith(f"{basic.job.name}/runs/")
    assert basic.run.schedule_time.ToDatetime(UTC) == due
    assert basic.run.state == run_pb2.RUN_STATE_SCHEDULED
    assert not basic.job.HasField("target")
    assert not basic.run.HasField("create_time")
    assert api.jobs.GetJob(job_service_pb2.GetJobRequest(name=basic.job.name)).job.HasField("target")

    full_view = job_service_pb2.BATCH_CREATE_JOBS_VIEW_FULL
    full_request = job_service_pb2.BatchCreateJobsRequest(requests=[request], view=full_view)
    [full] = api.jobs.BatchCreateJobs(full_request).results
    assert full.job.HasField("target")
    assert full.job.HasField("create_time")
    assert full.run.HasField("create_time")
    assert full.run.schedule_time.ToDatetime(UTC) == due


def test_batch_create_refuses_an_unknown_view(api: Api) -> None:
    request = job_service_pb2.BatchCreateJobsRequest(
        requests=[job_service_pb2.CreateJobRequest(job=command_job())],
        view=job_service_pb2.BatchCreateJobsView.ValueType(7),  # a number no view has
    )
    error = call_error(lambda: api.jobs.BatchCreateJobs(request), grpc.StatusCode.INVALID_ARGUMENT)
    assert "view" in field_violations(error)


def test_batch_create_limits(api: Api) -> None:
    call_error(
        lambda: api.jobs.BatchCreateJobs(job_service_pb2.BatchCreateJobsRequest()),
        grpc.StatusCode.INVALID_ARGUMENT,
    )
    many = [job_service_pb2.CreateJobRequest(job=command_job())] * 1001
    call_error(
        lambda: api.jobs.BatchCreateJobs(job_service_pb2.BatchCreateJobsRequest(requests=many)),
        grpc.StatusCode.INVALID_ARGUMENT,
    )


def test_batch_of_a_thousand(api: Api) -> None:
    label = unique("batch")
    requests = []
    for _ in range(1000):
        job = command_job(run_at=datetime.now(UTC) + timedelta(hours=2))
        job.labels["batch"] = label
        requests.append(job_service_pb2.CreateJobRequest(job=job))
    response = api.jobs.BatchCreateJobs(job_service_pb2.BatchCreateJobsRequest(requests=requests))
    assert all(result.status.code == 0 for result in response.results)
    seen: set[str] = set()
    token = ""
    while True:
        page = api.search.ListJobs(
            search_service_pb2.ListJobsRequest(
                filter=f'labels.batch = "{label}"', page_size=300, page_token=token
            )
        )
        seen.update(job.name for job in page.jobs)
        token = page.next_page_token
        if not token:
            break
    assert len(seen) == 1000


def test_update_with_mask_and_etag(api: Api) -> None:
    job = create(api, command_job(expression="0 * * * *")).job
    change = job_pb2.Job(name=job.name, display_name="renamed", etag=job.etag, queue="ignored-not-in-mask")
    updated = api.jobs.UpdateJob(
        job_service_pb2.UpdateJobRequest(
            job=change, update_mask=field_mask_pb2.FieldMask(paths=["display_name"])
        )
    ).job
    assert updated.display_name == "renamed"
    assert updated.queue == ""  # not in the mask: unchanged
    assert updated.etag != job.etag
    assert updated.target == job.target
    stale = api.jobs.UpdateJob
    error = call_error(
        lambda: stale(
            job_service_pb2.UpdateJobRequest(
                job=change, update_mask=field_mask_pb2.FieldMask(paths=["display_name"])
            )
        ),
        grpc.StatusCode.ABORTED,
    )
    assert error_info(error).metadata["current_etag"] == updated.etag


def test_update_schedule_recomputes_next_run(api: Api) -> None:
    job = create(api, command_job(expression="0 3 * * *")).job
    change = job_pb2.Job(
        name=job.name, schedule=job_pb2.Schedule(cron=job_pb2.Schedule.Cron(expression="30 4 * * *"))
    )
    updated = api.jobs.UpdateJob(
        job_service_pb2.UpdateJobRequest(job=change, update_mask=field_mask_pb2.FieldMask(paths=["schedule"]))
    ).job
    next_run = updated.next_run_time.ToDatetime(UTC)
    assert (next_run.hour, next_run.minute) == (4, 30)


def test_update_schedule_replaces_pending_one_shot_run(api: Api) -> None:
    at = datetime.now(UTC) + timedelta(hours=1)
    created = create(api, command_job(run_at=at))
    later = (at + timedelta(hours=1)).replace(microsecond=0)
    change = job_pb2.Job(name=created.job.name)
    change.schedule.run_at.FromDatetime(later)
    api.jobs.UpdateJob(
        job_service_pb2.UpdateJobRequest(job=change, update_mask=field_mask_pb2.FieldMask(paths=["schedule"]))
    )
    request = search_service_pb2.ListRunsRequest(parent=created.job.name, show_upcoming=True)
    runs = api.search.ListRuns(request).runs
    states = {run.name: run.state for run in runs}
    assert states[created.run.name] == run_pb2.RUN_STATE_CANCELLED
    pending = [run for run in runs if run.state == run_pb2.RUN_STATE_SCHEDULED]
    assert [run.schedule_time.ToDatetime(UTC) for run in pending] == [later]


def test_update_rejects_bad_masks_and_bad_results(api: Api) -> None:
    job = create(api, command_job(expression="0 * * * *")).job
    error = call_error(
        lambda: api.jobs.UpdateJob(
            job_service_pb2.UpdateJobRequest(
                job=job_pb2.Job(name=job.name), update_mask=field_mask_pb2.FieldMask(paths=["state"])
            )
        ),
        grpc.StatusCode.INVALID_ARGUMENT,
    )
    assert "update_mask" in field_violations(error)
    error = call_error(
        lambda: api.jobs.UpdateJob(
            job_service_pb2.UpdateJobRequest(
                job=job_pb2.Job(name=job.name), update_mask=field_mask_pb2.FieldMask(paths=["target"])
            )
        ),
        grpc.StatusCode.INVALID_ARGUMENT,
    )
    assert "job.target" in field_violations(error)


def test_pause_and_resume(api: Api) -> None:
    job = create(api, command_job(expression="*/5 * * * *")).job
    paused = api.jobs.PauseJob(job_service_pb2.PauseJobRequest(name=job.name)).job
    assert paused.state == job_pb2.JOB_STATE_PAUSED
    assert api.jobs.PauseJob(job_service_pb2.PauseJobRequest(name=job.name)).job.etag == paused.etag
    resumed = api.jobs.ResumeJob(job_service_pb2.ResumeJobRequest(name=job.name)).job
    assert resumed.state == job_pb2.JOB_STATE_ACTIVE
    assert resumed.next_run_time.ToDatetime(UTC) > datetime.now(UTC)
    one_shot = create(api, command_job()).job
    error = call_error(
        lambda: api.jobs.PauseJob(job_service_pb2.PauseJobRequest(name=one_shot.name)),
        grpc.StatusCode.FAILED_PRECONDITION,
    )
    assert error_info(error).reason == "JOB_COMPLETED"


def test_delete_cancels_pending_runs_and_keeps_history(api: Api) -> None:
    created = create(api, command_job(run_at=datetime.now(UTC) + timedelta(hours=1)))
    call_error(
        lambda: api.jobs.DeleteJob(job_service_pb2.DeleteJobRequest(name=created.job.name, etag="999")),
        grpc.StatusCode.ABORTED,
    )
    deleted = api.jobs.DeleteJob(
        job_service_pb2.DeleteJobRequest(name=created.job.name, etag=created.job.etag)
    )
    assert deleted.job.state == job_pb2.JOB_STATE_DELETED
    assert deleted.cancelled_run_count == 1
    call_error(
        lambda: api.jobs.GetJob(job_service_pb2.GetJobRequest(name=created.job.name)),
        grpc.StatusCode.NOT_FOUND,
    )
    run = api.search.GetRun(search_service_pb2.GetRunRequest(name=created.run.name)).run
    assert run.state == run_pb2.RUN_STATE_CANCELLED
    listed = api.search.ListJobs(
        search_service_pb2.ListJobsRequest(filter="state = DELETED", show_deleted=True, page_size=1000)
    )
    assert created.job.name in {job.name for job in listed.jobs}


def test_run_now_cancel_and_replay_rules(api: Api) -> None:
    job = create(api, command_job(expression="0 0 1 1 *")).job
    request_id = unique("req")
    run = api.jobs.RunJobNow(job_service_pb2.RunJobNowRequest(name=job.name, request_id=request_id)).run
    assert run.trigger == run_pb2.RUN_TRIGGER_RUN_NOW
    again = api.jobs.RunJobNow(job_service_pb2.RunJobNowRequest(name=job.name, request_id=request_id)).run
    assert again.name == run.name
    error = call_error(
        lambda: api.jobs.ReplayRun(job_service_pb2.ReplayRunRequest(name=run.name)),
        grpc.StatusCode.FAILED_PRECONDITION,
    )
    assert error_info(error).reason == "RUN_NOT_REPLAYABLE"
    cancelled = api.jobs.CancelRun(job_service_pb2.CancelRunRequest(name=run.name, reason="not needed")).run
    assert cancelled.state == run_pb2.RUN_STATE_CANCELLED
    assert cancelled.error.message == "not needed"
    call_error(
        lambda: api.jobs.CancelRun(job_service_pb2.CancelRunRequest(name=job.name + "/runs/zzz")),
        grpc.StatusCode.NOT_FOUND,
    )
    call_error(
        lambda: api.jobs.CancelRun(job_service_pb2.CancelRunRequest(name="runs/zzz")),
        grpc.StatusCode.INVALID_ARGUMENT,
    )


def test_list_jobs_filters_orders_and_pages(api: Api) -> None:
    team = unique("team")
    names = []
    for index in range(7):
        job = command_job(expression="0 * * * *")
        job.labels["team"] = team
        job.display_name = f"job {index}"
        names.append(create(api, job).job.name)
    pages: list[list[str]] = []
    token = ""
    while True:
        page = api.search.ListJobs(
            search_service_pb2.ListJobsRequest(
                filter=f'labels.team = "{team}" AND schedule = CRON AND state = ACTIVE',
                order_by="display_name desc",
                page_size=3,
                page_token=token,
            )
        )
        pages.append([job.name for job in page.jobs])
        token = page.next_page_token
        if not token:
            break
    assert [len(page) for page in pages] == [3, 3, 1]
    assert [name for page in pages for name in page] == list(reversed(names))
    error = call_error(
        lambda: api.search.ListJobs(search_service_pb2.ListJobsRequest(filter="colour = red")),
        grpc.StatusCode.INVALID_ARGUMENT,
    )
    assert "filter" in field_violations(error)
    call_error(
        lambda: api.search.ListJobs(search_service_pb2.ListJobsRequest(page_token="garbage")),
        grpc.StatusCode.INVALID_ARGUMENT,
    )


def test_list_runs_across_jobs_with_time_filter(api: Api) -> None:
    team = unique("team")
    job = command_job()
    job.labels["team"] = team
    created = create(api, job)
    since = (datetime.now(UTC) - timedelta(minutes=1)).isoformat().replace("+00:00", "Z")
    runs = api.search.ListRuns(
        search_service_pb2.ListRunsRequest(
            parent="jobs/-",
            filter=f'labels.team = "{team}" AND state != CANCELLED AND schedule_time > "{since}"',
        )
    ).runs
    assert [run.name for run in runs] == [created.run.name]
    call_error(
        lambda: api.search.ListRuns(search_service_pb2.ListRunsRequest(parent="jobs/never-existed")),
        grpc.StatusCode.NOT_FOUND,
    )


def test_watch_runs_streams_changes(api: Api) -> None:
    created = create(api, command_job(run_at=datetime.now(UTC) + timedelta(hours=1)))
    request = search_service_pb2.WatchRunsRequest(parent=created.job.name, show_upcoming=True)
    stream = api.search.WatchRuns(request, timeout=20)
    try:
        first = next(stream)
        assert [run.name for run in first.runs] == [created.run.name]
        api.jobs.CancelRun(job_service_pb2.CancelRunRequest(name=created.run.name))
        # The create may come again as a change (it can reach the feed after the first page was read).
        seen: list[tuple[str, int]] = []
        while not seen or seen[-1][1] != run_pb2.RUN_STATE_CANCELLED:
            seen += [(run.name, run.state) for run in next(stream).runs]
        assert {name for name, _ in seen} == {created.run.name}
        assert {state for _, state in seen} <= {run_pb2.RUN_STATE_SCHEDULED, run_pb2.RUN_STATE_CANCELLED}
    finally:
        stream.cancel()


def test_tail_logs_of_a_run_without_lines_ends(api: Api) -> None:
    created = create(api, command_job())
    api.jobs.CancelRun(job_service_pb2.CancelRunRequest(name=created.run.name))
    lines = list(
        api.search.TailRunLogs(
            search_service_pb2.TailRunLogsRequest(name=created.run.name, follow=True), timeout=10
        )
    )
    assert lines == []
