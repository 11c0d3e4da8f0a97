"""The `http` target: one webhook call with the standard library, on a thread of its own.

The executor's policy checks the destination first (executor/policy.py): the host is resolved once, every
address it has is checked, and the call connects to a checked address itself, so no second lookup can be
rebound to another one. Redirects are not followed: a webhook answers, it does not move (and a redirect could
point anywhere). A stop abandons the call at once (a blocking socket cannot be interrupted from outside); the
thread ends by itself at the call's timeout at the latest.
"""

from __future__ import annotations

import dataclasses
import http.client
import socket
import ssl
import urllib.parse

from jobmesh.core.attempts import AttemptRef
from jobmesh.core.error_types import ErrorType
from jobmesh.core.run_identity import with_idempotency_key
from jobmesh.core.secret_refs import SECRET_SCHEME
from jobmesh.executor.outcomes import AttemptIO, Stop, TargetOutcome, failed
from jobmesh.executor.policy import Destination, ExecutionPolicy, TargetRefused
from jobmesh.executor.redaction import Redactor
from jobmesh.executor.secrets import (
    DEFAULT_SCOPE,
    SecretMissing,
    SecretScope,
    SecretSource,
    SecretSourceError,
    resolve_text,
)
from jobmesh.executor.threads import in_daemon_thread, until_done_or
from jobmesh.v1 import job_pb2, run_pb2

MAX_LOGGED_BODY = 64 * 1024
USER_AGENT = "jobmesh-executor"
_BODYLESS = {"GET", "HEAD", "DELETE", "OPTIONS", "TRACE"}


async def run_http(
    target: job_pb2.Target.Http,
    io: AttemptIO,
    stop: Stop,
    timeout: float,
    policy: ExecutionPolicy,
    *,
    identity: AttemptRef,
    secrets: SecretSource | None = None,
    scope: SecretScope = DEFAULT_SCOPE,
) -> TargetOutcome:
    """The call, with the references in its header values and body resolved from `secrets` (those of its
    `scope`); their values are redacted from what it logs and its error text. Its `Idempotency-Key` header
    is the run identity of `identity` (core/run_identity), over any the job set."""
    try:
        headers, body_text, values = _resolved(target, secrets, scope)
    except SecretMissing as exc:
        return failed(ErrorType.SECRET_NOT_FOUND, str(exc))
    except SecretSourceError as exc:
        return failed(ErrorType.SECRET_SOURCE_ERROR, str(exc))
    headers = with_idempotency_key(headers, identity)
    redactor = Redactor(tuple(values))
    outcome = await _call(target, headers, body_text, io, stop, timeout, policy, redactor)
    return dataclasses.replace(outcome, error_message=redactor.text(outcome.error_message))


def _resolved(
    target: job_pb2.Target.Http, secrets: SecretSource | None, scope: SecretScope
) -> tuple[dict[str, str], bytes, list[str]]:
    headers, values = dict(target.headers), list[str]()
    body = bytes(target.body)
    if secrets is None:
        return headers, body, values
    for name, value in target.headers.items():
        headers[name], used = resolve_text(value, secrets, scope, f"header {name}")
        values += used
    if SECRET_SCHEME.encode() in body:
        text, used = resolve_text(body.decode("utf-8", errors="replace"), secrets, scope, "the body")
        body, values = text.encode(), values + used
    return headers, body, values


async def _call(  # noqa: PLR0917 - the call's parts, resolved
    target: job_pb2.Target.Http,
    resolved_headers: dict[str, str],
    resolved_body: bytes,
    io: AttemptIO,
    stop: Stop,
    timeout: float,
    policy: ExecutionPolicy,
    redactor: Redactor,
) -> TargetOutcome:
    method = (target.method or "POST").upper()
    try:
        url = urllib.parse.urlsplit(target.url)
        url.port  # noqa: B018 - raises ValueError for a bad port
    except ValueError as exc:
        return failed(ErrorType.HTTP_ERROR, f"bad URL {target.url!r}: {exc}")
    if url.scheme.lower() not in {"http", "https"} or not url.hostname:
        return failed(ErrorType.HTTP_ERROR, f"not an http or https URL with a host: {target.url!r}")
    body = resolved_body if resolved_body or method not in _BODYLESS else None
    headers = {"User-Agent": USER_AGENT, **resolved_headers}
    call = in_daemon_thread(
        lambda: _send(policy, url, method, body, headers, timeout), name=f"jobmesh-http:{method}"
    )
    await until_done_or(call, stop.wait())
    if not call.done():
        call.cancel()
        return failed(ErrorType.HTTP_ERROR, "the call was abandoned")
    try:
        status, reason, text = call.result()
    except TargetRefused as exc:
        return failed(ErrorType.TARGET_NOT_ALLOWED, f"{method} {target.url} refused: {exc}")
    except (OSError, http.client.HTTPException, ValueError) as exc:
        return failed(ErrorType.HTTP_ERROR, f"{method} {target.url} failed: {exc}")
    io.log(run_pb2.LOG_STREAM_SYSTEM, f"{method} {target.url} -> {status} {reason}")
    for line in redactor.text(text).splitlines():  # a server may echo what it was sent
        io.log(run_pb2.LOG_STREAM_STDOUT, line)
    if 200 <= status < 300:
        return TargetOutcome(run_pb2.RUN_STATE_SUCCEEDED)
    return failed(ErrorType.HTTP_STATUS, f"{method} {target.url} answered {status} {reason}".rstrip())


def _send(  # noqa: PLR0917 - the request's parts
    policy: ExecutionPolicy,
    url: urllib.parse.SplitResult,
    method: str,
    body: bytes | None,
    headers: dict[str, str],
    timeout: float,
) -> tuple[int, str, str]:
    """Status, reason and the start of the body; TargetRefused before any connection when not allowed."""
    destination = policy.check_http(url)
    connection = _connection(destination, timeout)
    path = urllib.parse.urlunsplit(("", "", url.path or "/", url.query, ""))
    try:
        connection.request(method, path, body=body, headers=headers)
        response = connection.getresponse()
        return response.status, response.reason, _text(response.read(MAX_LOGGED_BODY))
    finally:
        connection.close()


def _connection(destination: Destination, timeout: float) -> http.client.HTTPConnection:
    if destination.scheme == "https":
        return _PinnedHTTPS(destination, timeout)
    return _PinnedHTTP(destination, timeout)


def _connect_checked(destination: Destination, timeout: float | None) -> socket.socket:
    """A connection to the first checked address that answers (the name is not resolved again)."""
    error: OSError | None = None
    for address in destination.addresses:
        try:
            return socket.create_connection((address, destination.port), timeout)
        except OSError as exc:
            error = exc
    raise error or OSError(f"no address for {destination.host!r}")


class _PinnedHTTP(http.client.HTTPConnection):
    def __init__(self, destination: Destination, timeout: float) -> None:
        super().__init__(destination.host, destination.port, timeout=timeout)
        self._destination = destination

    def connect(self) -> None:
        self.sock = _connect_checked(self._destination, self.timeout)


class _PinnedHTTPS(http.client.HTTPSConnection):
    def __init__(self, destination: Destination, timeout: float) -> None:
        super().__init__(
            destination.host, destination.port, timeout=timeout, context=ssl.create_default_context()
        )
        self._destination = destination

    def connect(self) -> None:
        sock = _connect_checked(self._destination, self.timeout)
        self.sock = self._context.wrap_socket(sock, server_hostname=self._destination.host)  # type: ignore[attr-defined]


def _text(data: bytes) -> str:
    return data.decode("utf-8", errors="replace")
