"""The `handler` target: Python callables registered by name in an executor embedded in a user's program.

A handler takes one `HandlerContext` and may be a coroutine function (run on the executor's loop) or a plain
function (run on a thread of its own, so that it cannot stall heartbeats). What it returns, unless None, is
kept on the run as JSON (`core.results`: a value JSON cannot encode, or one too large, fails the attempt).
Whatever it raises fails the attempt with the exception's `jobmesh_error_type` attribute, or else its class
name, as the error type, so that retry policies can name it.
"""

from __future__ import annotations

import asyncio
import importlib
import inspect
import logging
import math
import threading
import time
import traceback
from collections.abc import Awaitable, Callable, Iterator, Mapping
from dataclasses import replace

from jobmesh.core.results import ResultRefused, encode_result
from jobmesh.executor.outcomes import SUCCEEDED, AttemptIO, Stop, TargetOutcome, failed
from jobmesh.executor.threads import in_daemon_thread, until_done_or
from jobmesh.v1 import job_pb2, run_pb2

log = logging.getLogger(__name__)

Handler = Callable[["HandlerContext"], Awaitable[object] | object]


class HandlerContext:
    """What a handler gets. `log` and `report_progress` may be called from any thread. `cancelled` is set when
    the attempt must stop (cancel, timeout, drain): long-running sync handlers should check it. An async
    handler is also cancelled (`asyncio.CancelledError`) at once."""

    def __init__(self, *, payload: bytes, run: str, attempt: int, io: AttemptIO) -> None:
        self.payload = payload
        self.run = run  # `jobs/{job}/runs/{run}`: the same on every attempt of the run (an idempotency key)
        self.attempt = attempt  # 1 on the first attempt, 2 on its first retry, ...
        self.cancelled = threading.Event()
        self._io = io
        self._loop = asyncio.get_running_loop()
        self._loop_thread = threading.get_ident()

    def log(self, text: str) -> None:
        """Adds lines to the run's log (its stdout)."""
        for line in text.splitlines() or [""]:
            self._on_loop(self._io.log, run_pb2.LOG_STREAM_STDOUT, line)

    def report_progress(self, fraction: float, message: str = "") -> None:
        """Progress from 0 to 1 (clamped), with a short message."""
        fraction = 0.0 if math.isnan(fraction) else min(max(fraction, 0.0), 1.0)
        self._on_loop(self._io.progress, fraction, message)

    def _on_loop(self, call: Callable[..., None], *args: object) -> None:
        if threading.get_ident() == self._loop_thread:
            call(*args)
        elif not self._loop.is_closed():
            self._loop.call_soon_threadsafe(call, *args)


class HandlerRegistry:
    """Handlers by name. `registry.register("name", fn)`, or `@registry.handler("name")` on a function."""

    def __init__(self, handlers: Mapping[str, Handler] | None = None) -> None:
        self._handlers: dict[str, Handler] = {}
        for name, function in (handlers or {}).items():
            self.register(name, function)

    def register(self, name: str, function: Handler) -> None:
        if not name:
            raise ValueError("a handler needs a name")
        if not callable(function):
            raise TypeError(f"handler {name!r} is not callable")
        if name in self._handlers:
            raise ValueError(f"handler {name!r} is already registered")
        self._handlers[name] = function

    def handler(self, name: str) -> Callable[[Handler], Handler]:
        def decorate(function: Handler) -> Handler:
            self.register(name, function)
            return function

        return decorate

    @classmethod
    def load(cls, spec: str) -> HandlerRegistry:
        """The handlers that `MODULE:ATTR` names (ATTR may be dotted): a mapping of handler name to callable
        (a dict, or a `HandlerRegistry`) in an importable MODULE. ValueError says what is wrong with it."""
        module_name, _, attribute = spec.strip().partition(":")
        if not module_name or not attribute:
            raise ValueError(f"handlers {spec!r}: expected MODULE:ATTR, such as myapp.tasks:handlers")
        try:
            found: object = importlib.import_module(module_name)
        except ImportError as exc:
            raise ValueError(
                f"handlers {spec!r}: cannot import {module_name!r} ({exc}; on PYTHONPATH?)"
            ) from None
        for part in attribute.split("."):
            try:
                found = getattr(found, part)
            except AttributeError:
                raise ValueError(
                    f"handlers {spec!r}: {module_name!r} has no attribute {attribute!r}"
                ) from None
        if isinstance(found, HandlerRegistry):
            return found
        if not isinstance(found, Mapping):
            raise ValueError(
                f"handlers {spec!r}: a {type(found).__name__}, not a mapping of handler names to callables"
            )
        try:
            return cls(found)
        except (TypeError, ValueError) as exc:
            raise ValueError(f"handlers {spec!r}: {exc}") from None

    def get(self, name: str) -> Handler | None:
        return self._handlers.get(name)

    def names(self) -> list[str]:
        return sorted(self._handlers)

    def __contains__(self, name: object) -> bool:
        return name in self._handlers

    def __iter__(self) -> Iterator[str]:
        return iter(sorted(self._handlers))

    def __len__(self) -> int:
        return len(self._handlers)


async def run_handler(
    target: job_pb2.Target.Handler,
    registry: HandlerRegistry,
    *,
    run: str,
    attempt: int,
    io: AttemptIO,
    stop: Stop,
) -> TargetOutcome:
    function = registry.get(target.name)
    if function is None:
        known = ", ".join(registry.names()) or "none"
        return failed("UnknownHandler", f"no handler {target.name!r} in this executor (it has: {known})")
    context = HandlerContext(payload=bytes(target.payload), run=run, attempt=attempt, io=io)
    if _is_async(function):
        call: asyncio.Future[object] = asyncio.ensure_future(_call_async(function, context))
    else:
        call = in_daemon_thread(lambda: function(context), name=f"jobmesh-handler:{target.name}")
    await until_done_or(call, stop.wait())
    if not call.done():
        return await _stop(call, context, stop, target.name)
    try:
        result = call.result()
        if inspect.isawaitable(result):  # a plain function that returned a coroutine
            result = await result
    except asyncio.CancelledError:
        if stop.requested:
            return failed("Cancelled", "the handler was cancelled")
        raise
    except BaseException as exc:  # SystemExit from a handler ends its attempt, not the executor
        for line in traceback.format_exception(exc):
            context.log(line.rstrip("\n"))
        return failed(error_type_of(exc), str(exc) or repr(exc))
    return _succeeded(result)


def error_type_of(exc: BaseException) -> str:
    """The error type that retry policies match: the exception's `jobmesh_error_type`, else its class name."""
    chosen = getattr(exc, "jobmesh_error_type", None)
    return chosen if isinstance(chosen, str) and chosen else type(exc).__name__


def _succeeded(value: object) -> TargetOutcome:
    try:
        text = encode_result(value)
    except ResultRefused as refused:
        return failed(refused.error_type, refused.message)
    return SUCCEEDED if text is None else replace(SUCCEEDED, result=text)


async def _stop(
    call: asyncio.Future[object], context: HandlerContext, stop: Stop, name: str
) -> TargetOutcome:
    """Asks the handler to stop (the event; and CancelledError for an async one), waits for it until the
    stop's kill time, then abandons it."""
    context.cancelled.set()
    if not isinstance(call, asyncio.Task):  # a thread: it can only be asked
        grace = max(stop.kill_at - time.monotonic(), 0.0)
        await asyncio.wait({call}, timeout=grace)
    else:
        call.cancel()
        await asyncio.wait({call}, timeout=max(stop.kill_at - time.monotonic(), 0.0))
    if not call.done():
        log.warning("handler %r ignored its stop; abandoning it", name)
        call.cancel()
    elif not call.cancelled():
        call.exception()  # retrieved: its outcome no longer matters
    return failed("Stopped", "the handler was stopped")


async def _call_async(function: Handler, context: HandlerContext) -> object:
    result = function(context)
    if inspect.isawaitable(result):
        return await result
    return result


def _is_async(function: Handler) -> bool:
    call = getattr(function, "__call__", None)  # noqa: B004 - a callable object with an async __call__
    return inspect.iscoroutinefunction(function) or inspect.iscoroutinefunction(call)
