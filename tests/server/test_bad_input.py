"""Bad input found by probing the API: each is INVALID_ARGUMENT with a field violation (a request that
inflates past the message limit, RESOURCE_EXHAUSTED), on every store, and the server stays up."""

from __future__ import annotations

import base64
import json
from collections.abc import Callable
from functools import partial
from typing import Any

import grpc
import pytest
from google.protobuf import field_mask_pb2, timestamp_pb2

from jobmesh.core.limits import MAX_GRPC_MESSAGE_BYTES
from jobmesh.v1 import job_pb2, job_service_pb2, search_service_pb2
from tests.server.conftest import Api
from tests.server.errors import call_error, field_violations

YEAR_1 = -62135596800  # 0001-01-01T00:00:00Z, the first instant a Timestamp may hold
YEAR_9999 = 253402300799  # 9999-12-31T23:59:59Z, the last
EDGE_TIMES = [
    "0001-01-01T00:00:00Z",
    "0001-01-01T00:00:00+05:00",  # before the first instant once in UTC
    "9999-12-31T23:59:59Z",
    "9999-12-31T23:59:59-05:00",  # after the last one once in UTC
]


def invalid(call: Callable[[], Any], field: str) -> None:
    violations = field_violations(call_error(call, grpc.StatusCode.INVALID_ARGUMENT))
    assert field in violations, violations


def job(**fields: Any) -> job_pb2.Job:
    return job_pb2.Job(
        target=job_pb2.Target(command=job_pb2.Target.Command(argv=["true"])),
        **fields,
    )


@pytest.fixture(scope="module")
def job_name(api: Api) -> str:
    created = api.jobs.CreateJob(
        job_service_pb2.CreateJobRequest(
            job_id="probe",
            job=job(schedule=job_pb2.Schedule(cron=job_pb2.Schedule.Cron(expression="@daily"))),
        )
    )
    return str(created.job.name)


@pytest.mark.parametrize("moment", EDGE_TIMES)
def test_timestamps_at_the_limits_in_filters(api: Api, moment: str) -> None:
    for field in ("create_time", "update_time", "next_run_time"):
        jobs = search_service_pb2.ListJobsRequest(filter=f'{field} > "{moment}"')
        _valid_or_invalid(partial(api.search.ListJobs, jobs), "filter")
    for field in ("schedule_time", "due_time", "start_time", "end_time"):
        runs = search_service_pb2.ListRunsRequest(parent="jobs/-", filter=f'{field} <= "{moment}"')
        _valid_or_invalid(partial(api.search.ListRuns, runs), "filter")


def test_integers_beyond_the_stores_range(api: Api) -> None:
    for value in (2**31, -(2**31) - 1, 2**63, -(2**63) - 1, 10**30):
        request = search_service_pb2.ListRunsRequest(parent="jobs/-", filter=f"attempt = {value}")
        invalid(partial(api.search.ListRuns, request), "filter")
    for value in (2**31 - 1, -(2**31)):  # the extremes themselves are fine
        api.search.ListRuns(search_service_pb2.ListRunsRequest(parent="jobs/-", filter=f"attempt = {value}"))


def _token(payload: object) -> str:
    return base64.urlsafe_b64encode(json.dumps(payload).encode()).decode().rstrip("=")


@pytest.mark.parametrize(
    "token",
    [
        base64.urlsafe_b64encode(b"[" * 3000 + b"]" * 3000).decode(),  # deeper than the JSON parser recurses
        base64.urlsafe_b64encode(b'{"f":' * 3000).decode(),
        _token({"f": "x", "k": [[[[[[]]]]]]}),
        _token({"f": 1, "k": 2}),
        _token([1, 2, 3]),
        "\u00b2\u00b2",
        "=" * 100,
    ],
)
def test_nested_and_forged_page_tokens(api: Api, token: str) -> None:
    invalid(lambda: api.search.ListJobs(search_service_pb2.ListJobsRequest(page_token=token)), "page_token")
    runs = search_service_pb2.ListRunsRequest(parent="jobs/-", page_token=token)
    invalid(lambda: api.search.ListRuns(runs), "page_token")


@pytest.mark.parametrize("moment", EDGE_TIMES)
def test_forged_page_tokens_with_values_at_the_limits(api: Api, moment: str) -> None:
    """A token whose fingerprint is right (it is no secret) but whose sort values were edited."""
    for _ in range(2):
        api.jobs.CreateJob(
            job_service_pb2.CreateJobRequest(
                job=job(schedule=job_pb2.Schedule(immediate=job_pb2.Schedule.Immediate()))
            )
        )
    token = api.search.ListJobs(
        search_service_pb2.ListJobsRequest(page_size=1, order_by="create_time")
    ).next_page_token
    assert token
    payload = json.loads(base64.urlsafe_b64decode(token + "=" * (-len(token) % 4)))
    payload["k"][0] = moment
    request = search_service_pb2.ListJobsRequest(
        page_size=1, order_by="create_time", page_token=_token(payload)
    )
    _valid_or_invalid(lambda: api.search.ListJobs(request), "page_token")


@pytest.mark.parametrize("etag", ["\u00b2", "\u0663", "1\u00b2", "\U0001d7d9", "-1", "1.0"])
def test_etags_that_no_version_has(api: Api, job_name: str, etag: str) -> None:
    update = job_service_pb2.UpdateJobRequest(
        job=job_pb2.Job(name=job_name, etag=etag, display_name="x"),
        update_mask=field_mask_pb2.FieldMask(paths=["display_name"]),
    )
    invalid(lambda: api.jobs.UpdateJob(update), "job.etag")
    invalid(lambda: api.jobs.DeleteJob(job_service_pb2.DeleteJobRequest(name=job_name, etag=etag)), "etag")


@pytest.mark.parametrize(
    "expression",
    ["*/99999999999999999999 * * * *", "*/61 * * * *", "0 */25 * * *", "0 0 */32 * *", "1-999999999 * * * *"],
)
def test_cron_steps_and_values_out_of_their_fields_range(api: Api, expression: str) -> None:
    cron = job_pb2.Schedule.Cron(expression=expression)
    request = job_service_pb2.CreateJobRequest(job=job(schedule=job_pb2.Schedule(cron=cron)))
    invalid(lambda: api.jobs.CreateJob(request), "job.schedule.cron.expression")


@pytest.mark.parametrize(
    ("expression", "complaint"),
    [
        ("61 * * * *", "minute field: 61 is out of range 0-59"),
        ("0 25 * * *", "hour field: 25 is out of range 0-23"),
        ("0 0 * jan-foo *", "month field: 'foo' is not a value in 1-12 or jan-dec"),
    ],
)
def test_a_bad_cron_field_is_named_with_its_range_in_the_violation(
    api: Api, expression: str, complaint: str
) -> None:
    cron = job_pb2.Schedule.Cron(expression=expression)
    request = job_service_pb2.CreateJobRequest(job=job(schedule=job_pb2.Schedule(cron=cron)))
    violations = field_violations(
        call_error(lambda: api.jobs.CreateJob(request), grpc.StatusCode.INVALID_ARGUMENT)
    )
    assert violations["job.schedule.cron.expression"] == complaint


@pytest.mark.parametrize("name", ["JOBMESH_RUN", "JOBMESH_ATTEMPT"])
def test_a_command_cannot_set_the_run_identity_variables(api: Api, name: str) -> None:
    target = job_pb2.Target(command=job_pb2.Target.Command(argv=["true"], env={name: "mine"}))
    request = job_service_pb2.CreateJobRequest(job=job_pb2.Job(target=target))
    violations = field_violations(
        call_error(lambda: api.jobs.CreateJob(request), grpc.StatusCode.INVALID_ARGUMENT)
    )
    assert "run's identity" in violations[f"job.target.command.env[{name!r}]"], violations


@pytest.mark.parametrize("name", ["Idempotency-Key", "idempotency-key"])
def test_a_webhook_cannot_set_the_idempotency_key_header(api: Api, name: str) -> None:
    http = job_pb2.Target.Http(url="https://example.com/hook", headers={name: "mine"})
    request = job_service_pb2.CreateJobRequest(job=job_pb2.Job(target=job_pb2.Target(http=http)))
    violations = field_violations(
        call_error(lambda: api.jobs.CreateJob(request), grpc.StatusCode.INVALID_ARGUMENT)
    )
    assert "run's identity" in violations[f"job.target.http.headers[{name!r}]"], violations


@pytest.mark.parametrize("seconds", [YEAR_1, YEAR_1 + 86400, YEAR_9999, YEAR_9999 - 86400])
@pytest.mark.parametrize("field", ["start_time", "end_time"])
def test_cron_bounds_at_the_limits_of_time(api: Api, seconds: int, field: str) -> None:
    cron = job_pb2.Schedule.Cron(expression="* * * * *")
    getattr(cron, field).CopyFrom(timestamp_pb2.Timestamp(seconds=seconds))
    request = job_service_pb2.CreateJobRequest(job=job(schedule=job_pb2.Schedule(cron=cron)))
    invalid(lambda: api.jobs.CreateJob(request), f"job.schedule.cron.{field}")


@pytest.mark.parametrize(
    ("method", "payload"),
    [
        ("/jobmesh.v1.JobService/CreateJob", b"\x0a\x03\xff\xfe\xfd"),  # job_id: invalid UTF-8
        ("/jobmesh.v1.JobService/GetJob", b"\x0a\x05job"),  # truncated: 5 bytes announced, 3 sent
        ("/jobmesh.v1.SearchService/ListJobs", b"\xff\xff\xff\xff"),  # not protobuf at all
        ("/jobmesh.v1.SearchService/GetRun", b"\x0a\x02\xc3\x28"),  # name: invalid UTF-8
    ],
)
def test_frames_that_do_not_parse(api: Api, method: str, payload: bytes) -> None:
    with grpc.insecure_channel(api.address) as channel:
        call: grpc.UnaryUnaryMultiCallable[bytes, bytes] = channel.unary_unary(method)
        with pytest.raises(grpc.RpcError) as caught:
            call(payload, timeout=10)
        error = caught.value
        assert error.code() == grpc.StatusCode.INVALID_ARGUMENT, f"{error.code()}: {error.details()}"
        assert "request" in field_violations(error)
    # and the server is up: a well-formed call is answered
    api.search.ListJobs(search_service_pb2.ListJobsRequest(page_size=1))


def _valid_or_invalid(call: Callable[[], Any], field: str) -> None:
    """Either an answer, or INVALID_ARGUMENT naming `field`: never INTERNAL or UNKNOWN."""
    failed: grpc.RpcError | None = None
    try:
        call()
    except grpc.RpcError as error:
        failed = error
    if failed is not None:
        assert failed.code() == grpc.StatusCode.INVALID_ARGUMENT, f"{failed.code()}: {failed.details()}"
        assert field in field_violations(failed)


def test_a_stream_frame_that_does_not_parse_ends_the_stream_as_invalid(api: Api) -> None:
    with grpc.insecure_channel(api.address) as channel:
        connect: grpc.StreamStreamMultiCallable[bytes, bytes] = channel.stream_stream(
            "/jobmesh.control.v1.ExecutorControl/Connect"
        )
        with pytest.raises(grpc.RpcError) as caught:
            list(connect(iter([b"\x0a\x05\xff\xfe"]), timeout=10))
        assert caught.value.code() == grpc.StatusCode.INVALID_ARGUMENT
        reflection: grpc.StreamStreamMultiCallable[bytes, bytes] = channel.stream_stream(
            "/grpc.reflection.v1alpha.ServerReflection/ServerReflectionInfo"
        )
        assert list(reflection(iter([b"\x3a\x00"]), timeout=10))  # a well-formed list_services: answered


def test_a_decompression_bomb_is_refused_and_the_server_serves_on(api: Api) -> None:
    """A gzip-compressed request of a few KiB that inflates past the server's message limit: the server stops
    inflating at the limit (RESOURCE_EXHAUSTED), and answers the next call."""
    inflated = bytes(MAX_GRPC_MESSAGE_BYTES + 2**20)
    bomb = job(schedule=job_pb2.Schedule(immediate=job_pb2.Schedule.Immediate()))
    bomb.target.handler.name = "anything"
    bomb.target.handler.payload = inflated
    error = call_error(
        lambda: api.jobs.CreateJob(
            job_service_pb2.CreateJobRequest(job=bomb), compression=grpc.Compression.Gzip, timeout=30
        ),
        grpc.StatusCode.RESOURCE_EXHAUSTED,
    )
    assert "larger than max" in (error.details() or "")
    api.search.ListJobs(search_service_pb2.ListJobsRequest(page_size=1))


@pytest.mark.parametrize(
    ("key", "limit", "field"),
    [
        ("customer-1", 0, "job.concurrency_limit"),
        ("customer-1", -1, "job.concurrency_limit"),
        ("", 2, "job.concurrency_limit"),
        ("k" * 129, 1, "job.concurrency_key"),
        ("line\nbreak", 1, "job.concurrency_key"),
    ],
)
def test_a_concurrency_key_needs_a_limit_of_at_least_one_and_a_short_printable_key(
    api: Api, job_name: str, key: str, limit: int, field: str
) -> None:
    immediate = job_pb2.Schedule(immediate=job_pb2.Schedule.Immediate())
    bad = job(schedule=immediate, concurrency_key=key, concurrency_limit=limit)
    invalid(lambda: api.jobs.CreateJob(job_service_pb2.CreateJobRequest(job=bad)), field)
    update = job_service_pb2.UpdateJobRequest(
        job=job_pb2.Job(name=job_name, concurrency_key=key, concurrency_limit=limit),
        update_mask=field_mask_pb2.FieldMask(paths=["concurrency_key", "concurrency_limit"]),
    )
    invalid(lambda: api.jobs.UpdateJob(update), field)


def test_a_job_s_concurrency_key_is_kept_and_updated(api: Api) -> None:
    immediate = job_pb2.Schedule(immediate=job_pb2.Schedule.Immediate())
    made = api.jobs.CreateJob(
        job_service_pb2.CreateJobRequest(
            job=job(schedule=immediate, concurrency_key="c-1", concurrency_limit=2)
        )
    ).job
    assert (made.concurrency_key, made.concurrency_limit) == ("c-1", 2)
    update = job_service_pb2.UpdateJobRequest(
        job=job_pb2.Job(name=made.name, concurrency_key="c-2", concurrency_limit=1),
        update_mask=field_mask_pb2.FieldMask(paths=["concurrency_key", "concurrency_limit"]),
    )
    changed = api.jobs.UpdateJob(update).job
    assert (changed.concurrency_key, changed.concurrency_limit) == ("c-2", 1)
