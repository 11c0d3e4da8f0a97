"""Every Prometheus metric of jobmesh, defined here and nowhere else, and the cheap calls that record them.

Each metric is recorded where its event already happens, once (the attempt lifecycle, the claim, the
dispatcher, the watcher's loops, the server's overload guard), and costs what a histogram observe or a counter
increment costs: label children are looked up once per label values and kept, so the hot path allocates
nothing of its own. Nothing here reads the store or the signal bus; values that need a read (the backlog) are
set by a periodic task of their owner.

The metrics live in prometheus-client's default registry (a process has one of each by nature). Across the
workers of `jobmesh server --workers N` they are shared through prometheus-client's multiprocess mode
(`processes.metrics_exposition` turns it on before this module is imported): a gauge names how its workers'
values combine (`multiprocess_mode`), counters and histograms are summed.
"""

from __future__ import annotations

from datetime import datetime
from importlib import metadata
from typing import Generic, TypeVar

from prometheus_client import Counter, Gauge, Histogram
from prometheus_client.metrics import MetricWrapperBase

__all__ = [
    "ALL_METRICS",
    "LATENESS_BUCKETS",
    "Children",
    "record_build_info",
]

M = TypeVar("M", bound=MetricWrapperBase)

# Fine enough to tell 1 ms from 10 ms from 1 s, and to see the 2 s promise from either side.
LATENESS_BUCKETS = (
    0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.0, 5.0, 10.0, 30.0, 60.0, 300.0,
)  # fmt: skip
LATENCY_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0)


class Children(Generic[M]):
    """A labelled metric's children, each made once per label values and kept (prometheus-client's own
    lookup takes a lock and builds a key on every call)."""

    def __init__(self, metric: M) -> None:
        self.metric = metric
        self._children: dict[tuple[str, ...], M] = {}

    def __call__(self, *values: str) -> M:
        child = self._children.get(values)
        if child is None:
            child = self._children[values] = self.metric.labels(*values)
        return child

    def clear(self) -> None:
        """Every child gone from the exposition (and from here: one kept would be written to unseen)."""
        self.metric.clear()
        self._children.clear()


# Process --------------------------------------------------------------------------------------------------
BUILD_INFO = Gauge(
    "jobmesh_build_info",
    "Always 1: the jobmesh version this process runs, as a label.",
    ["version"],
    multiprocess_mode="max",
)

# Runs and attempts (the attempt lifecycle, wherever an attempt ends) -------------------------------------
RUN_LATENESS = Children(
    Histogram(
        "jobmesh_run_lateness_seconds",
        "How long after its due time each attempt started (its executor's start; recorded once, when the "
        "attempt's end is written). trigger: SCHEDULE, RUN_NOW, REPLAY, or RETRY for a later attempt.",
        ["queue", "lane", "trigger"],
        buckets=LATENESS_BUCKETS,
    )
)
ATTEMPTS_ENDED = Children(
    Counter(
        "jobmesh_attempts_ended", "Attempts whose end was written, by how the attempt ended.", ["outcome"]
    )
)
RUNS_ENDED = Children(
    Counter(
        "jobmesh_runs_ended",
        "Runs that reached a terminal state through an attempt's end, by that state (DEAD_LETTERED: retries "
        "spent).",
        ["outcome"],
    )
)
RUNS_RETRIED = Counter("jobmesh_runs_retried", "Runs scheduled for another attempt after one ended.")

# Creates (the server) ---------------------------------------------------------------------------------------
JOBS_CREATED = Counter(
    "jobmesh_jobs_created", "Jobs created (an idempotent replay of a create is not counted again)."
)

# The queue hop ---------------------------------------------------------------------------------------------
RUNS_DISPATCHED = Counter(
    "jobmesh_runs_dispatched", "Runs published to the queue (each publish, resends too)."
)
DISPATCH_TO_CLAIM = Children(
    Histogram(
        "jobmesh_dispatch_to_claim_seconds",
        "From a run's publish to the queue to its executor's granted claim (the executor's clock).",
        ["queue"],
        buckets=LATENCY_BUCKETS,
    )
)
KAFKA_CONSUMER_LAG = Children(
    Gauge(
        "jobmesh_kafka_consumer_lag",
        "Messages of each topic not yet consumed, over the partitions an executor is assigned (librdkafka's "
        "statistics, every 5 s); summed over executors, the group's lag.",
        ["topic"],
        multiprocess_mode="livesum",
    )
)
RUNS_REQUEUED = Counter(
    "jobmesh_runs_requeued", "QUEUED runs nobody claimed in time, published again by the leading watcher."
)
HEARTBEATS_LOST = Counter(
    "jobmesh_heartbeats_lost", "Attempts the sweeper ended HeartbeatLost (their executor went silent)."
)
CRON_SKIPPED = Children(
    Counter(
        "jobmesh_cron_occurrences_skipped",
        "Cron occurrences that never ran: missed by more than the catch-up window (catchup), or skipped by "
        "the job's overlap policy (overlap).",
        ["reason"],
    )
)

# The backlog, per queue (the leading watcher, periodically) ------------------------------------------------
RUNS_WAITING = Children(
    Gauge(
        "jobmesh_runs_waiting",
        "Runs due and not yet started (SCHEDULED past their due time, or QUEUED), per queue.",
        ["queue"],
        multiprocess_mode="max",
    )
)
OLDEST_WAITING = Children(
    Gauge(
        "jobmesh_runs_waiting_oldest_seconds",
        "How long past its due time the oldest waiting run of each queue is.",
        ["queue"],
        multiprocess_mode="max",
    )
)
BACKLOG_AGE = Gauge(
    "jobmesh_backlog_measured_age_seconds",
    "Seconds since the backlog gauges were last measured by this watcher (while it leads).",
    multiprocess_mode="max",
)

# Executors ------------------------------------------------------------------------------------------------
EXECUTORS_CONNECTED = Gauge(
    "jobmesh_executors_connected",
    "Executor streams a server holds (summed over its workers).",
    multiprocess_mode="livesum",
)
EXECUTOR_SLOTS = Gauge(
    "jobmesh_executor_slots", "Attempts an executor may run at once.", multiprocess_mode="livesum"
)
EXECUTOR_SLOTS_IN_USE = Gauge(
    "jobmesh_executor_slots_in_use", "Attempts an executor is running now.", multiprocess_mode="livesum"
)

# The watcher ----------------------------------------------------------------------------------------------
WATCHER_LEADING = Gauge(
    "jobmesh_watcher_leading",
    "1 while this watcher holds the singleton lease (sweeper, requeue, partitions), else 0.",
    multiprocess_mode="max",
)
WATCHER_SHARDS = Gauge(
    "jobmesh_watcher_shards_held", "Shard leases this watcher holds.", multiprocess_mode="max"
)
WATCHER_SCAN_AGE = Gauge(
    "jobmesh_watcher_last_scan_age_seconds",
    "Seconds since this watcher's last window scan.",
    multiprocess_mode="max",
)

# The server's overload guard (measured there already, to decide refusals) -----------------------------------
LOOP_LAG = Gauge(
    "jobmesh_server_loop_lag_seconds",
    "How late a server's event loop runs (the worst worker).",
    multiprocess_mode="livemax",
)
CLAIM_LAG = Gauge(
    "jobmesh_server_claim_lag_seconds",
    "How long executors' claims wait in a server for their answer (the worst worker).",
    multiprocess_mode="livemax",
)
PENDING_CREATES = Gauge(
    "jobmesh_server_pending_creates", "Jobs in creation in a server (summed).", multiprocess_mode="livesum"
)
REFUSALS = Children(
    Counter(
        "jobmesh_server_refusals",
        "Creates refused RESOURCE_EXHAUSTED by the overload guard, by reason.",
        ["reason"],
    )
)

# RPCs (a server interceptor) -------------------------------------------------------------------------------
RPC_DURATION = Children(
    Histogram(
        "jobmesh_rpc_duration_seconds",
        "Server-side duration of each gRPC call, by method and status code (streams: until they end).",
        ["method", "code"],
        buckets=LATENCY_BUCKETS,
    )
)

# Every metric family, by name (without the suffixes the exposition adds): what the dashboard and the alert
# rules may name (tests/deploy checks them against this).
ALL_METRICS: dict[str, MetricWrapperBase] = {
    metric._name: metric
    for metric in (
        BUILD_INFO,
        RUN_LATENESS.metric,
        ATTEMPTS_ENDED.metric,
        RUNS_ENDED.metric,
        RUNS_RETRIED,
        JOBS_CREATED,
        RUNS_DISPATCHED,
        DISPATCH_TO_CLAIM.metric,
        KAFKA_CONSUMER_LAG.metric,
        RUNS_REQUEUED,
        HEARTBEATS_LOST,
        CRON_SKIPPED.metric,
        RUNS_WAITING.metric,
        OLDEST_WAITING.metric,
        BACKLOG_AGE,
        EXECUTORS_CONNECTED,
        EXECUTOR_SLOTS,
        EXECUTOR_SLOTS_IN_USE,
        WATCHER_LEADING,
        WATCHER_SHARDS,
        WATCHER_SCAN_AGE,
        LOOP_LAG,
        CLAIM_LAG,
        PENDING_CREATES,
        REFUSALS.metric,
        RPC_DURATION.metric,
    )
}


def version() -> str:
    try:
        return metadata.version("jobmesh")
    except metadata.PackageNotFoundError:
        return "unknown"


def record_build_info() -> None:
    BUILD_INFO.labels(version()).set(1)


def seconds_between(earlier: datetime, later: datetime) -> float:
    return (later - earlier).total_seconds()


def set_backlog(waiting: dict[str, tuple[int, datetime]], now: datetime, seen: set[str]) -> None:
    """The backlog gauges from one measure: queue -> (runs waiting, the oldest's due time). Queues measured
    before (`seen`, updated) and now empty read 0."""
    for queue in seen - waiting.keys():
        RUNS_WAITING(queue).set(0)
        OLDEST_WAITING(queue).set(0)
    for queue, (count, oldest) in waiting.items():
        RUNS_WAITING(queue).set(count)
        OLDEST_WAITING(queue).set(max(seconds_between(oldest, now), 0.0))
    seen.update(waiting)


def clear_backlog(seen: set[str]) -> None:
    """A watcher that no longer leads serves no backlog: another measures it now, and a stale value here
    would count beside its fresh one."""
    RUNS_WAITING.clear()
    OLDEST_WAITING.clear()
    seen.clear()
