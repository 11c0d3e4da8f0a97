"""The Python SDK of jobmesh: a `Client` (blocking) and an `AsyncClient` (asyncio) of the public API
(`jobmesh.v1`'s `JobService` and `SearchService`), with typed helpers, retries, deadlines, TLS and tokens,
typed errors, Python functions as tasks (`Tasks`, `@tasks.task`, `.delay(...)`, `.result()`), and the
embeddable `Executor` that serves a program's own Python handlers.

    from datetime import timedelta
    from jobmesh.client import Client, command, immediately

    with Client("127.0.0.1:50051") as client:
        created = client.create_job(immediately(), command(["echo", "hello"]))
        assert created.run is not None  # an immediate job's run is made with it
        run = client.wait_for_run(created.run.name, timedelta(seconds=30))
        print(run.state, run.trigger)  # SUCCEEDED SCHEDULE: enums print their names

The executor's names (`Executor`, `ExecutorConfig`, `HandlerRegistry`, `HandlerContext`, `ExecutionPolicy`,
`QueueUnreachable`) are the mesh's own executor (`jobmesh.executor`), loaded on first use: a program that only
calls the API never imports it.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from jobmesh.client._async_client import AsyncClient
from jobmesh.client._client import Client
from jobmesh.client._config import DEFAULT_TARGET, ClientConfig, RetryConfig
from jobmesh.client._enums import (
    AuditAction,
    BatchCreateJobsView,
    JobState,
    LogStream,
    OverlapPolicy,
    Priority,
    RunState,
    RunTrigger,
)
from jobmesh.client._errors import (
    AlreadyExists,
    Cancelled,
    Conflict,
    DeadlineExceeded,
    FailedPrecondition,
    FieldViolation,
    InvalidArgument,
    JobmeshError,
    NotFound,
    PermissionDenied,
    ResourceExhausted,
    Unauthenticated,
    Unavailable,
)
from jobmesh.client._requests import (
    TERMINAL_STATES,
    CreatedJob,
    JobFields,
    UpdateFields,
    create_job_request,
    is_terminal,
)
from jobmesh.client._resources import (
    AuditEvent,
    Backfill,
    BatchCreated,
    BulkFailure,
    BulkResult,
    Job,
    LogLine,
    Run,
    RunAttempt,
    RunChanges,
    RunCount,
    SchedulePreview,
)
from jobmesh.client._specs import at, command, cron, handler, http, immediately, retry_policy
from jobmesh.client._task_codec import TaskArgumentError
from jobmesh.client._tasks import (
    AsyncTaskRun,
    NonRetryableError,
    Task,
    TaskFailed,
    TaskRun,
    Tasks,
    error_type_of,
)
from jobmesh.transport.tls import ChannelTls

if TYPE_CHECKING:
    from jobmesh.executor import (
        ExecutionPolicy,
        Executor,
        ExecutorConfig,
        HandlerContext,
        HandlerRegistry,
        QueueUnreachable,
    )

__all__ = [
    "DEFAULT_TARGET",
    "TERMINAL_STATES",
    "AlreadyExists",
    "AsyncClient",
    "AsyncTaskRun",
    "AuditAction",
    "AuditEvent",
    "Backfill",
    "BatchCreateJobsView",
    "BatchCreated",
    "BulkFailure",
    "BulkResult",
    "Cancelled",
    "ChannelTls",
    "Client",
    "ClientConfig",
    "Conflict",
    "CreatedJob",
    "DeadlineExceeded",
    "ExecutionPolicy",
    "Executor",
    "ExecutorConfig",
    "FailedPrecondition",
    "FieldViolation",
    "HandlerContext",
    "HandlerRegistry",
    "InvalidArgument",
    "Job",
    "JobFields",
    "JobState",
    "JobmeshError",
    "LogLine",
    "LogStream",
    "NonRetryableError",
    "NotFound",
    "OverlapPolicy",
    "PermissionDenied",
    "Priority",
    "QueueUnreachable",
    "ResourceExhausted",
    "RetryConfig",
    "Run",
    "RunAttempt",
    "RunChanges",
    "RunCount",
    "RunState",
    "RunTrigger",
    "SchedulePreview",
    "Task",
    "TaskArgumentError",
    "TaskFailed",
    "TaskRun",
    "Tasks",
    "Unauthenticated",
    "Unavailable",
    "UpdateFields",
    "at",
    "command",
    "create_job_request",
    "cron",
    "error_type_of",
    "handler",
    "http",
    "immediately",
    "is_terminal",
    "retry_policy",
]

_EXECUTOR_NAMES = frozenset(
    {"ExecutionPolicy", "Executor", "ExecutorConfig", "HandlerContext", "HandlerRegistry", "QueueUnreachable"}
)


def __getattr__(name: str) -> Any:
    """The executor's public names, imported when first asked for (it brings the queue adapters along)."""
    if name in _EXECUTOR_NAMES:
        return getattr(importlib.import_module("jobmesh.executor"), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
