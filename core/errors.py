"""The project's error types. Adapters translate driver errors into these; the API layer turns them into a
canonical gRPC status with `google.rpc` details."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import timedelta

import grpc

ERROR_DOMAIN = "jobmesh.dev"


@dataclass(frozen=True, slots=True)
class FieldViolation:
    """One bad field of a request, named by its path (`job.schedule.cron.expression`)."""

    field: str
    description: str


class JobmeshError(Exception):
    """Base of every error the API reports on purpose. `message` is what callers see; `detail`, for the
    server's log only, may hold what they must not (a database's own error text, a host name)."""

    code: grpc.StatusCode = grpc.StatusCode.INTERNAL
    reason: str = "INTERNAL"
    retry_delay: timedelta | None = None  # when to try again (a `google.rpc.RetryInfo`), if it says

    def __init__(self, message: str, *, metadata: Mapping[str, str] | None = None, detail: str = "") -> None:
        super().__init__(message)
        self.message = message
        self.metadata = dict(metadata or {})
        self.detail = detail

    def __str__(self) -> str:
        return f"{self.message} ({self.detail})" if self.detail else self.message


class InvalidArgument(JobmeshError):
    code = grpc.StatusCode.INVALID_ARGUMENT
    reason = "INVALID_ARGUMENT"

    def __init__(self, violations: Sequence[FieldViolation], message: str | None = None) -> None:
        self.violations = tuple(violations)
        summary = "; ".join(f"{v.field}: {v.description}" for v in self.violations)
        super().__init__(message or f"invalid request: {summary}")

    @classmethod
    def single(cls, field: str, description: str) -> InvalidArgument:
        return cls([FieldViolation(field, description)])


class NotFound(JobmeshError):
    code = grpc.StatusCode.NOT_FOUND
    reason = "NOT_FOUND"

    def __init__(self, resource_name: str) -> None:
        super().__init__(f"{resource_name} not found", metadata={"resource": resource_name})
        self.resource_name = resource_name


class AlreadyExists(JobmeshError):
    code = grpc.StatusCode.ALREADY_EXISTS
    reason = "ALREADY_EXISTS"


class RequestIdReused(AlreadyExists):
    """A `request_id` came back with a different request body."""

    reason = "REQUEST_ID_REUSED"

    def __init__(self, request_id: str) -> None:
        super().__init__(
            f"request_id {request_id!r} was already used for a different request",
            metadata={"request_id": request_id},
        )


class EtagMismatch(JobmeshError):
    code = grpc.StatusCode.ABORTED
    reason = "ETAG_MISMATCH"

    def __init__(self, resource_name: str, current_etag: str) -> None:
        super().__init__(
            f"etag does not match the current version of {resource_name}: read it again and retry",
            metadata={"resource": resource_name, "current_etag": current_etag},
        )


class FailedPrecondition(JobmeshError):
    code = grpc.StatusCode.FAILED_PRECONDITION
    reason = "FAILED_PRECONDITION"

    def __init__(self, message: str, *, reason: str, metadata: Mapping[str, str] | None = None) -> None:
        super().__init__(message, metadata=metadata)
        self.reason = reason


class ResourceExhausted(JobmeshError):
    """A limit of the server's was reached; `reason` says which, `metadata` how to go on, `retry_delay` (a
    `RetryInfo`) when to try again."""

    code = grpc.StatusCode.RESOURCE_EXHAUSTED
    reason = "RESOURCE_EXHAUSTED"

    def __init__(
        self,
        message: str,
        *,
        reason: str,
        metadata: Mapping[str, str] | None = None,
        retry_delay: timedelta | None = None,
    ) -> None:
        super().__init__(message, metadata=metadata)
        self.reason = reason
        self.retry_delay = retry_delay


class QuotaExceeded(ResourceExhausted):
    """A namespace's quota refused the request; `violations` are (subject, description) pairs, sent as a
    `google.rpc.QuotaFailure`."""

    reason = "QUOTA_EXCEEDED"

    def __init__(self, message: str, violations: Sequence[tuple[str, str]], *, quota: str) -> None:
        super().__init__(message, reason="QUOTA_EXCEEDED", metadata={"quota": quota})
        self.violations = tuple(violations)


class Unauthenticated(JobmeshError):
    """The call carries no valid credential. Callers see one message whatever was wrong, so that it tells an
    attacker nothing; `detail` (the log's) says what."""

    code = grpc.StatusCode.UNAUTHENTICATED
    reason = "UNAUTHENTICATED"

    def __init__(self, detail: str) -> None:
        super().__init__("a valid credential is required", detail=detail)


class PermissionDenied(JobmeshError):
    """The caller is known but may not do this."""

    code = grpc.StatusCode.PERMISSION_DENIED
    reason = "PERMISSION_DENIED"

    def __init__(self, message: str, *, metadata: Mapping[str, str] | None = None, detail: str = "") -> None:
        super().__init__(message, metadata=metadata, detail=detail)


class StoreUnavailable(JobmeshError):
    """The database could not be reached; the caller may retry (a create or a cancel made meanwhile is
    refused, not queued: the caller still holds it and knows it was not taken)."""

    code = grpc.StatusCode.UNAVAILABLE
    reason = "STORE_UNAVAILABLE"
    # The readiness probes look again every second: a client retrying sooner only adds load.
    retry_delay = timedelta(seconds=1)

    def __init__(self, detail: str) -> None:
        super().__init__("the database is unavailable: try again shortly", detail=detail)


class StoreFailure(JobmeshError):
    """The database refused a statement for a reason the caller cannot act on (the server logs it)."""

    code = grpc.StatusCode.INTERNAL
    reason = "STORE_FAILURE"

    def __init__(self, detail: str) -> None:
        super().__init__("the database could not complete the request; see the server log", detail=detail)


class InvalidConfig(ValueError):
    """A component refused a configuration value; `field` names the config field."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(f"{field}: {message}")
        self.field = field
        self.message = message
