"""The server's errors as typed exceptions, decoded from the call's status and its `google.rpc` details
(`grpc-status-details-bin`): the `ErrorInfo` reason and metadata, `BadRequest` field violations, and the
`RetryInfo` delay."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import timedelta

import grpc
from google.rpc import error_details_pb2, status_pb2

__all__ = [
    "AlreadyExists",
    "Cancelled",
    "Conflict",
    "DeadlineExceeded",
    "FailedPrecondition",
    "FieldViolation",
    "InvalidArgument",
    "JobmeshError",
    "NotFound",
    "PermissionDenied",
    "ResourceExhausted",
    "Unauthenticated",
    "Unavailable",
    "error_from_rpc",
    "error_from_status",
]

_DETAILS_KEY = "grpc-status-details-bin"
_CODES = {code.value[0]: code for code in grpc.StatusCode}


@dataclass(frozen=True, slots=True)
class FieldViolation:
    """One bad field of a request, named by its path (`job.schedule.cron.expression`)."""

    field: str
    description: str


class JobmeshError(Exception):
    """A call the server (or the channel) failed. `reason`, `domain` and `metadata` come from its
    `ErrorInfo`; `field_violations` from its `BadRequest`; `retry_delay` from its `RetryInfo`."""

    def __init__(
        self,
        code: grpc.StatusCode,
        message: str,
        *,
        reason: str = "",
        domain: str = "",
        metadata: Mapping[str, str] | None = None,
        field_violations: Sequence[FieldViolation] = (),
        retry_delay: timedelta | None = None,
    ) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.reason = reason
        self.domain = domain
        self.metadata = dict(metadata or {})
        self.field_violations = tuple(field_violations)
        self.retry_delay = retry_delay

    def __str__(self) -> str:
        return f"{self.code.name}: {self.message}" if self.message else self.code.name


class InvalidArgument(JobmeshError):
    """Bad input: `field_violations` says which fields and why."""


class NotFound(JobmeshError):
    """No such job or run."""


class Conflict(JobmeshError):
    """The resource is not in the state the call expected: a stale etag (`ABORTED`), or the base of the
    two below."""


class AlreadyExists(Conflict):
    """A taken job id, or a `request_id` reused with a different request."""


class FailedPrecondition(Conflict):
    """A verb the resource's state does not allow (replaying a run that succeeded)."""


class PermissionDenied(JobmeshError):
    """The caller's roles do not allow the call in that namespace."""


class Unauthenticated(JobmeshError):
    """No valid token (or client certificate)."""


class ResourceExhausted(JobmeshError):
    """A limit of the server's: `retry_delay` says when to try again."""


class Unavailable(JobmeshError):
    """The server could not be reached, or is shutting down."""


class DeadlineExceeded(JobmeshError):
    """The call's deadline passed before its answer came."""


class Cancelled(JobmeshError):
    """The call was cancelled on this side."""


_BY_CODE: dict[grpc.StatusCode, type[JobmeshError]] = {
    grpc.StatusCode.INVALID_ARGUMENT: InvalidArgument,
    grpc.StatusCode.OUT_OF_RANGE: InvalidArgument,
    grpc.StatusCode.NOT_FOUND: NotFound,
    grpc.StatusCode.ABORTED: Conflict,
    grpc.StatusCode.ALREADY_EXISTS: AlreadyExists,
    grpc.StatusCode.FAILED_PRECONDITION: FailedPrecondition,
    grpc.StatusCode.PERMISSION_DENIED: PermissionDenied,
    grpc.StatusCode.UNAUTHENTICATED: Unauthenticated,
    grpc.StatusCode.RESOURCE_EXHAUSTED: ResourceExhausted,
    grpc.StatusCode.UNAVAILABLE: Unavailable,
    grpc.StatusCode.DEADLINE_EXCEEDED: DeadlineExceeded,
    grpc.StatusCode.CANCELLED: Cancelled,
}


def _status_details(metadata: object) -> status_pb2.Status | None:
    for key, value in metadata or ():  # type: ignore[attr-defined]
        if key == _DETAILS_KEY and isinstance(value, bytes):
            try:
                return status_pb2.Status.FromString(value)
            except Exception:  # a malformed trailer: the code and message still say enough
                return None
    return None


def _error_of(code: grpc.StatusCode, message: str, status: status_pb2.Status | None) -> JobmeshError:
    info = error_details_pb2.ErrorInfo()
    bad_request = error_details_pb2.BadRequest()
    retry_info = error_details_pb2.RetryInfo()
    retry_delay = None
    for detail in status.details if status is not None else ():
        if detail.Is(info.DESCRIPTOR):
            detail.Unpack(info)
        elif detail.Is(bad_request.DESCRIPTOR):
            detail.Unpack(bad_request)
        elif detail.Is(retry_info.DESCRIPTOR):
            detail.Unpack(retry_info)
            retry_delay = retry_info.retry_delay.ToTimedelta()
    violations = [FieldViolation(v.field, v.description) for v in bad_request.field_violations]
    return _BY_CODE.get(code, JobmeshError)(
        code,
        message,
        reason=info.reason,
        domain=info.domain,
        metadata=info.metadata,
        field_violations=violations,
        retry_delay=retry_delay,
    )


def error_from_rpc(error: grpc.RpcError) -> JobmeshError:
    """The typed exception of a failed call (sync or asyncio)."""
    call: grpc.Call = error  # type: ignore[assignment]  # a failed call's error is also its Call
    code = call.code() if callable(getattr(call, "code", None)) else grpc.StatusCode.UNKNOWN
    message = call.details() if callable(getattr(call, "details", None)) else str(error)
    trailers = call.trailing_metadata() if callable(getattr(call, "trailing_metadata", None)) else None
    return _error_of(code, message or "", _status_details(trailers))


def error_from_status(status: status_pb2.Status) -> JobmeshError:
    """The typed exception of a `google.rpc.Status` carried in an answer (an item of a batch)."""
    return _error_of(_CODES.get(status.code, grpc.StatusCode.UNKNOWN), status.message, status)
