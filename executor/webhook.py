"""The `http` target: one webhook call with the standard library, on a thread of its own.

A stop abandons the call at once (a blocking socket cannot be interrupted from outside); the thread ends by
itself at the call's timeout at the latest.
"""

from __future__ import annotations

import http.client
import urllib.error
import urllib.parse
import urllib.request

from jobmesh.executor.outcomes import AttemptIO, Stop, TargetOutcome, failed
from jobmesh.executor.threads import in_daemon_thread, until_done_or
from jobmesh.v1 import job_pb2, run_pb2

MAX_LOGGED_BODY = 64 * 1024
_BODYLESS = {"GET", "HEAD", "DELETE", "OPTIONS", "TRACE"}


class _NoRedirects(urllib.request.HTTPRedirectHandler):
    """A webhook answers, it does not move: urllib turns a redirected POST into a GET without its body."""

    def redirect_request(self, *args: object, **kwargs: object) -> None:
        return None


_OPENER = urllib.request.build_opener(_NoRedirects)


async def run_http(target: job_pb2.Target.Http, io: AttemptIO, stop: Stop, timeout: float) -> TargetOutcome:
    method = (target.method or "POST").upper()
    if urllib.parse.urlsplit(target.url).scheme.lower() not in {"http", "https"}:
        return failed("HttpError", f"not an http or https URL: {target.url!r}")
    body = bytes(target.body) if target.body or method not in _BODYLESS else None
    try:
        request = urllib.request.Request(target.url, data=body, headers=dict(target.headers), method=method)
    except ValueError as exc:
        return failed("HttpError", f"bad request: {exc}")
    call = in_daemon_thread(lambda: _send(request, timeout), name=f"jobmesh-http:{method}")
    await until_done_or(call, stop.wait())
    if not call.done():
        call.cancel()
        return failed("HttpError", "the call was abandoned")
    try:
        status, reason, text = call.result()
    except (OSError, http.client.HTTPException, ValueError) as exc:
        reason_text = exc.reason if isinstance(exc, urllib.error.URLError) else exc
        return failed("HttpError", f"{method} {target.url} failed: {reason_text}")
    io.log(run_pb2.LOG_STREAM_SYSTEM, f"{method} {target.url} -> {status} {reason}")
    for line in text.splitlines():
        io.log(run_pb2.LOG_STREAM_STDOUT, line)
    if 200 <= status < 300:
        return TargetOutcome(run_pb2.RUN_STATE_SUCCEEDED)
    return failed("HttpStatus", f"{method} {target.url} answered {status} {reason}".rstrip())


def _send(request: urllib.request.Request, timeout: float) -> tuple[int, str, str]:
    """Status, reason and the start of the body; a non-2xx answer is an answer, not an exception."""
    try:
        with _OPENER.open(request, timeout=timeout) as response:
            return response.status, response.reason, _text(response.read(MAX_LOGGED_BODY))
    except urllib.error.HTTPError as exc:
        with exc:  # it holds the connection open until closed
            return exc.code, str(exc.reason), _text(exc.read(MAX_LOGGED_BODY))


def _text(data: bytes) -> str:
    return data.decode("utf-8", errors="replace")
