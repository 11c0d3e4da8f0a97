"""Request rate per caller: a token bucket per authenticated subject. A caller past its rate is refused
`RESOURCE_EXHAUSTED` (reason `CALLER_RATE_LIMITED`) with a `RetryInfo` saying when a request is free again."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import timedelta

from jobmesh.core.errors import ResourceExhausted
from jobmesh.server.principals import Principal

__all__ = ["CALLER_RATE_LIMITED", "CallerRates"]

CALLER_RATE_LIMITED = "CALLER_RATE_LIMITED"
# Past this many callers tracked, the buckets that are full again (idle callers) are forgotten.
_TRACKED = 10_000


@dataclass(slots=True)
class _Bucket:
    tokens: float
    updated: float


class CallerRates:
    def __init__(self, *, rate: float, burst: int, clock: Callable[[], float] = time.monotonic) -> None:
        """`rate` requests a second on average, `burst` at once."""
        if rate <= 0 or burst < 1:
            raise ValueError("the rate must be above zero and the burst at least 1")
        self._rate = rate
        self._burst = float(burst)
        self._clock = clock
        self._lock = threading.Lock()
        self._buckets: dict[str, _Bucket] = {}

    def admit(self, principal: Principal) -> None:
        """Takes one request from the caller's bucket; ResourceExhausted when it is empty."""
        now = self._clock()
        with self._lock:
            bucket = self._buckets.get(principal.subject)
            if bucket is None:
                if len(self._buckets) >= _TRACKED:
                    self._forget_idle(now)
                bucket = self._buckets[principal.subject] = _Bucket(self._burst, now)
            bucket.tokens = min(self._burst, bucket.tokens + (now - bucket.updated) * self._rate)
            bucket.updated = now
            if bucket.tokens >= 1.0:
                bucket.tokens -= 1.0
                return
            wait = (1.0 - bucket.tokens) / self._rate
        raise ResourceExhausted(
            f"this caller sends more than {self._rate:g} requests a second, its limit: slow down",
            reason=CALLER_RATE_LIMITED,
            metadata={"rate": f"{self._rate:g}", "burst": str(int(self._burst))},
            retry_delay=timedelta(seconds=wait),
        )

    def _forget_idle(self, now: float) -> None:
        for subject, bucket in list(self._buckets.items()):
            if bucket.tokens + (now - bucket.updated) * self._rate >= self._burst:
                del self._buckets[subject]
