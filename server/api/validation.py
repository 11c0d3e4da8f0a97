"""Request validation: every problem of a request is reported at once as `BadRequest` field violations.

Limits (documented in the README):
- a job definition serializes to at most 256 KiB; a handler payload or an HTTP body at most 128 KiB;
- display name 256 characters; at most 64 labels, keys 1-63 characters `[a-z0-9_.-/]`, values up to 63;
- `run_at` and a cron schedule's `start_time` and `end_time` no more than 1 year in the past and 10 years in
  the future;
- durations are never negative; timeouts and backoffs at most 7 days; at most 100 attempts.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Mapping
from datetime import UTC, datetime, timedelta
from urllib.parse import urlsplit

from google.protobuf import duration_pb2, timestamp_pb2

from jobmesh.core.errors import FieldViolation, InvalidArgument
from jobmesh.core.flow_control import concurrency_problems
from jobmesh.core.names import DEFAULT_NAMESPACE, JOB_ID, NAMESPACE, QUEUE_NAME
from jobmesh.core.run_identity import IDENTITY_VARIABLES, is_idempotency_header
from jobmesh.core.schedules import CronError, parse_cron, parse_time_zone
from jobmesh.core.secret_refs import (
    SecretQueues,
    SecretReference,
    SecretReferenceError,
    embedded_references,
    refused_reference,
    secret_reference,
)
from jobmesh.v1 import job_pb2

MAX_JOB_BYTES = 256 * 1024
MAX_PAYLOAD_BYTES = 128 * 1024
MAX_DISPLAY_NAME = 256
MAX_LABELS = 64
MAX_LABEL_VALUE = 63
MAX_REQUEST_ID = 128
MAX_ARGV = 1024
MAX_STRING = 8192
MAX_ATTEMPTS = 100
MAX_DURATION = timedelta(days=7)
MAX_FUTURE = timedelta(days=3653)
MAX_PAST = timedelta(days=366)
MIN_HEARTBEAT_TIMEOUT = timedelta(seconds=3)  # a few session renewals (ServerConfig.session_renewal_interval)
HTTP_METHODS = frozenset({"GET", "POST", "PUT", "PATCH", "DELETE", "HEAD", "OPTIONS"})

LABEL_KEY = re.compile(r"^[a-z0-9]([a-z0-9_.\-/]{0,61}[a-z0-9])?$")
HEADER_NAME = re.compile(r"^[!#$%&'*+\-.^_`|~0-9A-Za-z]{1,256}$")
ENV_NAME = re.compile(r"^[^=\x00]{1,256}$")

TIMESTAMP_MIN = datetime(1, 1, 1, tzinfo=UTC)
NO_SECRET_QUEUES = SecretQueues()

# Why the job may not use a secret it references (None: it may).
SecretRefusal = Callable[[SecretReference], str | None]


class Violations:
    """Collects field violations; `raise_if_any` turns them into one INVALID_ARGUMENT."""

    def __init__(self) -> None:
        self.items: list[FieldViolation] = []

    def add(self, field: str, description: str) -> None:
        self.items.append(FieldViolation(field, description))

    def raise_if_any(self) -> None:
        if self.items:
            raise InvalidArgument(self.items)

    def text(self, field: str, value: str, *, limit: int = MAX_STRING, required: bool = False) -> None:
        if required and not value:
            self.add(field, "required")
        elif len(value) > limit:
            self.add(field, f"longer than {limit} characters")
        elif "\x00" in value:
            self.add(field, "contains a NUL character")

    def duration(
        self, field: str, value: duration_pb2.Duration, *, maximum: timedelta = MAX_DURATION
    ) -> timedelta | None:
        if value.seconds < 0 or value.nanos < 0:
            self.add(field, "must not be negative")
            return None
        if value.nanos > 999_999_999 or value.seconds > maximum.total_seconds():
            self.add(field, f"must be at most {maximum}")
            return None
        return timedelta(seconds=value.seconds, microseconds=value.nanos // 1000)

    def moment(self, field: str, value: timestamp_pb2.Timestamp, now: datetime) -> datetime | None:
        """A time a job may name: no more than a year back, no more than 10 years ahead."""
        moment = self.timestamp(field, value)
        if moment is not None and moment > now + MAX_FUTURE:
            self.add(field, "more than 10 years away")
        elif moment is not None and moment < now - MAX_PAST:
            self.add(field, "more than a year in the past")
        else:
            return moment
        return None

    def timestamp(self, field: str, value: timestamp_pb2.Timestamp) -> datetime | None:
        if not 0 <= value.nanos <= 999_999_999 or not -62135596800 <= value.seconds <= 253402300799:
            self.add(field, "is not a valid timestamp")
            return None
        return TIMESTAMP_MIN + timedelta(
            seconds=value.seconds + 62135596800, microseconds=value.nanos // 1000
        )


def validate_job(
    job: job_pb2.Job, now: datetime, *, prefix: str = "job", secret_queues: SecretQueues = NO_SECRET_QUEUES
) -> None:
    """Raises InvalidArgument listing every problem of a job definition."""
    found = Violations()
    check_job(found, job, now, prefix, secret_queues)
    found.raise_if_any()


def check_job(
    found: Violations,
    job: job_pb2.Job,
    now: datetime,
    prefix: str,
    secret_queues: SecretQueues = NO_SECRET_QUEUES,
) -> None:
    """Adds every problem of a job definition to `found`; `secret_queues`: the secrets granted to some queues
    only."""
    if job.ByteSize() > MAX_JOB_BYTES:
        found.add(prefix, f"the job serializes to more than {MAX_JOB_BYTES} bytes")
        return
    found.text(f"{prefix}.display_name", job.display_name, limit=MAX_DISPLAY_NAME)
    _check_labels(found, job.labels, f"{prefix}.labels")
    if not job.HasField("schedule") or not job.schedule.WhichOneof("kind"):
        found.add(f"{prefix}.schedule", "required: one of immediate, run_at or cron")
    else:
        check_schedule(found, job.schedule, now, f"{prefix}.schedule")
    if not job.HasField("target") or not job.target.WhichOneof("kind"):
        found.add(f"{prefix}.target", "required: one of command, http or handler")
    else:
        _check_target(found, job.target, f"{prefix}.target", _secret_refusal(job, secret_queues))
    _check_retry(found, job.retry_policy, f"{prefix}.retry_policy")
    found.duration(f"{prefix}.execution_timeout", job.execution_timeout)
    heartbeat = found.duration(f"{prefix}.heartbeat_timeout", job.heartbeat_timeout)
    if heartbeat is not None and timedelta(0) < heartbeat < MIN_HEARTBEAT_TIMEOUT:
        found.add(f"{prefix}.heartbeat_timeout", f"must be at least {MIN_HEARTBEAT_TIMEOUT} (or unset)")
    if job.priority not in job_pb2.Priority.values():
        found.add(f"{prefix}.priority", f"unknown priority {job.priority}")
    if job.namespace and not NAMESPACE.match(job.namespace):
        found.add(f"{prefix}.namespace", "1-63 characters of a-z, 0-9 and `-`, starting with a letter")
    if job.queue and not QUEUE_NAME.match(job.queue):
        found.add(
            f"{prefix}.queue", "1-63 characters of a-z, 0-9, `_`, `.`, `-`, starting with a letter or digit"
        )
    for name, problem in concurrency_problems(job.concurrency_key, job.concurrency_limit).items():
        found.add(f"{prefix}.{name}", problem)


def _secret_refusal(job: job_pb2.Job, secret_queues: SecretQueues) -> SecretRefusal:
    """What the job may not reference: another namespace's secrets, and those granted to other queues."""
    namespace = job.namespace or DEFAULT_NAMESPACE

    def refusal(reference: SecretReference) -> str | None:
        return refused_reference(reference, namespace, job.queue, secret_queues)

    return refusal


def _check_labels(found: Violations, labels: Mapping[str, str], field: str) -> None:
    if len(labels) > MAX_LABELS:
        found.add(field, f"more than {MAX_LABELS} labels")
        return
    for key, value in labels.items():
        if not LABEL_KEY.match(key):
            found.add(f"{field}[{key[:64]!r}]", "keys are 1-63 characters of a-z, 0-9, `_`, `.`, `-`, `/`")
        found.text(f"{field}[{key[:64]!r}]", value, limit=MAX_LABEL_VALUE)


def check_schedule(found: Violations, schedule: job_pb2.Schedule, now: datetime, field: str) -> None:
    kind = schedule.WhichOneof("kind")
    if kind == "run_at":
        found.moment(f"{field}.run_at", schedule.run_at, now)
    elif kind == "cron":
        _check_cron(found, schedule.cron, now, f"{field}.cron")


def _check_cron(found: Violations, cron: job_pb2.Schedule.Cron, now: datetime, field: str) -> None:
    found.text(f"{field}.expression", cron.expression, limit=256, required=True)
    found.text(f"{field}.time_zone", cron.time_zone, limit=64)
    try:
        parse_time_zone(cron.time_zone)
    except CronError as error:
        found.add(f"{field}.time_zone", str(error))
    if cron.expression and len(cron.expression) <= 256 and "\x00" not in cron.expression:
        try:
            parse_cron(cron.expression, "UTC")
        except CronError as error:
            found.add(f"{field}.expression", str(error))
    start = found.moment(f"{field}.start_time", cron.start_time, now) if cron.HasField("start_time") else None
    end = found.moment(f"{field}.end_time", cron.end_time, now) if cron.HasField("end_time") else None
    if start is not None and end is not None and end <= start:
        found.add(f"{field}.end_time", "must be after start_time")
    found.duration(f"{field}.jitter", cron.jitter, maximum=timedelta(days=1))
    found.duration(f"{field}.catchup_window", cron.catchup_window, maximum=timedelta(days=366))
    if cron.overlap_policy not in job_pb2.OverlapPolicy.values():
        found.add(f"{field}.overlap_policy", f"unknown overlap policy {cron.overlap_policy}")


def _check_target(found: Violations, target: job_pb2.Target, field: str, refusal: SecretRefusal) -> None:
    kind = target.WhichOneof("kind")
    if kind == "command":
        _check_command(found, target.command, f"{field}.command", refusal)
    elif kind == "http":
        _check_http(found, target.http, f"{field}.http", refusal)
    elif kind == "handler":
        found.text(f"{field}.handler.name", target.handler.name, limit=256, required=True)
        if len(target.handler.payload) > MAX_PAYLOAD_BYTES:
            found.add(f"{field}.handler.payload", f"larger than {MAX_PAYLOAD_BYTES} bytes")


def _check_command(
    found: Violations, command: job_pb2.Target.Command, field: str, refusal: SecretRefusal
) -> None:
    if not command.argv or not command.argv[0]:
        found.add(f"{field}.argv", "required: the program to run, then its arguments")
    if len(command.argv) > MAX_ARGV:
        found.add(f"{field}.argv", f"more than {MAX_ARGV} arguments")
    for index, arg in enumerate(command.argv[:MAX_ARGV]):
        found.text(f"{field}.argv[{index}]", arg)
    for name, value in command.env.items():
        if not ENV_NAME.match(name):
            found.add(f"{field}.env", f"{name[:64]!r} is not an environment variable name")
        elif name in IDENTITY_VARIABLES:
            found.add(
                f"{field}.env[{name!r}]", "set by the executor to the run's identity; a job cannot set it"
            )
        found.text(f"{field}.env[{name[:64]!r}]", value)
        try:
            reference = secret_reference(value)
        except SecretReferenceError as exc:
            found.add(f"{field}.env[{name[:64]!r}]", str(exc))
            continue
        if reference is not None and (refused := refusal(reference)):
            found.add(f"{field}.env[{name[:64]!r}]", refused)
    found.text(f"{field}.working_dir", command.working_dir, limit=4096)


def _check_http(found: Violations, http: job_pb2.Target.Http, field: str, refusal: SecretRefusal) -> None:
    if http.method and http.method.upper() not in HTTP_METHODS:
        found.add(f"{field}.method", f"one of {', '.join(sorted(HTTP_METHODS))}")
    found.text(f"{field}.url", http.url, limit=4096, required=True)
    if http.url and not _is_http_url(http.url):
        found.add(f"{field}.url", "an absolute http:// or https:// URL with a host")
    for name, value in http.headers.items():
        if not HEADER_NAME.match(name):
            found.add(f"{field}.headers", f"{name[:64]!r} is not a header name")
        elif is_idempotency_header(name):
            found.add(
                f"{field}.headers[{name[:64]!r}]",
                "set by the executor to the run's identity; a job cannot set it",
            )
        if any(ch in value for ch in "\r\n\x00"):
            found.add(f"{field}.headers[{name[:64]!r}]", "contains a line break or NUL")
        _check_embedded(found, value, f"{field}.headers[{name[:64]!r}]", refusal)
    if len(http.body) > MAX_PAYLOAD_BYTES:
        found.add(f"{field}.body", f"larger than {MAX_PAYLOAD_BYTES} bytes")
    else:
        _check_embedded(found, http.body.decode("utf-8", errors="replace"), f"{field}.body", refusal)


def _check_embedded(found: Violations, text: str, field: str, refusal: SecretRefusal) -> None:
    for _, reference in embedded_references(text):
        if refused := refusal(reference):
            found.add(field, refused)


def _is_http_url(url: str) -> bool:
    try:
        parts = urlsplit(url)
    except ValueError:
        return False
    return parts.scheme in ("http", "https") and bool(parts.hostname) and "\x00" not in url


def _check_retry(found: Violations, retry: job_pb2.RetryPolicy, field: str) -> None:
    if not 0 <= retry.max_attempts <= MAX_ATTEMPTS:
        found.add(f"{field}.max_attempts", f"from 0 to {MAX_ATTEMPTS}")
    found.duration(f"{field}.initial_backoff", retry.initial_backoff)
    found.duration(f"{field}.max_backoff", retry.max_backoff)
    multiplier = retry.backoff_multiplier
    if not math.isfinite(multiplier) or not (multiplier == 0 or 1 <= multiplier <= 100):
        found.add(f"{field}.backoff_multiplier", "from 1 to 100 (or 0 for the default, 2)")
    if len(retry.non_retryable_error_types) > 64:
        found.add(f"{field}.non_retryable_error_types", "more than 64 entries")
    for index, name in enumerate(retry.non_retryable_error_types[:64]):
        found.text(f"{field}.non_retryable_error_types[{index}]", name, limit=256, required=True)


def check_request_id(found: Violations, request_id: str, field: str = "request_id") -> None:
    found.text(field, request_id, limit=MAX_REQUEST_ID)


def check_job_id(found: Violations, job_id: str, field: str = "job_id") -> None:
    if job_id and not JOB_ID.match(job_id):
        found.add(field, "1-63 characters of a-z, 0-9 and `-`, starting with a letter")


def check_page_size(found: Violations, page_size: int, field: str = "page_size") -> None:
    if page_size < 0:
        found.add(field, "must not be negative")


def clamp_page_size(page_size: int, default: int = 50, maximum: int = 1000) -> int:
    return default if page_size == 0 else min(page_size, maximum)
