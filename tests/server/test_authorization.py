"""Access, on a server with authentication on and real tokens, on SQLite and PostgreSQL: every RPC by {no
token, bad token, expired token, viewer, operator, admin, an admin of another namespace only, an executor's
credential} gets the documented code (README, "Running it securely" and "Namespaces and roles"); lists and
feeds never show another namespace's runs; request ids do not cross namespaces."""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from itertools import islice
from pathlib import Path
from typing import Any

import grpc
import pytest
from google.protobuf import field_mask_pb2
from google.protobuf.descriptor import ServiceDescriptor
from sqlalchemy import update

from jobmesh.adapters.store.schema import job_runs
from jobmesh.control.v1 import executor_control_pb2, executor_control_pb2_grpc
from jobmesh.core.ports.pipeline_store import SchedulerStore
from jobmesh.server.auth.authorization import RPC_ROLES
from jobmesh.v1 import (
    job_pb2,
    job_service_pb2,
    run_pb2,
    search_service_pb2,
)
from tests.server.callers import (
    NAMESPACE,
    OTHER_NAMESPACE,
    CallerApi,
    Metadata,
    as_caller,
    callers_api,
)
from tests.server.conftest import Api
from tests.server.errors import error_info
from tests.server.tokens import bearer

OK, DENIED, HIDDEN = grpc.StatusCode.OK, grpc.StatusCode.PERMISSION_DENIED, grpc.StatusCode.NOT_FOUND
UNAUTHENTICATED = grpc.StatusCode.UNAUTHENTICATED
ROLE_CALLERS = ("viewer", "operator", "admin", "other-namespace")
CREDENTIALS = ("no token", "bad token", "expired token", *ROLE_CALLERS, "executor")


@pytest.fixture(scope="module")
def api(store: SchedulerStore, tmp_path_factory: pytest.TempPathFactory) -> Iterator[CallerApi]:
    with callers_api(store, tmp_path_factory.mktemp("callers")) as api:
        yield api


def credential(api: CallerApi, name: str) -> Metadata:
    """The metadata of the credential that CREDENTIALS names."""
    if name in ROLE_CALLERS:
        return as_caller(name)
    signer = api.secured.signer
    return {
        "no token": (),
        "bad token": bearer("jm_" + "0" * 43),
        "expired token": bearer(signer.token("ci", {"roles": {"*": "admin"}}, expires_in=-3600)),
        "executor": bearer(api.secured.token("exec-1")),
    }[name]


def unique(prefix: str = "job") -> str:
    return f"{prefix}-{uuid.uuid4().hex[:10]}"


def command_job(namespace: str = NAMESPACE, *, cron: bool = False) -> job_pb2.Job:
    job = job_pb2.Job(
        display_name="echo",
        namespace=namespace,
        target=job_pb2.Target(command=job_pb2.Target.Command(argv=["echo", "hello"])),
    )
    if cron:
        job.schedule.cron.expression = "0 0 1 1 *"
    else:
        job.schedule.immediate.SetInParent()
    return job


def new_job(api: Api, namespace: str = NAMESPACE) -> job_service_pb2.CreateJobResponse:
    """A job (and its first run) made by a caller who may do anything."""
    response: job_service_pb2.CreateJobResponse = api.jobs.CreateJob(
        job_service_pb2.CreateJobRequest(job=command_job(namespace), job_id=unique())
    )
    return response


def failed_run(api: Api) -> str:
    run = new_job(api).run.name
    engine = api.store.engine  # type: ignore[attr-defined]
    with engine.begin() as connection:
        connection.execute(
            update(job_runs).where(job_runs.c.run_id == run.split("/")[-1]).values(state="FAILED")
        )
    return run


# Each case: the RPC, and a call of it made with the caller's metadata (what it touches is made first).
Call = Callable[[Api, Metadata], Any]


def _create(api: Api, md: Metadata) -> Any:
    return api.jobs.CreateJob(job_service_pb2.CreateJobRequest(job=command_job()), metadata=md)


def _batch_create(api: Api, md: Metadata) -> Any:
    request = job_service_pb2.BatchCreateJobsRequest(
        requests=[job_service_pb2.CreateJobRequest(job=command_job())]
    )
    [result] = api.jobs.BatchCreateJobs(request, metadata=md).results
    if result.status.code:  # each item is checked: its status carries the code
        raise _ItemError(_CODES[result.status.code])


def _get_job(api: Api, md: Metadata) -> Any:
    return api.jobs.GetJob(job_service_pb2.GetJobRequest(name=new_job(api).job.name), metadata=md)


def _update(api: Api, md: Metadata) -> Any:
    job = new_job(api).job
    job.display_name = "renamed"
    mask = field_mask_pb2.FieldMask(paths=["display_name"])
    return api.jobs.UpdateJob(job_service_pb2.UpdateJobRequest(job=job, update_mask=mask), metadata=md)


def _delete(api: Api, md: Metadata) -> Any:
    return api.jobs.DeleteJob(job_service_pb2.DeleteJobRequest(name=new_job(api).job.name), metadata=md)


def _cron_job(api: Api) -> str:
    response = api.jobs.CreateJob(
        job_service_pb2.CreateJobRequest(job=command_job(cron=True), job_id=unique())
    )
    return str(response.job.name)


def _pause(api: Api, md: Metadata) -> Any:
    return api.jobs.PauseJob(job_service_pb2.PauseJobRequest(name=_cron_job(api)), metadata=md)


def _resume(api: Api, md: Metadata) -> Any:
    name = _cron_job(api)
    api.jobs.PauseJob(job_service_pb2.PauseJobRequest(name=name))
    return api.jobs.ResumeJob(job_service_pb2.ResumeJobRequest(name=name), metadata=md)


def _run_now(api: Api, md: Metadata) -> Any:
    return api.jobs.RunJobNow(job_service_pb2.RunJobNowRequest(name=new_job(api).job.name), metadata=md)


def _backfill(api: Api, md: Metadata) -> Any:
    end = datetime.now(UTC).replace(microsecond=0)
    request = job_service_pb2.BackfillJobRequest(name=_cron_job(api))
    request.start_time.FromDatetime(end - timedelta(hours=1))
    request.end_time.FromDatetime(end)
    return api.jobs.BackfillJob(request, metadata=md)


def _cancel(api: Api, md: Metadata) -> Any:
    return api.jobs.CancelRun(job_service_pb2.CancelRunRequest(name=new_job(api).run.name), metadata=md)


def _replay(api: Api, md: Metadata) -> Any:
    return api.jobs.ReplayRun(job_service_pb2.ReplayRunRequest(name=failed_run(api)), metadata=md)


def _bulk_cancel(api: Api, md: Metadata) -> Any:
    job = new_job(api).job.name
    request = job_service_pb2.BulkCancelRunsRequest(parent="jobs/-", filter=f'job = "{job}"')
    return api.jobs.BulkCancelRuns(request, metadata=md)


def _bulk_replay(api: Api, md: Metadata) -> Any:
    job = failed_run(api).split("/runs/", 1)[0]
    request = job_service_pb2.BulkReplayRunsRequest(parent=job)
    return api.jobs.BulkReplayRuns(request, metadata=md)


def _bulk_pause(api: Api, md: Metadata) -> Any:
    request = job_service_pb2.BulkPauseJobsRequest(filter=f'name = "{new_job(api).job.name}"')
    return api.jobs.BulkPauseJobs(request, metadata=md)


def _bulk_resume(api: Api, md: Metadata) -> Any:
    request = job_service_pb2.BulkResumeJobsRequest(filter=f'name = "{new_job(api).job.name}"')
    return api.jobs.BulkResumeJobs(request, metadata=md)


def _list_jobs(api: Api, md: Metadata) -> Any:
    return api.search.ListJobs(search_service_pb2.ListJobsRequest(), metadata=md)


def _list_runs(api: Api, md: Metadata) -> Any:
    parent = new_job(api).job.name
    return api.search.ListRuns(
        search_service_pb2.ListRunsRequest(show_upcoming=True, parent=parent), metadata=md
    )


def _list_all_runs(api: Api, md: Metadata) -> Any:
    return api.search.ListRuns(
        search_service_pb2.ListRunsRequest(show_upcoming=True, parent="jobs/-"), metadata=md
    )


def _get_run(api: Api, md: Metadata) -> Any:
    return api.search.GetRun(search_service_pb2.GetRunRequest(name=new_job(api).run.name), metadata=md)


def _watch_runs(api: Api, md: Metadata) -> Any:
    parent = new_job(api).job.name
    stream = api.search.WatchRuns(
        search_service_pb2.WatchRunsRequest(show_upcoming=True, parent=parent), metadata=md
    )
    try:
        return next(stream)
    finally:
        stream.cancel()


def _watch_all_runs(api: Api, md: Metadata) -> Any:
    stream = api.search.WatchRuns(
        search_service_pb2.WatchRunsRequest(show_upcoming=True, parent="jobs/-"), metadata=md
    )
    try:
        return next(stream)
    finally:
        stream.cancel()


def _count_runs(api: Api, md: Metadata) -> Any:
    return api.search.CountRuns(search_service_pb2.CountRunsRequest(parent="jobs/-"), metadata=md)


def _watch_run_counts(api: Api, md: Metadata) -> Any:
    request = search_service_pb2.WatchRunsRequest(parent="jobs/-", include_run_counts=True)
    stream = api.search.WatchRuns(request, metadata=md)
    try:
        return next(stream)
    finally:
        stream.cancel()


def _tail_logs(api: Api, md: Metadata) -> Any:
    name = new_job(api).run.name
    return list(api.search.TailRunLogs(search_service_pb2.TailRunLogsRequest(name=name), metadata=md))


def _preview(api: Api, md: Metadata) -> Any:
    schedule = job_pb2.Schedule(cron=job_pb2.Schedule.Cron(expression="0 * * * *"))
    return api.search.PreviewSchedule(
        search_service_pb2.PreviewScheduleRequest(schedule=schedule), metadata=md
    )


def _list_audit(api: Api, md: Metadata) -> Any:
    return api.search.ListAuditEvents(search_service_pb2.ListAuditEventsRequest(), metadata=md)


def _connect(api: Api, md: Metadata) -> Any:
    """An executor's hello as `exec-1` for the `default` queue, from the server's process (it names the
    server's in-process queue), up to the server's welcome."""
    assert isinstance(api, CallerApi)
    hello = executor_control_pb2.ConnectRequest(
        hello=executor_control_pb2.ExecutorHello(
            executor_id="exec-1",
            queues=["default"],
            hostname="test",
            in_process_queue=api.secured.in_process_queue,
        )
    )
    with grpc.insecure_channel(api.address) as channel:
        stream = executor_control_pb2_grpc.ExecutorControlStub(channel).Connect(
            iter([hello]), metadata=md, timeout=10
        )
        try:
            return next(stream)
        finally:
            stream.cancel()


@dataclass(frozen=True)
class Case:
    rpc: str  # the full method name
    call: Call
    # The code for each of ROLE_CALLERS, in order.
    role_codes: tuple[grpc.StatusCode, grpc.StatusCode, grpc.StatusCode, grpc.StatusCode]
    # An executor's credential holds no role: every RPC of the API refuses it before reading the request.
    executor_code: grpc.StatusCode = DENIED

    def codes(self) -> dict[str, grpc.StatusCode]:
        """The code for each of CREDENTIALS: a credential that is missing or invalid never reaches a role."""
        return dict(
            zip(
                CREDENTIALS,
                (UNAUTHENTICATED,) * 3 + self.role_codes + (self.executor_code,),
                strict=True,
            )
        )


_JOBS, _SEARCH = "/jobmesh.v1.JobService/", "/jobmesh.v1.SearchService/"
_EXECUTORS = "/jobmesh.control.v1.ExecutorControl/"
CASES = [
    Case(_JOBS + "CreateJob", _create, (DENIED, OK, OK, DENIED)),
    Case(_JOBS + "BatchCreateJobs", _batch_create, (DENIED, OK, OK, DENIED)),
    Case(_JOBS + "GetJob", _get_job, (OK, OK, OK, HIDDEN)),
    Case(_JOBS + "UpdateJob", _update, (DENIED, OK, OK, HIDDEN)),
    Case(_JOBS + "DeleteJob", _delete, (DENIED, DENIED, OK, HIDDEN)),
    Case(_JOBS + "PauseJob", _pause, (DENIED, OK, OK, HIDDEN)),
    Case(_JOBS + "ResumeJob", _resume, (DENIED, OK, OK, HIDDEN)),
    Case(_JOBS + "RunJobNow", _run_now, (DENIED, OK, OK, HIDDEN)),
    Case(_JOBS + "CancelRun", _cancel, (DENIED, OK, OK, HIDDEN)),
    Case(_JOBS + "ReplayRun", _replay, (DENIED, OK, OK, HIDDEN)),
    Case(_JOBS + "BackfillJob", _backfill, (DENIED, OK, OK, HIDDEN)),
    # A call by filter changes only what lies where the caller holds the role: elsewhere it finds nothing.
    Case(_JOBS + "BulkCancelRuns", _bulk_cancel, (DENIED, OK, OK, OK)),
    Case(_JOBS + "BulkReplayRuns", _bulk_replay, (DENIED, OK, OK, HIDDEN)),
    Case(_JOBS + "BulkPauseJobs", _bulk_pause, (DENIED, OK, OK, OK)),
    Case(_JOBS + "BulkResumeJobs", _bulk_resume, (DENIED, OK, OK, OK)),
    # A list or a feed of every job answers everyone with what they may see (tested below).
    Case(_SEARCH + "ListJobs", _list_jobs, (OK, OK, OK, OK)),
    Case(_SEARCH + "ListRuns", _list_runs, (OK, OK, OK, HIDDEN)),
    Case(_SEARCH + "ListRuns", _list_all_runs, (OK, OK, OK, OK)),
    Case(_SEARCH + "GetRun", _get_run, (OK, OK, OK, HIDDEN)),
    Case(_SEARCH + "WatchRuns", _watch_runs, (OK, OK, OK, HIDDEN)),
    Case(_SEARCH + "WatchRuns", _watch_all_runs, (OK, OK, OK, OK)),
    Case(_SEARCH + "WatchRuns", _watch_run_counts, (OK, OK, OK, OK)),
    Case(_SEARCH + "CountRuns", _count_runs, (OK, OK, OK, OK)),
    Case(_SEARCH + "TailRunLogs", _tail_logs, (OK, OK, OK, HIDDEN)),
    Case(_SEARCH + "PreviewSchedule", _preview, (OK, OK, OK, OK)),
    Case(_SEARCH + "ListAuditEvents", _list_audit, (OK, OK, OK, OK)),
    # Only an executor's credential, bound to that executor's name and queues, may connect as it.
    Case(_EXECUTORS + "Connect", _connect, (DENIED, DENIED, DENIED, DENIED), executor_code=OK),
]


class _ItemError(Exception):
    def __init__(self, code: grpc.StatusCode) -> None:
        super().__init__(code.name)
        self.code = code


_CODES = {code.value[0]: code for code in grpc.StatusCode}


def _outcome(call: Call, api: Api, md: Metadata) -> tuple[grpc.StatusCode, str]:
    """The call's code, and its ErrorInfo reason when it was refused."""
    try:
        call(api, md)
    except grpc.RpcError as error:
        code: grpc.StatusCode = error.code()
        return code, error_info(error).reason if code is DENIED else ""
    except _ItemError as error:
        return error.code, "PERMISSION_DENIED" if error.code is DENIED else ""
    return OK, ""


def _cases() -> Iterator[Any]:
    for case in CASES:
        for name, code in case.codes().items():
            yield pytest.param(case, name, code, id=f"{case.call.__name__.strip('_')}-{name}")


@pytest.mark.parametrize(("case", "name", "code"), list(_cases()))
def test_each_rpc_gets_the_documented_code_for_each_credential(
    api: CallerApi, case: Case, name: str, code: grpc.StatusCode
) -> None:
    assert _outcome(case.call, api, credential(api, name)) == (
        code,
        "PERMISSION_DENIED" if code is DENIED else "",
    )


def _methods(*services: ServiceDescriptor) -> set[str]:
    return {f"/{service.full_name}/{method.name}" for service in services for method in service.methods}


def test_every_rpc_has_a_case_and_every_api_rpc_a_role() -> None:
    api_methods = _methods(
        job_service_pb2.DESCRIPTOR.services_by_name["JobService"],
        search_service_pb2.DESCRIPTOR.services_by_name["SearchService"],
    )
    assert set(RPC_ROLES) == api_methods
    executor_methods = _methods(executor_control_pb2.DESCRIPTOR.services_by_name["ExecutorControl"])
    assert {case.rpc for case in CASES} == api_methods | executor_methods


def test_run_counts_cover_only_the_namespaces_the_caller_may_read(api: Api) -> None:
    new_job(api)
    new_job(api, OTHER_NAMESPACE)
    viewer = as_caller("viewer")
    counts = _count_runs(api, viewer).run_counts.counts
    assert {count.namespace for count in counts} == {NAMESPACE}
    theirs = _count_runs(api, as_caller("other-namespace")).run_counts.counts
    assert {count.namespace for count in theirs} == {OTHER_NAMESPACE}
    everyone = _count_runs(api, as_caller("setup")).run_counts.counts  # an admin of every namespace
    assert {NAMESPACE, OTHER_NAMESPACE} <= {count.namespace for count in everyone}
    pushed = _watch_run_counts(api, viewer).run_counts.counts
    assert {count.namespace for count in pushed} == {NAMESPACE}


def test_filters_and_feeds_never_show_another_namespaces_runs(api: Api) -> None:
    mine, theirs = new_job(api), new_job(api, OTHER_NAMESPACE)
    viewer = as_caller("viewer")
    asked = search_service_pb2.ListRunsRequest(
        show_upcoming=True, parent="jobs/-", filter=f'namespace = "{OTHER_NAMESPACE}"'
    )
    assert list(api.search.ListRuns(asked, metadata=viewer).runs) == []
    by_job = search_service_pb2.ListRunsRequest(
        show_upcoming=True, parent="jobs/-", filter=f'job = "{theirs.job.name}"'
    )
    assert list(api.search.ListRuns(by_job, metadata=viewer).runs) == []
    everything = api.search.ListRuns(
        search_service_pb2.ListRunsRequest(show_upcoming=True, parent="jobs/-", page_size=1000),
        metadata=viewer,
    )
    assert {run.namespace for run in everything.runs} == {NAMESPACE}
    assert mine.run.name in {run.name for run in everything.runs}
    jobs = api.search.ListJobs(search_service_pb2.ListJobsRequest(page_size=1000), metadata=viewer).jobs
    assert {job.namespace for job in jobs} == {NAMESPACE}

    watch = search_service_pb2.WatchRunsRequest(
        show_upcoming=True, parent="jobs/-", filter=f'namespace = "{OTHER_NAMESPACE}"'
    )
    stream = api.search.WatchRuns(watch, metadata=viewer)
    try:
        first = next(stream)
        assert list(first.runs) == []
        # A change in the other namespace, then one in the caller's: only the caller's comes.
        api.jobs.CancelRun(job_service_pb2.CancelRunRequest(name=theirs.run.name))
        api.jobs.CancelRun(job_service_pb2.CancelRunRequest(name=mine.run.name))
    finally:
        stream.cancel()
    everything_watch = api.search.WatchRuns(
        search_service_pb2.WatchRunsRequest(
            show_upcoming=True, parent="jobs/-", resume_token=first.resume_token
        ),
        metadata=viewer,
    )
    try:
        seen: list[run_pb2.Run] = []
        for message in islice(everything_watch, 10):
            seen.extend(message.runs)
            if mine.run.name in {run.name for run in seen}:
                break
        assert {run.namespace for run in seen} == {NAMESPACE}
        assert theirs.run.name not in {run.name for run in seen}
    finally:
        everything_watch.cancel()


def test_a_page_token_of_another_namespaces_caller_shows_nothing_of_that_namespace(api: Api) -> None:
    """A page token holds the place of the query it came from: followed by a viewer of team-a, another
    namespace's caller's token shows only team-a's runs and jobs, or is refused."""
    case = unique("case")
    for namespace in (OTHER_NAMESPACE, OTHER_NAMESPACE, OTHER_NAMESPACE, NAMESPACE):
        job = command_job(namespace)
        job.labels["case"] = case
        api.jobs.CreateJob(job_service_pb2.CreateJobRequest(job=job, job_id=unique()))
    scope = f'labels.case = "{case}"'
    runs = search_service_pb2.ListRunsRequest(show_upcoming=True, parent="jobs/-", filter=scope, page_size=1)
    jobs = search_service_pb2.ListJobsRequest(filter=scope, page_size=1)
    runs.page_token = api.search.ListRuns(runs, metadata=as_caller("other-namespace")).next_page_token
    jobs.page_token = api.search.ListJobs(jobs, metadata=as_caller("other-namespace")).next_page_token
    assert runs.page_token
    assert jobs.page_token
    seen = _followed(lambda: api.search.ListRuns(runs, metadata=as_caller("viewer")), runs, "runs")
    seen += _followed(lambda: api.search.ListJobs(jobs, metadata=as_caller("viewer")), jobs, "jobs")
    assert {item.namespace for item in seen} <= {NAMESPACE}


def _followed(call: Callable[[], Any], request: Any, field: str) -> list[Any]:
    """What the pages hold from `request`'s token on (at most 10 pages); nothing when the token is refused."""
    items: list[Any] = []
    for _ in range(10):
        try:
            page = call()
        except grpc.RpcError as error:
            if error.code() != grpc.StatusCode.INVALID_ARGUMENT:
                raise
            return items
        items += getattr(page, field)
        if not page.next_page_token:
            return items
        request.page_token = page.next_page_token
    raise AssertionError("more than 10 pages of one item")


def test_a_job_keeps_its_namespace(api: Api) -> None:
    created = new_job(api)
    assert created.job.namespace == NAMESPACE
    assert created.run.namespace == NAMESPACE
    plain = api.jobs.CreateJob(
        job_service_pb2.CreateJobRequest(job=command_job(namespace=""), job_id=unique())
    )
    assert plain.job.namespace == "default"
    assert plain.run.namespace == "default"
    job = created.job
    job.namespace = OTHER_NAMESPACE
    with pytest.raises(grpc.RpcError) as moved:
        api.jobs.UpdateJob(
            job_service_pb2.UpdateJobRequest(job=job, update_mask=field_mask_pb2.FieldMask(paths=["*"]))
        )
    assert moved.value.code() is grpc.StatusCode.INVALID_ARGUMENT
    with pytest.raises(grpc.RpcError) as bad:
        api.jobs.CreateJob(job_service_pb2.CreateJobRequest(job=command_job(namespace="Not_Valid")))
    assert bad.value.code() is grpc.StatusCode.INVALID_ARGUMENT


def test_request_ids_do_not_cross_namespaces(api: Api) -> None:
    request_id = unique("req")
    mine = api.jobs.CreateJob(job_service_pb2.CreateJobRequest(job=command_job(), request_id=request_id))
    theirs = api.jobs.CreateJob(
        job_service_pb2.CreateJobRequest(job=command_job(OTHER_NAMESPACE), request_id=request_id),
        metadata=as_caller("other-namespace"),
    )
    assert theirs.job.name != mine.job.name
    assert theirs.job.namespace == OTHER_NAMESPACE
    again = api.jobs.CreateJob(
        job_service_pb2.CreateJobRequest(job=command_job(), request_id=request_id),
        metadata=as_caller("operator"),
    )
    assert again.job.name == mine.job.name


def test_a_call_by_filter_changes_only_the_namespaces_where_the_caller_holds_the_role(api: Api) -> None:
    mine, theirs = new_job(api), new_job(api, OTHER_NAMESPACE)
    both = f'job = "{mine.job.name}"'
    cancel = job_service_pb2.BulkCancelRunsRequest(parent="jobs/-", filter=f'job = "{theirs.job.name}"')
    answer = api.jobs.BulkCancelRuns(cancel, metadata=as_caller("operator"))
    assert (answer.matched_count, answer.changed_count) == (0, 0)
    theirs_now = api.search.GetRun(search_service_pb2.GetRunRequest(name=theirs.run.name)).run
    assert theirs_now.state in (run_pb2.RUN_STATE_SCHEDULED, run_pb2.RUN_STATE_QUEUED)
    mine_only = job_service_pb2.BulkCancelRunsRequest(parent="jobs/-", filter=both)
    assert api.jobs.BulkCancelRuns(mine_only, metadata=as_caller("operator")).changed_count == 1
    refused = job_service_pb2.BulkCancelRunsRequest(parent="jobs/-", filter=both, validate_only=True)
    with pytest.raises(grpc.RpcError) as caught:
        api.jobs.BulkCancelRuns(refused, metadata=as_caller("viewer"))
    assert caught.value.code() is DENIED  # a viewer may not even count what it would change


def test_the_readme_documents_each_rpcs_role() -> None:
    readme = (Path(__file__).resolve().parents[2] / "README.md").read_text()
    table = readme.split("<!-- roles:start -->", 1)[1].split("<!-- roles:end -->", 1)[0]
    documented = {}
    for line in table.strip().splitlines()[2:]:
        rpc, role = (cell.strip() for cell in line.strip("|").split("|")[:2])
        documented[f"/jobmesh.v1.{rpc.strip('`').replace('.', '/')}"] = role.split()[0]
    assert documented == {rpc: role.name.lower() for rpc, role in RPC_ROLES.items()}


@pytest.mark.parametrize("case", CASES, ids=lambda case: case.call.__name__.strip("_"))
def test_a_caller_without_any_role_is_refused_everything(api: CallerApi, case: Case) -> None:
    assert _outcome(case.call, api, as_caller("no-role")) == (DENIED, "PERMISSION_DENIED")
