"""Reading the `google.rpc` details of a failed call."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import grpc
import pytest
from google.rpc import error_details_pb2
from grpc_status import rpc_status


def call_error(call: Callable[[], Any], code: grpc.StatusCode) -> grpc.RpcError:
    """Calls and checks the call fails with `code`; returns the error."""
    with pytest.raises(grpc.RpcError) as caught:
        call()
    error = caught.value
    assert error.code() == code, f"{error.code()}: {error.details()}"
    return error


def field_violations(error: grpc.RpcError) -> dict[str, str]:
    status = rpc_status.from_call(error)
    assert status is not None, "no google.rpc.Status details on the error"
    violations: dict[str, str] = {}
    for detail in status.details:
        if detail.Is(error_details_pb2.BadRequest.DESCRIPTOR):
            bad_request = error_details_pb2.BadRequest()
            detail.Unpack(bad_request)
            violations.update({v.field: v.description for v in bad_request.field_violations})
    return violations


def error_info(error: grpc.RpcError) -> error_details_pb2.ErrorInfo:
    status = rpc_status.from_call(error)
    assert status is not None, "no google.rpc.Status details on the error"
    for detail in status.details:
        if detail.Is(error_details_pb2.ErrorInfo.DESCRIPTOR):
            info = error_details_pb2.ErrorInfo()
            detail.Unpack(info)
            return info
    raise AssertionError("no ErrorInfo detail")


def quota_violations(error: grpc.RpcError) -> list[tuple[str, str]]:
    """The (subject, description) pairs of the error's `QuotaFailure`."""
    status = rpc_status.from_call(error)
    assert status is not None, "no google.rpc.Status details on the error"
    violations = []
    for detail in status.details:
        if detail.Is(error_details_pb2.QuotaFailure.DESCRIPTOR):
            failure = error_details_pb2.QuotaFailure()
            detail.Unpack(failure)
            violations += [(violation.subject, violation.description) for violation in failure.violations]
    return violations
