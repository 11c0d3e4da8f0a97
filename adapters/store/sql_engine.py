"""Engines of the SQL store: per-dialect connection settings, write transactions, driver-error translation."""

from __future__ import annotations

import contextlib
import logging
import sqlite3
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import timedelta
from functools import wraps
from typing import Any, Concatenate, ParamSpec, TypeVar

from sqlalchemy import Connection, Engine, create_engine, event
from sqlalchemy import exc as sa_exc
from sqlalchemy.engine import make_url

from jobmesh.core.errors import StoreFailure, StoreUnavailable

log = logging.getLogger(__name__)

SQLITE_BUSY_TIMEOUT_MS = 10_000
# A pooled PostgreSQL connection idle this long is pinged before it is handed out.
PING_AFTER_IDLE = timedelta(seconds=2)
_CHECKED_IN = "jobmesh_checked_in"
_WRITE = "jobmesh_write"
_TRANSIENT = frozenset({"40P01", "40001"})  # deadlock_detected, serialization_failure

P = ParamSpec("P")
R = TypeVar("R")
S = TypeVar("S")


def make_engine(url: str) -> Engine:
    parsed = make_url(url)
    if parsed.get_backend_name() == "sqlite":
        return _sqlite_engine(url)
    engine = create_engine(url, pool_size=10, max_overflow=20, pool_timeout=10)
    event.listen(engine, "checkin", _note_checkin)
    event.listen(engine, "checkout", _ping_after_idle)
    if parsed.get_driver_name() == "psycopg":
        event.listen(engine, "connect", _binary_arrays)
        event.listen(engine, "connect", _session_settings)
    return engine


def _note_checkin(_dbapi_connection: Any, record: Any) -> None:
    record.info[_CHECKED_IN] = time.monotonic()


def _ping_after_idle(dbapi_connection: Any, record: Any, _proxy: object) -> None:
    """A pooled connection that sat idle is pinged before use, and replaced when dead: a replica survives a
    database restart without handing out dead connections. One in constant use is not: a ping on every
    checkout (`pool_pre_ping`) was a round trip per transaction, a third of a small one's client CPU; a
    restart under load fails the calls under way in any case, and the first failure empties the pool."""
    if time.monotonic() - record.info.get(_CHECKED_IN, 0.0) >= PING_AFTER_IDLE.total_seconds():
        _ping(dbapi_connection)


def _ping(dbapi_connection: Any) -> None:
    cursor = dbapi_connection.cursor()
    try:
        cursor.execute("SELECT 1")
        dbapi_connection.rollback()  # out of the transaction the SELECT opened, as a checkout expects
    except Exception as error:  # the driver's own error: the connection is dead, whatever it says
        raise sa_exc.DisconnectionError(str(error)) from error
    finally:
        with contextlib.suppress(Exception):
            cursor.close()


def _session_settings(dbapi_connection: Any, _record: object) -> None:
    """Every session of the store:
    - in UTC: times come back as aware UTC datetimes, which `schema.UtcDateTime` leaves as read;
    - joins by nested loop only. The hot path's statements join a batch (`sql_batch`: hundreds of keys) to
      `job_runs`, which the primary key answers in microseconds a row. Left free, the planner hashes the batch
      and scans the partition instead whenever its statistics are young (a day's partition fills faster than
      autovacuum analyses it): 85 ms for a 500-run claim on a 28,000-run partition against 7.6 ms by the key.
      Nothing here joins more than it looks up by index."""
    for statement in ("SET TIME ZONE 'UTC'", "SET enable_hashjoin = off", "SET enable_mergejoin = off"):
        dbapi_connection.execute(statement)
    dbapi_connection.commit()


def _binary_arrays(dbapi_connection: Any, _record: object) -> None:
    """Lists (the pipeline's batch arrays, `sql_batch`) go to PostgreSQL in binary: psycopg's text format
    escapes every element through a regular expression, a quarter of a 500-run batch's time."""
    from psycopg.types.array import ListBinaryDumper

    dbapi_connection.adapters.register_dumper(list, ListBinaryDumper)


def _sqlite_engine(url: str) -> Engine:
    engine = create_engine(
        url, connect_args={"check_same_thread": False, "timeout": SQLITE_BUSY_TIMEOUT_MS / 1000}
    )

    @event.listens_for(engine, "connect")
    def _on_connect(dbapi_connection: sqlite3.Connection, _record: object) -> None:
        # Take transaction control from pysqlite so `_on_begin` decides how each transaction starts.
        dbapi_connection.isolation_level = None
        cursor = dbapi_connection.cursor()
        for pragma in (
            "journal_mode=WAL",
            "synchronous=NORMAL",
            f"busy_timeout={SQLITE_BUSY_TIMEOUT_MS}",
            "foreign_keys=ON",
        ):
            cursor.execute(f"PRAGMA {pragma}")
        cursor.close()

    @event.listens_for(engine, "begin")
    def _on_begin(connection: Connection) -> None:
        # A writer takes the write lock up front: a deferred transaction that reads and then writes fails
        # at once with SQLITE_BUSY (no busy wait) when another writer committed in between.
        immediate = connection.get_execution_options().get(_WRITE, False)
        connection.exec_driver_sql("BEGIN IMMEDIATE" if immediate else "BEGIN")

    return engine


@contextmanager
def write_transaction(engine: Engine) -> Iterator[Connection]:
    with engine.connect() as plain:
        connection = plain.execution_options(**{_WRITE: True})
        with connection.begin():
            yield connection


def run_write(engine: Engine, work: Callable[[Connection], R], *, attempts: int = 3) -> R:
    """`work` in a write transaction, run again when PostgreSQL aborted it for a deadlock or a
    serialization failure: batches over overlapping runs (a sweep and a report) can still meet in an
    unlucky order, and the whole transaction is safe to repeat."""
    for attempt in range(1, attempts + 1):
        try:
            with write_transaction(engine) as connection:
                return work(connection)
        except sa_exc.OperationalError as error:
            if attempt == attempts or getattr(error.orig, "sqlstate", None) not in _TRANSIENT:
                raise
    raise AssertionError("unreachable")


@contextmanager
def read_connection(engine: Engine) -> Iterator[Connection]:
    """A connection for reads. On PostgreSQL in autocommit: at READ COMMITTED a transaction gives a read no
    snapshot that its statements would not have alone, and BEGIN and ROLLBACK cost two round trips a call.
    SQLite keeps its transaction, in which a read's statements see one snapshot."""
    with engine.connect() as connection:
        if engine.dialect.name == "postgresql":
            connection.execution_options(isolation_level="AUTOCOMMIT")  # in place, for this checkout
        yield connection


def translate_errors(
    method: Callable[Concatenate[S, P], R],
) -> Callable[Concatenate[S, P], R]:
    """Turns driver errors into the project's: unreachable or locked database → StoreUnavailable."""

    @wraps(method)
    def wrapper(self: S, /, *args: P.args, **kwargs: P.kwargs) -> R:
        try:
            return method(self, *args, **kwargs)
        except (sa_exc.DBAPIError, sa_exc.TimeoutError) as error:
            if not unavailable(error):
                log.error("the database refused %s: %s", method.__name__, _summary(error))
                raise StoreFailure(_summary(error)) from error
            lost = "" if isinstance(error, _UNREACHABLE) else "connection lost: "
            raise StoreUnavailable(lost + _summary(error)) from error

    return wrapper


_UNREACHABLE = (sa_exc.OperationalError, sa_exc.InterfaceError, sa_exc.TimeoutError)


def unavailable(error: BaseException) -> bool:
    """Whether a driver error says the database could not be reached or used (busy, locked, gone), rather
    than that it refused a statement."""
    if isinstance(error, _UNREACHABLE):
        return True
    return isinstance(error, sa_exc.DBAPIError) and error.connection_invalidated


def _summary(error: Any) -> str:
    original = getattr(error, "orig", None) or error
    return str(original).strip().splitlines()[0] if str(original).strip() else type(original).__name__
