"""Flow control: how many runs of a concurrency key, and of a queue, may run at once, and how fast a queue's
runs may start.

All three are decided at claim, across the whole mesh, in the claim's transaction and under the store's lock
of each key and queue involved (`adapters/store/sql_flow`). A claim over a limit is deferred: the run stays
pending and its executor claims it again at the deferral's retry time. A run over a limit waits; it never
fails, and never starts early (lateness is still measured from its schedule time).

A queue's rate has no burst: each start is at least `1 / rate` after the one before, so no second, wherever it
begins, holds more than `rate` starts.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from types import MappingProxyType

from jobmesh.core.errors import InvalidConfig
from jobmesh.v1 import job_pb2

__all__ = [
    "MAX_CONCURRENCY_KEY",
    "NO_PACING",
    "NO_QUEUE_LIMITS",
    "Admitted",
    "Concurrency",
    "Deferred",
    "FlowCandidate",
    "FlowDecision",
    "Pacing",
    "concurrency_of",
    "concurrency_problems",
    "decide_flow",
    "parse_queue_limits",
    "parse_queue_rates",
]

MAX_CONCURRENCY_KEY = 128
# A claim held back by a concurrency limit (its key's or its queue's) is asked again after this: a run ends
# whenever it ends, and the executor holding the waiting run does not learn of it; a short retry keeps the
# wait after an end short.
KEY_RETRY = timedelta(milliseconds=50)
# A flow-controlled claim is granted only when its run starts within this (its executor holds a slot until
# then); one that would start later is deferred to this long before its start.
FLOW_LEAD = timedelta(milliseconds=500)
_MICROSECOND = timedelta(microseconds=1)


@dataclass(frozen=True, slots=True)
class Concurrency:
    """At most `limit` runs of the jobs naming `key` run at once."""

    key: str
    limit: int


def concurrency_of(job: job_pb2.Job) -> Concurrency | None:
    """The job's concurrency key and limit; None when it has none (a valid job has both or neither)."""
    if not job.concurrency_key:
        return None
    return Concurrency(job.concurrency_key, max(job.concurrency_limit, 1))


def concurrency_problems(key: str, limit: int) -> dict[str, str]:
    """What is wrong with a job's `concurrency_key` and `concurrency_limit`, by field (empty: nothing)."""
    problems = {}
    if len(key) > MAX_CONCURRENCY_KEY:
        problems["concurrency_key"] = f"at most {MAX_CONCURRENCY_KEY} characters, not {len(key)}"
    elif key and not key.isprintable():
        problems["concurrency_key"] = "printable characters only"
    if key and limit < 1:
        problems["concurrency_limit"] = f"must be at least 1 with a concurrency_key, not {limit}"
    elif not key and limit != 0:
        problems["concurrency_limit"] = "needs a concurrency_key"
    return problems


@dataclass(frozen=True, slots=True)
class Pacing:
    """A queue's rate limit: at most `rate` starts a second."""

    rate: float

    def __post_init__(self) -> None:
        if not (math.isfinite(self.rate) and self.rate > 0):
            raise ValueError(f"a rate must be a positive number of runs a second, not {self.rate}")

    @property
    def interval(self) -> timedelta:
        """The least time between two starts: rounded up to the microsecond, so that `rate + 1` starts
        always span at least a second."""
        return math.ceil(1_000_000 / self.rate) * _MICROSECOND


# No queue paced.
NO_PACING: Mapping[str, Pacing] = MappingProxyType({})

# No queue with a concurrency limit.
NO_QUEUE_LIMITS: Mapping[str, int] = MappingProxyType({})

_QUEUE_NAME = r"[A-Za-z0-9][A-Za-z0-9_.-]{0,62}"
_QUEUE_RATE = re.compile(rf"^\s*({_QUEUE_NAME})\s*=\s*([0-9]*\.?[0-9]+)\s*$")
_QUEUE_LIMIT = re.compile(rf"^\s*({_QUEUE_NAME})\s*=\s*([0-9]+)\s*$")


def _queue_settings(text: str, field: str, pattern: re.Pattern[str], form: str) -> dict[str, str]:
    """`queue=value,...` into each queue's value as written; an item not of `pattern` or a queue named twice
    is refused."""
    values: dict[str, str] = {}
    for item in filter(str.strip, text.split(",")):
        match = pattern.match(item)
        if match is None:
            raise InvalidConfig(field, f"{item.strip()!r} is not {form}")
        queue = match.group(1)
        if queue in values:
            raise InvalidConfig(field, f"queue {queue!r} is named twice")
        values[queue] = match.group(2)
    return values


def parse_queue_rates(text: str, field: str = "queue_rate_limits") -> dict[str, Pacing]:
    """`queue=rate,...` (runs a second, a positive number) into each queue's pacing; empty text: none."""
    rates: dict[str, Pacing] = {}
    for queue, written in _queue_settings(text, field, _QUEUE_RATE, "queue=runs-per-second").items():
        rate = float(written)
        if rate <= 0:
            raise InvalidConfig(field, f"the rate of {queue!r} must be above 0, not {rate:g}")
        rates[queue] = Pacing(rate)
    return rates


def parse_queue_limits(text: str, field: str = "queue_concurrency_limits") -> dict[str, int]:
    """`queue=N,...` (at most N runs of the queue at once, a whole number from 1) into each queue's limit;
    empty text: none."""
    limits: dict[str, int] = {}
    for queue, written in _queue_settings(text, field, _QUEUE_LIMIT, "queue=runs-at-once").items():
        limit = int(written)
        if limit < 1:
            raise InvalidConfig(field, f"the limit of {queue!r} must be at least 1, not {limit}")
        limits[queue] = limit
    return limits


@dataclass(frozen=True, slots=True)
class FlowCandidate:
    """A claim that the claim would grant but for flow control, in the batch's order."""

    key: tuple[str, str]  # the run's (job id, run id)
    due_time: datetime
    queue: str
    concurrency: Concurrency | None


@dataclass(frozen=True, slots=True)
class Admitted:
    """Granted: the run starts at `start` (never before its due time, nor before its queue's pace)."""

    start: datetime


@dataclass(frozen=True, slots=True)
class Deferred:
    """Held back: the run stays pending, and is claimed again at `retry_time`."""

    retry_time: datetime


FlowDecision = Admitted | Deferred


def decide_flow(
    candidates: Sequence[FlowCandidate],
    now: datetime,
    *,
    running: Mapping[str, int],
    next_starts: Mapping[str, datetime | None],
    rates: Mapping[str, Pacing],
    queue_limits: Mapping[str, int] = NO_QUEUE_LIMITS,
    queues_running: Mapping[str, int] = NO_QUEUE_LIMITS,
) -> tuple[dict[tuple[str, str], FlowDecision], dict[str, datetime]]:
    """Each candidate's decision, in order, given the runs of each key running now (`running`), the runs of
    each queue with a concurrency limit (`queue_limits`) running now (`queues_running`) and each paced
    queue's earliest next start (`next_starts`, None when it never started one); and the paced queues' new
    earliest next starts (only those that changed). A run admitted earlier in the batch counts against the
    ones after it. A candidate neither keyed, nor of a limited or paced queue, is admitted at max(now, due
    time)."""
    decisions: dict[tuple[str, str], FlowDecision] = {}
    held = dict(running)
    queue_held = dict(queues_running)
    paced: dict[str, datetime | None] = dict(next_starts)
    changed: dict[str, datetime] = {}
    for candidate in candidates:
        start = max(now, candidate.due_time)
        pacing = rates.get(candidate.queue)
        queue_limit = queue_limits.get(candidate.queue)
        controlled = candidate.concurrency is not None or pacing is not None or queue_limit is not None
        if controlled and start > now + FLOW_LEAD:
            decisions[candidate.key] = Deferred(start - FLOW_LEAD)  # not yet: nothing is taken for it
            continue
        concurrency = candidate.concurrency
        key_full = concurrency is not None and held.get(concurrency.key, 0) >= concurrency.limit
        queue_full = queue_limit is not None and queue_held.get(candidate.queue, 0) >= queue_limit
        if key_full or queue_full:
            # A run ends whenever it ends, unknown to the executor holding this one: asked again soon.
            decisions[candidate.key] = Deferred(max(now + KEY_RETRY, start - FLOW_LEAD))
            continue
        if pacing is not None:
            earliest = paced.get(candidate.queue)
            start = max(start, earliest) if earliest is not None else start
            if start > now + FLOW_LEAD:
                decisions[candidate.key] = Deferred(start - FLOW_LEAD)
                continue
            paced[candidate.queue] = changed[candidate.queue] = start + pacing.interval
        if concurrency is not None:
            held[concurrency.key] = held.get(concurrency.key, 0) + 1
        if queue_limit is not None:
            queue_held[candidate.queue] = queue_held.get(candidate.queue, 0) + 1
        decisions[candidate.key] = Admitted(start)
    return decisions, changed
