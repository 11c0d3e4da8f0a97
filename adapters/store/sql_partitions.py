"""Daily range partitions of `job_runs`, `run_changes` and `run_logs` on PostgreSQL: created ahead, dropped
after retention.

A day's runs and their change positions are partitioned by their schedule time, and their log lines by their
run ids (which start with the schedule time: `core.ids.run_id_floor`), so the three of a day are dropped
together. Run partitions leave room on their pages for the new versions of their rows (HOT updates).

A run no daily partition covers lands in the DEFAULT partition, so an insert never fails. PostgreSQL refuses
to create a partition whose range overlaps rows already in DEFAULT, so each partition is created in one
transaction as: a standalone table, the overlapping rows moved into it out of DEFAULT, then ATTACH PARTITION.
That path works whatever DEFAULT holds, and ATTACH takes a lighter lock on `job_runs` (SHARE UPDATE EXCLUSIVE)
than `CREATE TABLE ... PARTITION OF` (ACCESS EXCLUSIVE), so reads and writes of other partitions go on.
Partitions are created `ahead_days` ahead, so in normal running DEFAULT stays empty and its scan is free.

A partition past retention that still holds an unfinished run is kept (and logged) rather than lose the run,
and its runs' logs with it.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, date, datetime, time, timedelta

from sqlalchemy import Connection, Engine, Table, bindparam, text

from jobmesh.adapters.store import sql_run_counts
from jobmesh.adapters.store.schema import (
    CHANGE_DEFAULT_PARTITION,
    CHANGE_PARTITION_PREFIX,
    LOG_DEFAULT_PARTITION,
    LOG_PARTITION_PREFIX,
    RUN_DEFAULT_PARTITION,
    RUN_FILLFACTOR,
    RUN_PARTITION_PREFIX,
    job_runs,
    run_changes,
    run_logs,
)
from jobmesh.adapters.store.sql_engine import write_transaction
from jobmesh.core.ids import run_id_floor
from jobmesh.core.states import TERMINAL_RUN_STATES

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class _Family:
    """A table partitioned by day, and how a day's bounds read in its partition key."""

    table: Table
    prefix: str
    default: str
    key: str
    bounds: Callable[[date], tuple[str, str]]
    storage: str = ""  # the new partition's storage parameters

    def name(self, day: date) -> str:
        return f"{self.prefix}{day:%Y%m%d}"


def _midnight(day: date) -> datetime:
    return datetime.combine(day, time(0), tzinfo=UTC)


def _days(day: date) -> tuple[str, str]:
    return _midnight(day).isoformat(), _midnight(day + timedelta(days=1)).isoformat()


RUNS = _Family(
    job_runs,
    RUN_PARTITION_PREFIX,
    RUN_DEFAULT_PARTITION,
    "schedule_time",
    _days,
    f" WITH (fillfactor = {RUN_FILLFACTOR})",
)
CHANGES = _Family(run_changes, CHANGE_PARTITION_PREFIX, CHANGE_DEFAULT_PARTITION, "schedule_time", _days)
LOGS = _Family(
    run_logs,
    LOG_PARTITION_PREFIX,
    LOG_DEFAULT_PARTITION,
    "run_id",
    lambda day: (run_id_floor(_midnight(day)), run_id_floor(_midnight(day + timedelta(days=1)))),
)
# Serializes maintenance between replicas; each DDL waits at most LOCK_TIMEOUT for busy readers.
_MAINTENANCE_LOCK = 0x6A6D_0002
LOCK_TIMEOUT = "5s"
_TERMINAL = sorted(state.value for state in TERMINAL_RUN_STATES)


def existing_partitions(connection: Connection, family: _Family = RUNS) -> dict[date, str]:
    names = connection.execute(
        text(
            "SELECT c.relname FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid "
            "WHERE i.inhparent = to_regclass(:table)"
        ),
        {"table": family.table.name},
    ).scalars()
    pattern = re.compile(rf"^{family.prefix}(\d{{8}})$")
    days: dict[date, str] = {}
    for name in names:
        match = pattern.match(name)
        if match:
            days[datetime.strptime(match.group(1), "%Y%m%d").replace(tzinfo=UTC).date()] = name
    return days


def maintain(engine: Engine, now: datetime, *, retention_days: int, ahead_days: int) -> None:
    """Creates partitions for today .. today+ahead_days (UTC days) and drops those older than retention."""
    today = now.astimezone(UTC).date()
    for offset in range(ahead_days + 1):
        for family in (RUNS, CHANGES, LOGS):
            with write_transaction(engine) as connection:
                _locked(connection)
                day = today + timedelta(days=offset)
                if day not in existing_partitions(connection, family):
                    _create(connection, family, day)
    cutoff = today - timedelta(days=retention_days)
    with write_transaction(engine) as connection:
        _locked(connection)
        old = [(day, name) for day, name in existing_partitions(connection).items() if day < cutoff]
    for day, name in sorted(old):
        with write_transaction(engine) as connection:
            _locked(connection)
            _drop_if_finished(connection, day, name)
    with write_transaction(engine) as connection:
        _locked(connection)
        _drop_orphaned_companions(connection, cutoff)
        _expire_default(connection, _midnight(cutoff))


def _locked(connection: Connection) -> None:
    connection.execute(text(f"SET LOCAL lock_timeout = '{LOCK_TIMEOUT}'"))
    connection.execute(text("SELECT pg_advisory_xact_lock(:key)"), {"key": _MAINTENANCE_LOCK})


def _create(connection: Connection, family: _Family, day: date) -> None:
    quote = connection.dialect.identifier_preparer.quote
    name, (start, end) = family.name(day), family.bounds(day)
    columns = ", ".join(quote(column.name) for column in family.table.c)
    table = family.table.name
    # ATTACH needs this lock anyway; taking it first stops a row landing in DEFAULT between the move and
    # the ATTACH (which would then fail its check of DEFAULT).
    connection.execute(text(f"LOCK TABLE {family.default} IN ACCESS EXCLUSIVE MODE"))
    connection.execute(
        text(f"CREATE TABLE {name} (LIKE {table} INCLUDING DEFAULTS INCLUDING CONSTRAINTS){family.storage}")
    )
    moved = connection.execute(
        text(
            f"WITH moved AS (DELETE FROM {family.default} "
            f"WHERE {family.key} >= :start AND {family.key} < :end RETURNING {columns}) "
            f"INSERT INTO {name} ({columns}) SELECT {columns} FROM moved"
        ),
        {"start": start, "end": end},
    ).rowcount
    connection.execute(
        text(f"ALTER TABLE {table} ATTACH PARTITION {name} FOR VALUES FROM ('{start}') TO ('{end}')")
    )
    log.info("created partition %s (%d rows moved out of %s)", name, moved, family.default)


def _drop_if_finished(connection: Connection, day: date, name: str) -> None:
    unfinished = connection.execute(
        text(f"SELECT EXISTS (SELECT 1 FROM {name} WHERE state NOT IN :terminal)").bindparams(
            bindparam("terminal", _TERMINAL, expanding=True)
        )
    ).scalar()
    if unfinished:
        log.warning("keeping run partition %s past retention: it still holds unfinished runs", name)
        return
    sql_run_counts.uncount_partition(connection, name)
    connection.execute(text(f"DROP TABLE {name}"))
    for family in (CHANGES, LOGS):
        companion = existing_partitions(connection, family).get(day)
        if companion is not None:
            connection.execute(text(f"DROP TABLE {companion}"))
    log.info("dropped partition %s and its runs' changes and logs (runs of %s)", name, day.isoformat())


def _drop_orphaned_companions(connection: Connection, cutoff: date) -> None:
    """Change and log partitions past retention whose day has no run partition (dropped earlier, or never
    made)."""
    runs = existing_partitions(connection)
    for family in (CHANGES, LOGS):
        for day, name in existing_partitions(connection, family).items():
            if day < cutoff and day not in runs:
                connection.execute(text(f"DROP TABLE {name}"))


def _expire_default(connection: Connection, cutoff: datetime) -> None:
    """Finished runs older than retention that lived in DEFAULT go the way of their partitions, and the
    change positions and logs there of runs that are gone (a partition's own rows fire no trigger of
    `job_runs`)."""
    connection.execute(
        text(
            f"WITH gone AS (DELETE FROM {RUN_DEFAULT_PARTITION} WHERE schedule_time < :cutoff "
            "AND state IN :terminal RETURNING namespace, queue, state) "
            "INSERT INTO run_counts (namespace, queue, state, runs) "
            "SELECT namespace, queue, state, -count(*) FROM gone GROUP BY namespace, queue, state"
        ).bindparams(bindparam("terminal", _TERMINAL, expanding=True)),
        {"cutoff": cutoff},
    )
    connection.execute(
        text(
            f"DELETE FROM {CHANGE_DEFAULT_PARTITION} c WHERE c.schedule_time < :cutoff AND NOT EXISTS "
            f"(SELECT 1 FROM {RUN_DEFAULT_PARTITION} r WHERE r.job_id = c.job_id AND r.run_id = c.run_id "
            "AND r.schedule_time = c.schedule_time)"
        ),
        {"cutoff": cutoff},
    )
    connection.execute(
        text(
            f"DELETE FROM {LOG_DEFAULT_PARTITION} l WHERE l.run_id < :floor AND NOT EXISTS "
            "(SELECT 1 FROM job_runs r WHERE r.job_id = l.job_id AND r.run_id = l.run_id)"
        ),
        {"floor": run_id_floor(cutoff)},
    )
