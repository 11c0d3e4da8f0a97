"""Generated garbage sent to every RPC never yields INTERNAL or UNKNOWN: bad input is the caller's error.

Requests are built from the message descriptors, so new fields are covered without touching this file.
Strings mix random text with fragments that reach deeper code (names, filters, cron expressions). Each RPC
gets the hypothesis profile's number of examples (tests/conftest.py).
"""

from __future__ import annotations

import base64
import functools
import json
from typing import Any, cast

import grpc
import pytest
from google.protobuf import message, message_factory
from google.protobuf.descriptor import FieldDescriptor
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from jobmesh.adapters.store.sql import SqlStore
from jobmesh.v1 import job_pb2, job_service_pb2, search_service_pb2
from tests.server.conftest import Api

FORBIDDEN = {grpc.StatusCode.INTERNAL, grpc.StatusCode.UNKNOWN}

FRAGMENTS = [
    "",
    "jobs/",
    "jobs/a",
    "jobs/-",
    "jobs/a/runs/b",
    "jobs/a/runs/",
    "jobs//runs/x",
    "a",
    "-",
    "*",
    "display_name",
    "labels",
    "schedule",
    "target",
    "state",
    "queue",
    "priority",
    "retry_policy",
    "state = ACTIVE",
    'labels.team = "x"',
    "labels:team",
    'create_time > "2024-01-01T00:00:00Z"',
    "attempt >= 2",
    'job = "jobs/a"',
    "state = SCHEDULED AND attempt = 1",
    "name desc",
    "create_time",
    "* * * * *",
    "* * * * * *",
    "@hourly",
    "0 3 * * *",
    "61 * * * *",
    "UTC",
    "Europe/Paris",
    "Mars/Base",
    "\x00",
    "é",
    "😀",
    "../../etc/passwd",
    "http://127.0.0.1:1/x",
    "https://",
    "GET",
    "echo",
    "1",
    "0",
    "9999999999999999999",
    "-1",
    '"',
    "'",
    "(",
    ")",
    "AND",
    "OR",
    "NOT",
    # The limits of time, of int32 and int64, and strings that only look like numbers or tokens.
    "0001-01-01T00:00:00Z",
    "0001-01-01T00:00:00+05:00",
    "9999-12-31T23:59:59-05:00",
    'create_time > "0001-01-01T00:00:00+05:00"',
    'schedule_time <= "9999-12-31T23:59:59-05:00"',
    "attempt = 2147483648",
    "attempt = -2147483649",
    "attempt = 9223372036854775808",
    "*/99999999999999999999 * * * *",
    "\u00b2",
    "\u0663",
    "1\u00b2",
    "eyJmIjoiIiwiayI6W119",  # a page token of the right shape, for no query
    "W1tbW1tbW1tbW10=",  # nested brackets
]

texts = st.one_of(
    st.sampled_from(FRAGMENTS), st.text(max_size=40), st.text(alphabet='jobs/runa-z0:=" ', max_size=30)
)
SCALARS: dict[int, st.SearchStrategy[Any]] = {
    FieldDescriptor.TYPE_STRING: texts,
    FieldDescriptor.TYPE_BYTES: st.binary(max_size=64),
    FieldDescriptor.TYPE_BOOL: st.booleans(),
    FieldDescriptor.TYPE_DOUBLE: st.floats(allow_nan=True, allow_infinity=True),
    FieldDescriptor.TYPE_FLOAT: st.floats(width=32, allow_nan=True, allow_infinity=True),
    FieldDescriptor.TYPE_INT32: st.one_of(
        st.integers(-3, 1001), st.integers(-(2**31), 2**31 - 1), st.sampled_from([-(2**31), 2**31 - 1])
    ),
    FieldDescriptor.TYPE_INT64: st.one_of(
        st.integers(-3, 10**11),
        st.integers(-(2**63), 2**63 - 1),
        st.integers(-62135596801, 253402300800),
        st.sampled_from([-(2**63), 2**63 - 1, -62135596800, 253402300799, 2**31, -(2**31) - 1]),
    ),
    FieldDescriptor.TYPE_ENUM: st.integers(-2, 12),
}


def field_value(field: Any, depth: int) -> st.SearchStrategy[Any]:
    if field.type == FieldDescriptor.TYPE_MESSAGE:
        return messages(field.message_type, depth + 1)
    return SCALARS[field.type]


@st.composite
def _message(draw: st.DrawFn, desc: Any, depth: int) -> message.Message:
    instance = message_factory.GetMessageClass(desc)()
    if depth > 4:
        return instance
    for field in desc.fields:
        if not draw(st.booleans()):
            continue
        _set(draw, instance, field, depth)
    return instance


def _set(draw: st.DrawFn, instance: message.Message, field: Any, depth: int) -> None:
    target = getattr(instance, field.name)
    is_map = field.message_type is not None and field.message_type.GetOptions().map_entry
    if is_map:
        key_field = field.message_type.fields_by_name["key"]
        value_field = field.message_type.fields_by_name["value"]
        for key in draw(st.lists(SCALARS[key_field.type], max_size=3)):
            target[key] = draw(SCALARS[value_field.type])
    elif field.is_repeated:
        target.extend(draw(st.lists(field_value(field, depth), max_size=3)))
    elif field.type == FieldDescriptor.TYPE_MESSAGE:
        target.CopyFrom(draw(field_value(field, depth)))
    else:
        setattr(instance, field.name, draw(field_value(field, depth)))


# Built once per message type and depth: building a strategy again for every field of every example took
# a good share of the test's time.
@functools.cache
def messages(desc: Any, depth: int = 0) -> st.SearchStrategy[message.Message]:
    return _message(desc, depth)


def _unary(
    stub: Any, method: str, request_type: type[message.Message]
) -> tuple[str, Any, type[message.Message]]:
    return (method, lambda api: getattr(getattr(api, stub), method), request_type)


RPCS = [
    *(
        _unary("jobs", name, getattr(job_service_pb2, f"{name}Request"))
        for name in (
            "CreateJob",
            "BatchCreateJobs",
            "GetJob",
            "UpdateJob",
            "DeleteJob",
            "PauseJob",
            "ResumeJob",
            "RunJobNow",
            "CancelRun",
            "ReplayRun",
        )
    ),
    *(
        _unary("search", name, getattr(search_service_pb2, f"{name}Request"))
        for name in ("ListJobs", "ListRuns", "GetRun", "PreviewSchedule")
    ),
]
STREAMS = [
    ("WatchRuns", search_service_pb2.WatchRunsRequest),
    ("TailRunLogs", search_service_pb2.TailRunLogsRequest),
]


def _assert_not_internal(error: grpc.RpcError, request: message.Message | bytes) -> None:
    code = error.code()
    assert code not in FORBIDDEN, f"{code}: {error.details()} for {request!r}"


def garbage(api: Api, share: int = 1) -> settings:
    """The profile's count of examples on PostgreSQL, where the probes found the most, a tenth of it on
    SQLite; divided by `share` for the tests of one class of input (forged tokens, frames)."""
    full = settings().max_examples // share
    count = full if cast(SqlStore, api.store).engine.dialect.name == "postgresql" else max(full // 10, 10)
    return settings(max_examples=count, deadline=None, suppress_health_check=list(HealthCheck), database=None)


@pytest.mark.parametrize(("method", "get_call", "request_type"), RPCS, ids=[rpc[0] for rpc in RPCS])
def test_unary_rpcs_never_fail_internally(
    api: Api, method: str, get_call: Any, request_type: type[message.Message]
) -> None:
    call = get_call(api)

    @garbage(api)
    @given(messages(request_type.DESCRIPTOR))
    def check(request: message.Message) -> None:
        try:
            call(request, timeout=30)
        except grpc.RpcError as error:
            _assert_not_internal(error, request)

    check()


@pytest.mark.parametrize(("method", "request_type"), STREAMS, ids=[stream[0] for stream in STREAMS])
def test_streams_never_fail_internally(api: Api, method: str, request_type: type[message.Message]) -> None:
    call = getattr(api.search, method)

    @garbage(api)
    @given(messages(request_type.DESCRIPTOR))
    def check(request: message.Message) -> None:
        stream = call(request, timeout=30)
        try:
            next(stream, None)  # the first answer (or the end, or an error) is enough
        except grpc.RpcError as error:
            _assert_not_internal(error, request)
        finally:
            stream.cancel()

    check()


# JSON a forger may put in a page token: nested values, numbers at the limits, times at the limits.
json_values = st.recursive(
    st.one_of(
        st.none(),
        st.booleans(),
        st.integers(-(2**64), 2**64),
        st.floats(allow_nan=False),
        st.sampled_from(FRAGMENTS[-15:]),
        st.text(max_size=30),
    ),
    lambda inner: st.one_of(
        st.lists(inner, max_size=4), st.dictionaries(st.text(max_size=5), inner, max_size=3)
    ),
    max_leaves=20,
)


def _forge(token: str, values: object) -> str:
    payload = json.loads(base64.urlsafe_b64decode(token + "=" * (-len(token) % 4)))
    payload["k"] = values
    return base64.urlsafe_b64encode(json.dumps(payload).encode()).decode().rstrip("=")


def test_forged_page_tokens_never_fail_internally(api: Api) -> None:
    """Tokens with the right fingerprint (it is no secret) and sort values edited at will."""
    immediate = job_pb2.Job(
        schedule=job_pb2.Schedule(immediate=job_pb2.Schedule.Immediate()),
        target=job_pb2.Target(command=job_pb2.Target.Command(argv=["true"])),
    )
    for _ in range(2):
        api.jobs.CreateJob(job_service_pb2.CreateJobRequest(job=immediate))
    jobs_token = api.search.ListJobs(search_service_pb2.ListJobsRequest(page_size=1)).next_page_token
    runs_token = api.search.ListRuns(
        search_service_pb2.ListRunsRequest(parent="jobs/-", page_size=1)
    ).next_page_token
    assert jobs_token
    assert runs_token

    @garbage(api, share=5)
    @given(json_values)
    def check(values: object) -> None:
        jobs = search_service_pb2.ListJobsRequest(page_size=1, page_token=_forge(jobs_token, values))
        runs = search_service_pb2.ListRunsRequest(
            parent="jobs/-", page_size=1, page_token=_forge(runs_token, values)
        )
        for call in (
            lambda: api.search.ListJobs(jobs, timeout=30),
            lambda: api.search.ListRuns(runs, timeout=30),
        ):
            try:
                call()
            except grpc.RpcError as error:
                _assert_not_internal(error, jobs)

    check()


@st.composite
def _mangled(draw: st.DrawFn, desc: Any) -> bytes:
    """A valid request's bytes, then cut short, a byte changed, or bytes put in: invalid UTF-8 among them."""
    data = bytearray(draw(messages(desc)).SerializeToString())
    for _ in range(draw(st.integers(1, 3))):
        where = draw(st.integers(0, len(data)))
        kind = draw(st.sampled_from(["cut", "change", "insert"]))
        if kind == "cut":
            del data[where:]
        elif kind == "change" and where < len(data):
            data[where] = draw(st.integers(0, 255))
        else:
            data[where:where] = draw(st.binary(min_size=1, max_size=4))
    return bytes(data)


@pytest.mark.parametrize(("method", "get_call", "request_type"), RPCS, ids=[rpc[0] for rpc in RPCS])
def test_frames_that_do_not_parse_never_fail_internally(
    api: Api, method: str, get_call: Any, request_type: type[message.Message]
) -> None:
    path = f"/{_service_of(method)}/{method}"

    with grpc.insecure_channel(api.address) as channel:
        raw: grpc.UnaryUnaryMultiCallable[bytes, bytes] = channel.unary_unary(path)

        @garbage(api, share=5)
        @given(_mangled(request_type.DESCRIPTOR))
        def check(data: bytes) -> None:
            try:
                raw(data, timeout=30)
            except grpc.RpcError as error:
                _assert_not_internal(error, data)

        check()


def _service_of(method: str) -> str:
    return (
        "jobmesh.v1.SearchService"
        if method in ("ListJobs", "ListRuns", "GetRun")
        else "jobmesh.v1.JobService"
    )
