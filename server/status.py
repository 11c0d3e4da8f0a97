"""The project's errors as canonical gRPC statuses with `google.rpc` details."""

from __future__ import annotations

import functools
import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any, TypeVar

import grpc
from google.protobuf import any_pb2
from google.rpc import code_pb2, error_details_pb2, status_pb2
from grpc_status import rpc_status

from jobmesh.core.errors import ERROR_DOMAIN, InvalidArgument, JobmeshError, QuotaExceeded
from jobmesh.server.refusals import note_refusal

log = logging.getLogger(__name__)

Req = TypeVar("Req")
Resp = TypeVar("Resp")
S = TypeVar("S")


def status_of(error: JobmeshError) -> status_pb2.Status:
    """`google.rpc.Status` with an `ErrorInfo` and, for bad input, a `BadRequest` of field violations."""
    details = [error_details_pb2.ErrorInfo(reason=error.reason, domain=ERROR_DOMAIN, metadata=error.metadata)]
    status = status_pb2.Status(code=error.code.value[0], message=error.message)
    if isinstance(error, InvalidArgument):
        bad_request = error_details_pb2.BadRequest(
            field_violations=[
                error_details_pb2.BadRequest.FieldViolation(field=v.field, description=v.description)
                for v in error.violations
            ]
        )
        status.details.append(_pack(bad_request))
    if isinstance(error, QuotaExceeded):
        failure = error_details_pb2.QuotaFailure(
            violations=[
                error_details_pb2.QuotaFailure.Violation(subject=subject, description=description)
                for subject, description in error.violations
            ]
        )
        status.details.append(_pack(failure))
    if error.retry_delay is not None:
        retry = error_details_pb2.RetryInfo()
        retry.retry_delay.FromTimedelta(error.retry_delay)
        status.details.append(_pack(retry))
    status.details.extend(_pack(detail) for detail in details)
    return status


def ok_status() -> status_pb2.Status:
    return status_pb2.Status(code=code_pb2.OK)


def _pack(message: Any) -> any_pb2.Any:
    packed = any_pb2.Any()
    packed.Pack(message)
    return packed


def _internal() -> status_pb2.Status:
    return status_pb2.Status(code=code_pb2.INTERNAL, message="internal error; see the server log")


async def _abort(context: grpc.aio.ServicerContext[Any, Any], error: Exception) -> None:
    if isinstance(error, JobmeshError):
        note_refusal(error)
        await context.abort_with_status(rpc_status.to_status(status_of(error)))
    log.exception("unexpected error", exc_info=error)
    await context.abort_with_status(rpc_status.to_status(_internal()))


def unary(
    method: Callable[[S, Req, grpc.aio.ServicerContext[Any, Any]], Awaitable[Resp]],
) -> Callable[[S, Req, grpc.aio.ServicerContext[Any, Any]], Awaitable[Resp]]:
    """Turns the project's errors raised by a unary handler into their gRPC status."""

    @functools.wraps(method)
    async def handler(self: S, request: Req, context: grpc.aio.ServicerContext[Any, Any]) -> Resp:
        try:
            return await method(self, request, context)
        except Exception as error:
            await _abort(context, error)
            raise  # unreachable: abort raises

    return handler


def server_streaming(
    method: Callable[[S, Req, grpc.aio.ServicerContext[Any, Any]], AsyncIterator[Resp]],
) -> Callable[[S, Req, grpc.aio.ServicerContext[Any, Any]], AsyncIterator[Resp]]:
    """The same for a server-streaming handler."""

    @functools.wraps(method)
    async def handler(
        self: S, request: Req, context: grpc.aio.ServicerContext[Any, Any]
    ) -> AsyncIterator[Resp]:
        try:
            async for item in method(self, request, context):
                yield item
        except Exception as error:
            await _abort(context, error)
            raise

    return handler


__all__ = ["ok_status", "server_streaming", "status_of", "unary"]
