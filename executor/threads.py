"""Blocking calls (sync handlers, webhooks) on daemon threads of their own.

Not the loop's default executor: a cancelled attempt abandons its call, which may never return (a handler
that ignores its cancellation event), and `asyncio.run` waits for the default executor's threads at exit.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

T = TypeVar("T")


def in_daemon_thread(call: Callable[[], T], name: str) -> asyncio.Future[T]:
    """Starts `call` on a new daemon thread; the future gets its result or exception. Cancelling the future
    abandons the call: its eventual outcome is dropped."""
    loop = asyncio.get_running_loop()
    future: asyncio.Future[T] = loop.create_future()

    def settle(result: T | None, error: BaseException | None) -> None:
        if future.done():
            return  # abandoned
        if error is not None:
            future.set_exception(error)
        else:
            future.set_result(result)  # type: ignore[arg-type]

    def target() -> None:
        result: T | None = None
        error: BaseException | None = None
        try:
            result = call()
        except BaseException as exc:  # even SystemExit: it ends the attempt, not the executor
            error = exc
        with contextlib.suppress(RuntimeError):  # the loop has closed: nobody is waiting any more
            loop.call_soon_threadsafe(settle, result, error)

    threading.Thread(target=target, name=name, daemon=True).start()
    return future


async def until_done_or(call: asyncio.Future[Any], stopped: Awaitable[object]) -> None:
    """Waits until `call` is done or `stopped` completes, whichever comes first (the call keeps going)."""
    stopper = asyncio.ensure_future(stopped)
    try:
        await asyncio.wait({call, stopper}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        stopper.cancel()
