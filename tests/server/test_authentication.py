"""Authentication of every call on a whole server (authentication on, opaque tokens and JWTs), on SQLite and
PostgreSQL: a call without a valid credential is UNAUTHENTICATED with one message and the reason in the
server's log only; health and reflection are served without one as configured; each caller has a request rate
(RESOURCE_EXHAUSTED with a RetryInfo past it) and a number of live streams.

The table of every RPC by every kind of credential is tests/server/test_authorization.py."""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import grpc
import pytest
from google.rpc import error_details_pb2
from grpc_health.v1 import health_pb2, health_pb2_grpc
from grpc_reflection.v1alpha import reflection_pb2, reflection_pb2_grpc
from grpc_status import rpc_status

from jobmesh.core.ports.pipeline_store import SchedulerStore
from jobmesh.server.admission.caller_rates import CALLER_RATE_LIMITED
from jobmesh.server.admission.stream_slots import TOO_MANY_STREAMS
from jobmesh.server.auth import authentication
from jobmesh.v1 import job_service_pb2, job_service_pb2_grpc, search_service_pb2, search_service_pb2_grpc
from tests.server.errors import call_error, error_info
from tests.server.secured import Secured, secured_server
from tests.server.tokens import bearer

UNAUTHENTICATED = grpc.StatusCode.UNAUTHENTICATED
GENERIC_MESSAGE = "a valid credential is required"


@pytest.fixture(scope="module")
def secured(store: SchedulerStore, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Secured]:
    with secured_server(store, tmp_path_factory.mktemp("secured")) as server:
        yield server


@pytest.fixture(scope="module")
def channel(secured: Secured) -> Iterator[grpc.Channel]:
    with grpc.insecure_channel(secured.address) as channel:
        yield channel


def get_job(channel: grpc.Channel, metadata: Any = ()) -> Callable[[], Any]:
    stub = job_service_pb2_grpc.JobServiceStub(channel)
    return lambda: stub.GetJob(
        job_service_pb2.GetJobRequest(name="jobs/nothing"), metadata=metadata, timeout=10
    )


def test_a_call_without_a_token_is_unauthenticated_with_the_reason_only_in_the_log(
    channel: grpc.Channel, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.WARNING, logger="jobmesh.server.auth.authentication"):
        error = call_error(get_job(channel), UNAUTHENTICATED)
    assert error.details() == GENERIC_MESSAGE
    assert error_info(error).reason == "UNAUTHENTICATED"
    assert dict(error_info(error).metadata) == {}
    [record] = [r for r in caplog.records if r.name == "jobmesh.server.auth.authentication"]
    assert record.reason == "the call carries no credential"  # type: ignore[attr-defined]
    assert record.method == "/jobmesh.v1.JobService/GetJob"  # type: ignore[attr-defined]


@pytest.mark.parametrize(
    "credential",
    ["Bearer jm_not-in-the-file", "Bearer not.a.jwt", "Basic YWRtaW46YWRtaW4=", "Bearer "],
)
def test_a_bad_credential_gets_the_same_answer_as_none(channel: grpc.Channel, credential: str) -> None:
    error = call_error(get_job(channel, (("authorization", credential),)), UNAUTHENTICATED)
    assert error.details() == GENERIC_MESSAGE


def test_oversized_tokens_are_refused_and_the_server_serves_on(
    channel: grpc.Channel, secured: Secured
) -> None:
    """The attack: bearer tokens of 4 KiB and 1 MiB. The first is no credential; the second is refused before
    any parser of the server's sees it (gRPC's limit on metadata). Neither costs the next caller anything."""
    error = call_error(get_job(channel, bearer("a" * 4096)), UNAUTHENTICATED)
    assert error.details() == GENERIC_MESSAGE
    call_error(get_job(channel, bearer("a" * 2**20)), grpc.StatusCode.RESOURCE_EXHAUSTED)
    call_error(get_job(channel, bearer(secured.token("admin"))), grpc.StatusCode.NOT_FOUND)


def test_a_valid_opaque_token_and_a_valid_jwt_pass(channel: grpc.Channel, secured: Secured) -> None:
    call_error(get_job(channel, bearer(secured.token("admin"))), grpc.StatusCode.NOT_FOUND)
    jwt = secured.signer.token("svc", {"roles": {"*": "viewer"}})
    call_error(get_job(channel, bearer(jwt)), grpc.StatusCode.NOT_FOUND)


def test_a_request_that_does_not_parse_is_unauthenticated_first(channel: grpc.Channel) -> None:
    garbage: grpc.UnaryUnaryMultiCallable[bytes, bytes] = channel.unary_unary(
        "/jobmesh.v1.JobService/GetJob"
    )  # bytes in, bytes out
    call_error(lambda: garbage(b"\xff\xff\xff", timeout=10), UNAUTHENTICATED)


def test_health_and_reflection_are_served_without_a_credential(channel: grpc.Channel) -> None:
    health = health_pb2_grpc.HealthStub(channel)
    assert (
        health.Check(health_pb2.HealthCheckRequest(), timeout=10).status
        == health_pb2.HealthCheckResponse.SERVING
    )
    reflection = reflection_pb2_grpc.ServerReflectionStub(channel)
    [answer] = reflection.ServerReflectionInfo(
        iter([reflection_pb2.ServerReflectionRequest(list_services="")]), timeout=10
    )
    names = {service.name for service in answer.list_services_response.service}
    assert "jobmesh.v1.JobService" in names


def test_health_needs_a_credential_when_it_is_not_open(store: SchedulerStore, tmp_path: Path) -> None:
    with (
        secured_server(store, tmp_path, open_services=frozenset()) as server,
        grpc.insecure_channel(server.address) as channel,
    ):
        health = health_pb2_grpc.HealthStub(channel)
        call_error(lambda: health.Check(health_pb2.HealthCheckRequest(), timeout=10), UNAUTHENTICATED)
        answer = health.Check(
            health_pb2.HealthCheckRequest(), metadata=bearer(server.token("viewer")), timeout=10
        )
        assert answer.status == health_pb2.HealthCheckResponse.SERVING


def test_a_caller_past_its_rate_is_refused_with_a_retry_info_and_others_are_not(
    store: SchedulerStore, tmp_path: Path
) -> None:
    with (
        secured_server(store, tmp_path, caller_rate=0.001, caller_burst=2) as server,
        grpc.insecure_channel(server.address) as channel,
    ):
        admin = get_job(channel, bearer(server.token("admin")))
        for _ in range(2):
            call_error(admin, grpc.StatusCode.NOT_FOUND)
        error = call_error(admin, grpc.StatusCode.RESOURCE_EXHAUSTED)
        assert error_info(error).reason == CALLER_RATE_LIMITED
        assert retry_delay_of(error) > 1.0  # a request a thousand seconds
        call_error(get_job(channel, bearer(server.token("viewer"))), grpc.StatusCode.NOT_FOUND)


def retry_delay_of(error: grpc.RpcError) -> float:
    status = rpc_status.from_call(error)
    assert status is not None
    for detail in status.details:
        if detail.Is(error_details_pb2.RetryInfo.DESCRIPTOR):
            info = error_details_pb2.RetryInfo()
            detail.Unpack(info)
            return float(info.retry_delay.ToTimedelta().total_seconds())
    raise AssertionError("no RetryInfo in the status")


def test_live_streams_are_limited_per_caller(store: SchedulerStore, tmp_path: Path) -> None:
    with (
        secured_server(store, tmp_path, max_live_streams_per_caller=1) as server,
        grpc.insecure_channel(server.address) as channel,
    ):
        search = search_service_pb2_grpc.SearchServiceStub(channel)

        def watch(subject: str) -> Any:
            return search.WatchRuns(
                search_service_pb2.WatchRunsRequest(parent="jobs/-"), metadata=bearer(server.token(subject))
            )

        first = watch("viewer")
        next(first)  # the initial page: the stream holds its slot
        second = watch("viewer")
        error = call_error(lambda: next(second), grpc.StatusCode.RESOURCE_EXHAUSTED)
        assert error_info(error).reason == TOO_MANY_STREAMS
        assert error_info(error).metadata["scope"] == "caller"
        other = watch("admin")
        next(other)  # another caller has slots of its own
        first.cancel()
        other.cancel()


def test_streams_without_a_credential_are_capped(channel: grpc.Channel) -> None:
    """The attack: thousands of unauthenticated `Health.Watch` streams, each holding the server's memory."""
    health = health_pb2_grpc.HealthStub(channel)
    opened = [
        health.Watch(health_pb2.HealthCheckRequest(), timeout=30)
        for _ in range(authentication.ANONYMOUS_STREAMS_PER_CLIENT)
    ]
    try:
        for stream in opened:
            next(stream)  # each holds its slot
        refused = health.Watch(health_pb2.HealthCheckRequest(), timeout=30)
        error = call_error(lambda: next(refused), grpc.StatusCode.RESOURCE_EXHAUSTED)
        assert error_info(error).reason == TOO_MANY_STREAMS
    finally:
        for stream in opened:
            stream.cancel()
