"""Wall-clock instants as integer nanoseconds, and their protobuf forms.

Start times are wall-clock instants chosen by the server, so "never before start_time" is checked against
`time.time_ns()`, not against the loop's monotonic clock (the two may drift apart by NTP slewing).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable

from google.protobuf import duration_pb2, timestamp_pb2

NANOS = 1_000_000_000


def now_ns() -> int:
    return time.time_ns()


def timestamp_of_ns(ns: int) -> timestamp_pb2.Timestamp:
    seconds, nanos = divmod(ns, NANOS)
    return timestamp_pb2.Timestamp(seconds=seconds, nanos=nanos)


def ns_of_timestamp(timestamp: timestamp_pb2.Timestamp) -> int:
    return timestamp.seconds * NANOS + timestamp.nanos


def seconds_of(duration: duration_pb2.Duration) -> float:
    return duration.seconds + duration.nanos / NANOS


async def sleep_until(ns: int) -> None:
    """Returns at `ns` or just after it, never before. asyncio timers may fire a hair early (they run when
    within the clock resolution) and run on another clock, so re-check the wall clock and sleep the rest."""
    while (remaining := ns - time.time_ns()) > 0:
        await asyncio.sleep(remaining / NANOS)


async def within(awaitable: Awaitable[object], timeout: float) -> bool:
    """Awaits with a time limit: True when done in time. Not `asyncio.wait_for`, which on Python 3.11 can
    swallow a cancellation of the caller that arrives as the awaited thing completes (a loop cancelled at
    shutdown would then carry on forever)."""
    try:
        async with asyncio.timeout(max(timeout, 0.0)):
            await awaitable
    except TimeoutError:
        return False
    return True
