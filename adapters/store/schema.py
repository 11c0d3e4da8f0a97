"""The store's tables, as SQLAlchemy Core metadata shared by the queries (the migrations own the DDL).

`job_runs` is range-partitioned by `schedule_time` on PostgreSQL (daily partitions plus a DEFAULT one, see
`sql_partitions`). A unique constraint on a partitioned table must contain the partition key, so neither
"run id unique per job" nor "request id unique per job" can be a constraint there: the store enforces both
under the job row's lock (`create_run`), and the primary key's `(job_id, run_id)` prefix is the per-partition
lookup index `get_run` uses; the same rule holds for cron occurrences (one per job and schedule time),
checked under the job row's lock by `materialize`. Index choices are justified in INDEXES.md.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import (
    JSON,
    BigInteger,
    Boolean,
    Column,
    DateTime,
    Dialect,
    Float,
    ForeignKey,
    Index,
    Integer,
    LargeBinary,
    MetaData,
    PrimaryKeyConstraint,
    SmallInteger,
    Table,
    Text,
    text,
)
from sqlalchemy.dialects.postgresql import JSONB
from sqlalchemy.types import TypeDecorator, TypeEngine

# Far in the future: the sort value of a missing time, so NULLs page like any other value (last when
# ascending, first when descending, as PostgreSQL orders them by default).
FAR_FUTURE = datetime(9999, 12, 31, 23, 59, 59, tzinfo=UTC)


class UtcDateTime(TypeDecorator[datetime]):
    """A timezone-aware UTC datetime on every dialect (SQLite keeps naive UTC text, read back aware)."""

    impl = DateTime(timezone=True)
    cache_ok = True

    @property
    def python_type(self) -> type[datetime]:
        return datetime

    def process_bind_param(self, value: datetime | None, dialect: Dialect) -> datetime | None:
        if value is None:
            return None
        if value.tzinfo is None:
            raise ValueError(f"naive datetime {value!r}: the store keeps timezone-aware times only")
        value = value.astimezone(UTC)
        return value.replace(tzinfo=None) if dialect.name == "sqlite" else value

    def result_processor(self, dialect: Dialect, coltype: object) -> Callable[[Any], Any] | None:
        # psycopg reads `timestamptz` as aware datetimes in the session's time zone, which `make_engine` sets
        # to UTC: nothing left to do per value (a page of runs has hundreds).
        if dialect.name == "postgresql":
            return None
        return super().result_processor(dialect, coltype)

    def process_result_value(self, value: datetime | None, dialect: Dialect) -> datetime | None:
        if value is None:
            return None
        return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)


def id_type() -> TypeEngine[str]:
    """Ids compare bytewise on PostgreSQL whatever the database locale: cheaper and locale-proof keysets."""
    return Text().with_variant(Text(collation="C"), "postgresql")


def labels_type() -> TypeEngine[Any]:
    """JSONB on PostgreSQL so `labels.k = v` and `labels:k` can use a GIN index; JSON text elsewhere."""
    return JSON().with_variant(JSONB(), "postgresql")


metadata = MetaData()

jobs = Table(
    "jobs",
    metadata,
    Column("job_id", id_type(), primary_key=True),
    Column("spec", LargeBinary, nullable=False),
    Column("display_name", Text, nullable=False),
    Column("labels", labels_type(), nullable=False),
    Column("schedule_kind", Text, nullable=False),
    Column("priority", Text, nullable=False),
    Column("queue", Text, nullable=False),
    Column("state", Text, nullable=False),
    Column("next_run_time", UtcDateTime, nullable=True),
    Column("create_time", UtcDateTime, nullable=False),
    Column("update_time", UtcDateTime, nullable=False),
    Column("version", Integer, nullable=False),
    # Unique per namespace (`ux_jobs_request`): a request id never reveals another namespace's job.
    Column("request_id", Text, nullable=True),
    Column("request_hash", Text, nullable=True),
    # The run written with the job, so a replayed create returns it (not part of JobRecord).
    Column("first_run_id", id_type(), nullable=True),
    Column("namespace", Text, nullable=False, server_default=text("'default'")),
    # `core.shards.shard_of(job_id)`, written at insert (migration 0010): watchers lease shards.
    Column("shard", SmallInteger, nullable=False),
    # From the spec (migration 0012): at most `concurrency_limit` runs of the jobs of a key run at once.
    Column("concurrency_key", Text, nullable=True),
    Column("concurrency_limit", Integer, nullable=True),
)
Index("ux_jobs_request", jobs.c.namespace, jobs.c.request_id, unique=True)
# A namespace-scoped ListJobs in its default order (migration 0006 has the EXPLAIN).
Index("ix_jobs_namespace_create_time", jobs.c.namespace, jobs.c.create_time, jobs.c.job_id)
# The cron scan of the shards a watcher holds (migration 0010 has the EXPLAIN).
Index(
    "ix_jobs_shard_next_run_time",
    jobs.c.shard,
    jobs.c.next_run_time,
    postgresql_where=text("state = 'ACTIVE'"),
    sqlite_where=text("state = 'ACTIVE'"),
)
Index("ix_jobs_create_time", jobs.c.create_time, jobs.c.job_id)
Index("ix_jobs_labels", jobs.c.labels, postgresql_using="gin").ddl_if(dialect="postgresql")
# The jobs of a concurrency key, whose running runs a claim of the key counts (migration 0012).
Index(
    "ix_jobs_concurrency_key",
    jobs.c.concurrency_key,
    postgresql_where=text("concurrency_key IS NOT NULL"),
    sqlite_where=text("concurrency_key IS NOT NULL"),
)

job_runs = Table(
    "job_runs",
    metadata,
    Column("job_id", id_type(), ForeignKey("jobs.job_id"), nullable=False),
    Column("run_id", id_type(), nullable=False),
    # The occurrence time: immutable, the partition key.
    Column("schedule_time", UtcDateTime, nullable=False),
    Column("attempt", Integer, nullable=False),
    # When the current attempt may start (schedule_time, or later for a retry's backoff).
    Column("due_time", UtcDateTime, nullable=False),
    Column("state", Text, nullable=False),
    Column("trigger", Text, nullable=False),
    Column("priority", Text, nullable=False),
    Column("queue", Text, nullable=False),
    Column("replay_of", id_type(), nullable=True),
    Column("executor", Text, nullable=True),
    Column("dispatch_time", UtcDateTime, nullable=True),
    Column("start_time", UtcDateTime, nullable=True),
    Column("last_heartbeat_time", UtcDateTime, nullable=True),
    Column("end_time", UtcDateTime, nullable=True),
    Column("first_start_time", UtcDateTime, nullable=True),
    Column("exit_code", Integer, nullable=True),
    Column("error_type", Text, nullable=True),
    Column("error_message", Text, nullable=True),
    Column("progress", Float, nullable=False),
    Column("progress_message", Text, nullable=False),
    Column("create_time", UtcDateTime, nullable=False),
    Column("update_time", UtcDateTime, nullable=False),
    Column("request_id", Text, nullable=True),
    Column("request_hash", Text, nullable=True),
    # Copied from the job when the run is made, so the claim computes the deadline without the job's spec.
    Column("heartbeat_timeout_ms", BigInteger, nullable=False, server_default=text("15000")),
    # While an attempt runs: when it is declared lost (last heartbeat + timeout); the sweeper scans it.
    Column("heartbeat_deadline", UtcDateTime, nullable=True),
    # An executor reported times that contradict the claim and heartbeat record: the stored ones were clamped
    # (migration 0007).
    Column("times_clamped", Boolean, nullable=False, server_default=text("false")),
    # Copied from the job (migration 0006): lists and feeds scope runs by namespace without a join.
    Column("namespace", Text, nullable=False, server_default=text("'default'")),
    # The job's shard (migration 0010), copied to `open_runs` by its triggers.
    Column("shard", SmallInteger, nullable=False),
    # What a succeeded handler returned, as JSON text (migration 0011).
    Column("result", Text, nullable=True),
    PrimaryKeyConstraint("job_id", "run_id", "schedule_time", name="pk_job_runs"),
    postgresql_partition_by="RANGE (schedule_time)",
)
Index(
    "ix_job_runs_job_schedule", job_runs.c.job_id, job_runs.c.schedule_time.desc(), job_runs.c.run_id.desc()
)
Index(
    "ix_job_runs_request",
    job_runs.c.job_id,
    job_runs.c.request_id,
    postgresql_where=text("request_id IS NOT NULL"),
    sqlite_where=text("request_id IS NOT NULL"),
)

# ListRuns of every job scoped to namespaces, in its default order (migration 0006 has the EXPLAIN).
Index(
    "ix_job_runs_namespace_schedule",
    job_runs.c.namespace,
    job_runs.c.schedule_time.desc(),
    job_runs.c.job_id.desc(),
    job_runs.c.run_id.desc(),
)

# No index of `job_runs` holds a column that a run's progress changes, nor a predicate on its state: each
# update of a run can then be HOT (written beside the old version on its page, no index touched). What the
# watcher and the feed look runs up by lives in the two tables below, written by triggers on `job_runs`
# (migration 0008), so no writer of runs can forget them.

# The runs not yet ended, each with the time it next needs the mesh: a SCHEDULED run its due time (the
# watcher's window), a QUEUED one its dispatch time (the re-send of unclaimed runs), a RUNNING or CANCELLING
# one its heartbeat deadline (the sweeper). Small (ended runs leave it) and hot.
open_runs = Table(
    "open_runs",
    metadata,
    Column("job_id", id_type(), nullable=False),
    Column("run_id", id_type(), nullable=False),
    Column("schedule_time", UtcDateTime, nullable=False),
    Column("state", Text, nullable=False),
    Column("wake_time", UtcDateTime, nullable=True),
    Column("shard", SmallInteger, nullable=False),
    # The run's queue (migration 0014), copied by the triggers like the shard.
    Column("queue", Text, nullable=False),
    PrimaryKeyConstraint("job_id", "run_id", name="pk_open_runs"),
)
# The sweeper and the re-send of unclaimed runs (one watcher, every shard).
Index("ix_open_runs_wake", open_runs.c.state, open_runs.c.wake_time)
# The window scan of the shards a watcher holds: a range per shard.
Index("ix_open_runs_shard_wake", open_runs.c.shard, open_runs.c.state, open_runs.c.wake_time)
# A claim's count of a queue's held runs (its concurrency limit, `sql_flow`): a range per queue.
Index("ix_open_runs_queue_state", open_runs.c.queue, open_runs.c.state)

# The change feed's log (`sql_feed`): an entry for each visible change of a run, at its position (on
# PostgreSQL the id of the transaction that wrote it, on SQLite a counter) with the run's `update_time` then.
# The feed reads a run at the entry of its current `update_time`, its latest. PostgreSQL only appends (no key
# to look up, one index entry a change); the table is partitioned like `job_runs`, so a day's entries go with
# the day's runs (`sql_partitions`).
run_changes = Table(
    "run_changes",
    metadata,
    Column("job_id", id_type(), nullable=False),
    Column("run_id", id_type(), nullable=False),
    Column("schedule_time", UtcDateTime, nullable=False),
    Column("update_time", UtcDateTime, nullable=False),
    Column("change_position", BigInteger, nullable=False),
    postgresql_partition_by="RANGE (schedule_time)",
)
# The feed reads runs in the order of their changes, after a cursor.
Index("ix_run_changes_position", run_changes.c.change_position, run_changes.c.job_id, run_changes.c.run_id)
# SQLite only (migration 0008): it drops no partitions, so a run keeps one entry, replaced at each change.
Index(
    "ix_run_changes_run", run_changes.c.job_id, run_changes.c.run_id, run_changes.c.schedule_time, unique=True
)

run_attempts = Table(
    "run_attempts",
    metadata,
    Column("job_id", id_type(), ForeignKey("jobs.job_id"), nullable=False),
    Column("run_id", id_type(), nullable=False),
    Column("attempt", Integer, nullable=False),
    Column("state", Text, nullable=False),
    Column("executor", Text, nullable=True),
    Column("start_time", UtcDateTime, nullable=True),
    Column("end_time", UtcDateTime, nullable=True),
    Column("exit_code", Integer, nullable=True),
    Column("error_type", Text, nullable=True),
    Column("error_message", Text, nullable=True),
    PrimaryKeyConstraint("job_id", "run_id", "attempt", name="pk_run_attempts"),
)

# No foreign key: log lines stream in fast and must never be refused.
run_logs = Table(
    "run_logs",
    metadata,
    Column("job_id", id_type(), nullable=False),
    Column("run_id", id_type(), nullable=False),
    Column("sequence", BigInteger, nullable=False),
    Column("attempt", Integer, nullable=False),
    Column("time", UtcDateTime, nullable=False),
    Column("stream", Text, nullable=False),
    Column("text", Text, nullable=False),
    PrimaryKeyConstraint("job_id", "run_id", "sequence", name="pk_run_logs"),
    # A day's runs have ids between two floors (`core.ids.run_id_floor`): their logs share a partition,
    # dropped with the runs' own (`sql_partitions`).
    postgresql_partition_by="RANGE (run_id)",
)

# Leadership and shard leases of the watchers: one row per lease, taken by an upsert (`sql_leases`).
leases = Table(
    "leases",
    metadata,
    Column("name", Text, primary_key=True),
    Column("holder", Text, nullable=False),
    Column("expires_at", UtcDateTime, nullable=False),
)

# When each executor's stream was last known live, by the server holding it (`sql_leases`): the sweeper
# keeps the attempts of a live session alive.
executor_sessions = Table(
    "executor_sessions",
    metadata,
    Column("executor_id", id_type(), primary_key=True),
    Column("server_id", Text, nullable=False),
    Column("renewed_at", UtcDateTime, nullable=False),
)

# The audit trail (`core.audit`), written in the transaction of each change. No foreign key: the trail
# outlives what it describes. `event_id` is a run-style id of the event's time.
audit_events = Table(
    "audit_events",
    metadata,
    Column("event_id", id_type(), primary_key=True),
    Column("time", UtcDateTime, nullable=False),
    Column("actor", Text, nullable=False),
    Column("action", Text, nullable=False),
    Column("resource", Text, nullable=False),
    Column("job_id", id_type(), nullable=False),
    Column("namespace", Text, nullable=False),
    Column("request_id", Text, nullable=False),
)
# A job page's trail, and the trail of the namespaces a caller may read, newest first.
Index("ix_audit_events_job", audit_events.c.job_id, audit_events.c.time, audit_events.c.event_id)
Index("ix_audit_events_namespace", audit_events.c.namespace, audit_events.c.time, audit_events.c.event_id)
Index("ix_audit_events_time", audit_events.c.time, audit_events.c.event_id)

# Flow control's gates (`sql_flow`), one row per concurrency key (`key:{key}`), paced queue (`queue:{queue}`)
# and queue with a concurrency limit (`queue-held:{queue}`): claims that involve them lock them in name order.
# A paced queue's row keeps its earliest next start.
flow_gates = Table(
    "flow_gates",
    metadata,
    Column("name", Text, primary_key=True),
    Column("next_start_time", UtcDateTime, nullable=True),
)

RUN_PARTITION_PREFIX = "job_runs_p"
RUN_DEFAULT_PARTITION = "job_runs_default"
LOG_PARTITION_PREFIX = "run_logs_p"
LOG_DEFAULT_PARTITION = "run_logs_default"
CHANGE_PARTITION_PREFIX = "run_changes_p"
CHANGE_DEFAULT_PARTITION = "run_changes_default"
# Room left on each page of a run partition for the new versions of its rows (HOT updates).
RUN_FILLFACTOR = 60

# The count of runs per namespace, queue and state (`sql_run_counts`, migration 0013), kept by triggers on
# `job_runs`. PostgreSQL appends each write's net change (no lock for writers to queue on) and the reader
# folds the rows into their sums; SQLite keeps one row per key (`ux_run_counts`), updated in place.
run_counts = Table(
    "run_counts",
    metadata,
    Column("namespace", Text, nullable=False),
    Column("queue", Text, nullable=False),
    Column("state", Text, nullable=False),
    Column("runs", BigInteger, nullable=False),
)
Index("ux_run_counts", run_counts.c.namespace, run_counts.c.queue, run_counts.c.state, unique=True).ddl_if(
    dialect="sqlite"
)
