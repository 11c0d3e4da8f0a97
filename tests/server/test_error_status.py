"""Errors as gRPC statuses: what a caller can act on is in the details."""

from __future__ import annotations

from datetime import timedelta

import grpc
from google.rpc import error_details_pb2

from jobmesh.core.errors import FieldViolation, InvalidArgument, ResourceExhausted, StoreUnavailable
from jobmesh.server.status import status_of


def _retry_delays(error: InvalidArgument | ResourceExhausted | StoreUnavailable) -> list[timedelta]:
    delays = []
    for detail in status_of(error).details:
        if detail.Is(error_details_pb2.RetryInfo.DESCRIPTOR):
            info = error_details_pb2.RetryInfo()
            detail.Unpack(info)
            delays.append(info.retry_delay.ToTimedelta())
    return delays


def test_a_database_away_answers_unavailable_with_when_to_try_again() -> None:
    error = StoreUnavailable("connection refused")
    status = status_of(error)
    assert status.code == grpc.StatusCode.UNAVAILABLE.value[0]
    assert _retry_delays(error) == [timedelta(seconds=1)]
    assert "connection refused" not in status.message  # the database's own words stay in the server's log


def test_a_refusal_that_names_no_delay_sends_no_retry_info() -> None:
    assert _retry_delays(ResourceExhausted("busy", reason="BUSY")) == []
    assert _retry_delays(InvalidArgument([FieldViolation("job.queue", "empty")])) == []
    assert _retry_delays(ResourceExhausted("busy", reason="BUSY", retry_delay=timedelta(seconds=3))) == [
        timedelta(seconds=3)
    ]
