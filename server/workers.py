"""Where request handlers run their blocking store calls: reads and writes on thread pools of their own, so a
burst of creates never leaves a `GetJob` waiting for a thread; and how many jobs may be in creation at once.

Past `max_pending_creates` jobs in creation, while executors' messages wait longer than `max_stream_lag`
in this server (`StreamLag`), or while its event loop runs later than `max_loop_lag` (`LoopLag`), a create is
refused at once (`RESOURCE_EXHAUSTED` with a `RetryInfo`) instead
of joining a queue that grows without bound: the runs already accepted keep their promise, and the client
retries later.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from datetime import timedelta
from typing import ParamSpec, TypeVar

from jobmesh.core.errors import ResourceExhausted
from jobmesh.core.log_throttle import ThrottledLog
from jobmesh.core.metrics import REFUSALS
from jobmesh.server.loop_lag import LoopLag
from jobmesh.server.stream_lag import StreamLag

P = ParamSpec("P")
T = TypeVar("T")
log = logging.getLogger(__name__)

SERVER_OVERLOADED = "SERVER_OVERLOADED"
REFUSALS_LOGGED_EVERY = timedelta(seconds=5)  # a line per reason: refusals come by the thousand a second
READ_THREADS = 8
WRITE_THREADS = 8


class Workers:
    def __init__(
        self,
        stream_lag: StreamLag,
        loop_lag: LoopLag,
        *,
        max_pending_creates: int,
        max_stream_lag: timedelta,
        max_loop_lag: timedelta,
        retry_after: timedelta,
    ) -> None:
        self._reads = ThreadPoolExecutor(READ_THREADS, thread_name_prefix="jobmesh-read")
        self._writes = ThreadPoolExecutor(WRITE_THREADS, thread_name_prefix="jobmesh-write")
        self._stream_lag = stream_lag
        self._max_stream_lag = max_stream_lag
        self._loop_lag = loop_lag
        self._max_loop_lag = max_loop_lag
        self._max_pending_creates = max_pending_creates
        self._retry_after = retry_after
        self._refusals_log = ThrottledLog(log, REFUSALS_LOGGED_EVERY)
        self._pending_creates = 0  # the event loop's thread only

    @property
    def pending_creates(self) -> int:
        return self._pending_creates

    async def read(self, function: Callable[P, T], /, *args: P.args, **kwargs: P.kwargs) -> T:
        return await asyncio.get_running_loop().run_in_executor(
            self._reads, lambda: function(*args, **kwargs)
        )

    async def write(self, function: Callable[P, T], /, *args: P.args, **kwargs: P.kwargs) -> T:
        return await asyncio.get_running_loop().run_in_executor(
            self._writes, lambda: function(*args, **kwargs)
        )

    @contextlib.contextmanager
    def creating(self, jobs: int) -> Iterator[None]:
        """Counts `jobs` as in creation for the block; RESOURCE_EXHAUSTED when that passes the limit, or
        when the executors' messages wait too long."""
        if self._pending_creates and self._pending_creates + jobs > self._max_pending_creates:
            self._refuse(
                "pending_creates",
                f"the server has {self._pending_creates} jobs in creation, its limit is "
                f"{self._max_pending_creates}",
            )
        if (lag := self._stream_lag.current()) > self._max_stream_lag:
            self._refuse(
                "claim_lag",
                f"executors' messages wait {_ms(lag)} in the server for their answer, its limit is "
                f"{_ms(self._max_stream_lag)}",
            )
        if (lag := self._loop_lag.current()) > self._max_loop_lag:
            self._refuse(
                "loop_lag", f"the server runs {_ms(lag)} behind, its limit is {_ms(self._max_loop_lag)}"
            )
        self._pending_creates += jobs
        try:
            yield
        finally:
            self._pending_creates -= jobs

    def _refuse(self, reason: str, why: str) -> None:
        """`reason`: the refusals metric's label (`core.metrics.REFUSALS`)."""
        REFUSALS(reason).inc()
        self._refusals_log.log(
            reason, "create refused, the server is overloaded: %s", why, extra={"reason": reason}
        )
        raise ResourceExhausted(
            f"{why}: retry after the delay given",
            reason=SERVER_OVERLOADED,
            metadata={"pending_creates": str(self._pending_creates)},
            retry_delay=self._retry_after,
        )

    def close(self) -> None:
        close_pools(self._reads, self._writes)


def close_pools(*pools: ThreadPoolExecutor) -> None:
    """Drops the calls not yet started and waits for those under way: the store they use is closed next,
    and a call still holding one of its connections would outlive it."""
    for pool in pools:
        pool.shutdown(wait=False, cancel_futures=True)
    for pool in pools:
        pool.shutdown(wait=True)


def _ms(duration: timedelta) -> str:
    return f"{duration.total_seconds() * 1000:.0f} ms"
