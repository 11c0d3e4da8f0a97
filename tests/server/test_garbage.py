"""Generated garbage sent to every RPC never yields INTERNAL or UNKNOWN: bad input is the caller's error.

Requests are built from the message descriptors, so new fields are covered without touching this file.
Strings mix random text with fragments that reach deeper code (names, filters, cron expressions). Each RPC
gets the hypothesis profile's number of examples (tests/conftest.py).
"""

from __future__ import annotations

from typing import Any

import grpc
import pytest
from google.protobuf import message, message_factory
from google.protobuf.descriptor import FieldDescriptor
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from jobmesh.v1 import job_service_pb2, search_service_pb2
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
    FieldDescriptor.TYPE_INT32: st.one_of(st.integers(-3, 1001), st.integers(-(2**31), 2**31 - 1)),
    FieldDescriptor.TYPE_INT64: st.one_of(
        st.integers(-3, 10**11), st.integers(-(2**63), 2**63 - 1), st.integers(-62135596801, 253402300800)
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
        for name in ("ListJobs", "ListRuns", "GetRun")
    ),
]
STREAMS = [
    ("WatchRuns", search_service_pb2.WatchRunsRequest),
    ("TailRunLogs", search_service_pb2.TailRunLogsRequest),
]


def _assert_not_internal(error: grpc.RpcError, request: message.Message) -> None:
    code = error.code()
    assert code not in FORBIDDEN, f"{code}: {error.details()} for {request!r}"


@pytest.mark.parametrize(("method", "get_call", "request_type"), RPCS, ids=[rpc[0] for rpc in RPCS])
def test_unary_rpcs_never_fail_internally(
    api: Api, method: str, get_call: Any, request_type: type[message.Message]
) -> None:
    call = get_call(api)

    @settings(deadline=None, suppress_health_check=list(HealthCheck), database=None)
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

    @settings(deadline=None, suppress_health_check=list(HealthCheck), database=None)
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
