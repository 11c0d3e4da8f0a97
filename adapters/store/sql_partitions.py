"""Daily range partitions of `job_runs` on PostgreSQL: created ahead, dropped after retention.

A run no daily partition covers lands in the DEFAULT partition, so an insert never fails. PostgreSQL refuses
to create a partition whose range overlaps rows already in DEFAULT, so each partition is created in one
transaction as: a standalone table, the overlapping rows moved into it out of DEFAULT, then ATTACH PARTITION.
That path works whatever DEFAULT holds, and ATTACH takes a lighter lock on `job_runs` (SHARE UPDATE EXCLUSIVE)
than `CREATE TABLE ... PARTITION OF` (ACCESS EXCLUSIVE), so reads and writes of other partitions go on.
Partitions are created `ahead_days` ahead, so in normal running DEFAULT stays empty and its scan is free.

A partition past retention that still holds an unfinished run is kept (and logged) rather than lose the run.
"""

from __future__ import annotations

import logging
import re
from datetime import UTC, date, datetime, time, timedelta

from sqlalchemy import Connection, Engine, bindparam, text

from jobmesh.adapters.store.schema import RUN_DEFAULT_PARTITION, RUN_PARTITION_PREFIX, job_runs
from jobmesh.adapters.store.sql_engine import write_transaction
from jobmesh.core.records import TERMINAL_RUN_STATES

log = logging.getLogger(__name__)

_PARTITION_NAME = re.compile(rf"^{RUN_PARTITION_PREFIX}(\d{{8}})$")
# Serializes maintenance between replicas; each DDL waits at most LOCK_TIMEOUT for busy readers.
_MAINTENANCE_LOCK = 0x6A6D_0002
LOCK_TIMEOUT = "5s"
_TERMINAL = sorted(state.value for state in TERMINAL_RUN_STATES)


def partition_name(day: date) -> str:
    return f"{RUN_PARTITION_PREFIX}{day:%Y%m%d}"


def existing_partitions(connection: Connection) -> dict[date, str]:
    names = connection.execute(
        text(
            "SELECT c.relname FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid "
            "WHERE i.inhparent = to_regclass('job_runs')"
        )
    ).scalars()
    days: dict[date, str] = {}
    for name in names:
        match = _PARTITION_NAME.match(name)
        if match:
            days[datetime.strptime(match.group(1), "%Y%m%d").replace(tzinfo=UTC).date()] = name
    return days


def maintain(engine: Engine, now: datetime, *, retention_days: int, ahead_days: int) -> None:
    """Creates partitions for today .. today+ahead_days (UTC days) and drops those older than retention."""
    today = now.astimezone(UTC).date()
    for offset in range(ahead_days + 1):
        with write_transaction(engine) as connection:
            _locked(connection)
            day = today + timedelta(days=offset)
            if day not in existing_partitions(connection):
                _create(connection, day)
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
        _expire_default(connection, _midnight(cutoff))


def _locked(connection: Connection) -> None:
    connection.execute(text(f"SET LOCAL lock_timeout = '{LOCK_TIMEOUT}'"))
    connection.execute(text("SELECT pg_advisory_xact_lock(:key)"), {"key": _MAINTENANCE_LOCK})


def _midnight(day: date) -> datetime:
    return datetime.combine(day, time(0), tzinfo=UTC)


def _create(connection: Connection, day: date) -> None:
    quote = connection.dialect.identifier_preparer.quote
    name, start, end = partition_name(day), _midnight(day), _midnight(day + timedelta(days=1))
    columns = ", ".join(quote(column.name) for column in job_runs.c)
    # ATTACH needs this lock anyway; taking it first stops a run landing in DEFAULT between the move and
    # the ATTACH (which would then fail its check of DEFAULT).
    connection.execute(text(f"LOCK TABLE {RUN_DEFAULT_PARTITION} IN ACCESS EXCLUSIVE MODE"))
    connection.execute(text(f"CREATE TABLE {name} (LIKE job_runs INCLUDING DEFAULTS INCLUDING CONSTRAINTS)"))
    moved = connection.execute(
        text(
            f"WITH moved AS (DELETE FROM {RUN_DEFAULT_PARTITION} "
            f"WHERE schedule_time >= :start AND schedule_time < :end RETURNING {columns}) "
            f"INSERT INTO {name} ({columns}) SELECT {columns} FROM moved"
        ),
        {"start": start, "end": end},
    ).rowcount
    connection.execute(
        text(
            f"ALTER TABLE job_runs ATTACH PARTITION {name} "
            f"FOR VALUES FROM ('{start.isoformat()}') TO ('{end.isoformat()}')"
        )
    )
    log.info("created run partition %s (%d runs moved out of %s)", name, moved, RUN_DEFAULT_PARTITION)


def _drop_if_finished(connection: Connection, day: date, name: str) -> None:
    unfinished = connection.execute(
        text(f"SELECT EXISTS (SELECT 1 FROM {name} WHERE state NOT IN :terminal)").bindparams(
            bindparam("terminal", _TERMINAL, expanding=True)
        )
    ).scalar()
    if unfinished:
        log.warning("keeping run partition %s past retention: it still holds unfinished runs", name)
        return
    connection.execute(text(f"DROP TABLE {name}"))
    log.info("dropped run partition %s (runs of %s)", name, day.isoformat())


def _expire_default(connection: Connection, cutoff: datetime) -> None:
    """Finished runs older than retention that lived in DEFAULT go the way of their partitions."""
    connection.execute(
        text(
            f"DELETE FROM {RUN_DEFAULT_PARTITION} WHERE schedule_time < :cutoff AND state IN :terminal"
        ).bindparams(bindparam("terminal", _TERMINAL, expanding=True)),
        {"cutoff": cutoff},
    )
