"""Builders of a job's parts with Python values: when it runs (`immediately`, `at`, `cron`), what it runs
(`command`, `http`, `handler`) and how it is retried (`retry_policy`), with `datetime` and `timedelta`."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime, timedelta
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from google.protobuf import duration_pb2, timestamp_pb2

from jobmesh.client._enums import OverlapPolicy
from jobmesh.v1 import job_pb2

__all__ = [
    "at",
    "command",
    "cron",
    "duration",
    "handler",
    "http",
    "immediately",
    "retry_policy",
    "timestamp",
]


def timestamp(moment: datetime, what: str = "time") -> timestamp_pb2.Timestamp:
    """A protobuf Timestamp of an aware datetime; a naive one is refused: its time zone would be a guess."""
    if moment.tzinfo is None or moment.utcoffset() is None:
        raise ValueError(
            f"{what} {moment.isoformat()} has no time zone: give an aware datetime,"
            " such as datetime.now(timezone.utc) or datetime(..., tzinfo=ZoneInfo('Europe/Paris'))"
        )
    stamp = timestamp_pb2.Timestamp()
    stamp.FromDatetime(moment)
    return stamp


def duration(span: timedelta) -> duration_pb2.Duration:
    value = duration_pb2.Duration()
    value.FromTimedelta(span)
    return value


def immediately() -> job_pb2.Schedule:
    """Run once, as soon as the job is created."""
    return job_pb2.Schedule(immediate=job_pb2.Schedule.Immediate())


def at(moment: datetime) -> job_pb2.Schedule:
    """Run once at `moment` (an aware datetime), never before it."""
    return job_pb2.Schedule(run_at=timestamp(moment, "run_at"))


def cron(
    expression: str,
    *,
    time_zone: str = "UTC",
    start: datetime | None = None,
    end: datetime | None = None,
    jitter: timedelta | None = None,
    catchup_window: timedelta | None = None,
    overlap: OverlapPolicy | int = OverlapPolicy.UNSPECIFIED,
) -> job_pb2.Schedule:
    """Recurring runs: five fields, six (leading seconds) or a macro such as `@hourly`, read in the IANA
    `time_zone`. The server checks the expression; the zone is checked here too, so a typo fails early."""
    try:
        ZoneInfo(time_zone)
    except (ZoneInfoNotFoundError, ValueError):
        raise ValueError(f"unknown time zone {time_zone!r}: use an IANA name such as Europe/Paris") from None
    policy = job_pb2.OverlapPolicy.ValueType(OverlapPolicy(overlap))  # an unknown number fails here
    spec = job_pb2.Schedule.Cron(expression=expression, time_zone=time_zone, overlap_policy=policy)
    if start is not None:
        spec.start_time.CopyFrom(timestamp(start, "start"))
    if end is not None:
        spec.end_time.CopyFrom(timestamp(end, "end"))
    if jitter is not None:
        spec.jitter.CopyFrom(duration(jitter))
    if catchup_window is not None:
        spec.catchup_window.CopyFrom(duration(catchup_window))
    return job_pb2.Schedule(cron=spec)


def command(
    argv: Sequence[str], *, env: Mapping[str, str] | None = None, working_dir: str = ""
) -> job_pb2.Target:
    """A program run by the executor (which must allow it: `jobmesh dev` allows anything)."""
    if isinstance(argv, str) or not argv:
        raise ValueError("argv is a non-empty list of strings, such as ['sh', '-c', 'echo hi']")
    spec = job_pb2.Target.Command(argv=list(argv), env=dict(env or {}), working_dir=working_dir)
    return job_pb2.Target(command=spec)


def http(
    url: str, *, method: str = "POST", headers: Mapping[str, str] | None = None, body: bytes = b""
) -> job_pb2.Target:
    """A webhook call; a non-2xx answer fails the attempt."""
    spec = job_pb2.Target.Http(url=url, method=method, headers=dict(headers or {}), body=body)
    return job_pb2.Target(http=spec)


def handler(name: str, payload: bytes = b"") -> job_pb2.Target:
    """A Python function registered under `name` in an executor (see `jobmesh.executor`)."""
    return job_pb2.Target(handler=job_pb2.Target.Handler(name=name, payload=payload))


def retry_policy(
    max_attempts: int,
    *,
    initial_backoff: timedelta | None = None,
    multiplier: float = 0.0,
    max_backoff: timedelta | None = None,
    non_retryable_error_types: Sequence[str] = (),
) -> job_pb2.RetryPolicy:
    """How a job's failed attempts are retried (unset values take the server's defaults)."""
    policy = job_pb2.RetryPolicy(
        max_attempts=max_attempts,
        backoff_multiplier=multiplier,
        non_retryable_error_types=list(non_retryable_error_types),
    )
    if initial_backoff is not None:
        policy.initial_backoff.CopyFrom(duration(initial_backoff))
    if max_backoff is not None:
        policy.max_backoff.CopyFrom(duration(max_backoff))
    return policy
