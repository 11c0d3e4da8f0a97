"""When a refused call is tried again: which codes, how long to wait (backoff with jitter, or the server's
`RetryInfo`), and how many times."""

from __future__ import annotations

import random

import grpc

from jobmesh.client._config import RetryConfig
from jobmesh.client._errors import JobmeshError

__all__ = ["RETRYABLE", "retry_wait"]

RETRYABLE = frozenset({grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.RESOURCE_EXHAUSTED})


def _backoff(config: RetryConfig, retry_number: int) -> float:
    base = config.initial_interval.total_seconds() * config.multiplier**retry_number
    return min(base, config.max_interval.total_seconds())


def retry_wait(config: RetryConfig, error: JobmeshError, retry_number: int) -> float | None:
    """Seconds to wait before retry `retry_number` (from 0) of a call that failed with `error`; None when it
    is not retried."""
    if error.code not in RETRYABLE or retry_number + 1 >= config.max_attempts:
        return None
    if error.retry_delay is not None:  # never sooner than the server asked; jitter spreads the herd later
        floor = error.retry_delay.total_seconds()
        return floor * (1 + random.uniform(0, config.jitter))
    delay = _backoff(config, retry_number)
    return delay * (1 + random.uniform(-config.jitter, config.jitter))
