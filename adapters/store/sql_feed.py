"""The change feed's reads, and its notices (triggers of migration 0008 write the change log).

A run's change position (its latest entry in `run_changes`) is, on PostgreSQL, the id of the transaction
that last changed it visibly. Ids
are handed out when transactions begin writing, not when they commit, so a reader takes only positions below
the oldest transaction still open in this database (`HORIZON`): every transaction below it has ended, so
nothing can appear there later, and the feed never skips a change. Transactions of the cluster's other
databases cannot write here, so their ids are left out: a long transaction of another application on the
same server would otherwise hold every feed back until it ends. On SQLite, where one writer at a time
advances a counter, every committed position is final.

Notices: writers here call the store's listeners after each commit; PostgreSQL's triggers and log writes send
`NOTIFY jobmesh_runs` / `NOTIFY jobmesh_logs`, which `Listener` turns into the same calls in other processes.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Collection
from functools import lru_cache
from typing import Any

import psycopg
from sqlalchemy import (
    BigInteger,
    ColumnElement,
    Connection,
    Integer,
    Select,
    Text,
    bindparam,
    func,
    select,
    text,
    true,
    tuple_,
)
from sqlalchemy.engine import URL

from jobmesh.adapters.store.schema import job_runs, jobs, run_changes
from jobmesh.adapters.store.sql_prepared import execute_prepared
from jobmesh.adapters.store.sql_rows import StoredRow, run_from_row
from jobmesh.core.outage_log import OutageLog
from jobmesh.core.ports.store import LOGS_CHANGED, RUNS_CHANGED, ChangePage, FeedCursor, RunChange
from jobmesh.core.records import RunState

log = logging.getLogger(__name__)

CHANNELS = {"jobmesh_runs": RUNS_CHANGED, "jobmesh_logs": LOGS_CHANGED}
RECONNECT_DELAY = 1.0


# The oldest transaction still open, of those not known to belong to another database (an id that
# pg_stat_activity does not show elsewhere counts as this database's: never too far), else the next id.
# pg_stat_activity is read before the snapshot is taken: read after it, another database's transaction that
# ends in between is in the snapshot but no longer shown elsewhere, and the horizon falls back to it, below
# changes an earlier read had already passed. Read before, a transaction that begins in between has an id
# above every change committed then.
HORIZON = text(
    """
    WITH elsewhere AS MATERIALIZED (
        SELECT backend_xid FROM pg_stat_activity
        WHERE backend_xid IS NOT NULL AND datname IS DISTINCT FROM current_database()
    ),
    snapshot AS MATERIALIZED (
        SELECT pg_current_snapshot() AS current FROM (SELECT count(*) FROM elsewhere) AS read_first
    )
    SELECT coalesce(
        (SELECT min(open::text::bigint) FROM snapshot, pg_snapshot_xip(snapshot.current) AS open
         WHERE open::xid NOT IN (SELECT backend_xid FROM elsewhere)),
        (SELECT pg_snapshot_xmax(current)::text::bigint FROM snapshot)
    )
    """
)


def horizon(connection: Connection) -> int | None:
    """The lowest position a transaction still open may write (PostgreSQL); None where every committed
    position is final."""
    if connection.dialect.name != "postgresql":
        return None
    return int(execute_prepared(connection, HORIZON, {}).scalar())


def feed_cursor(connection: Connection) -> FeedCursor:
    limit = horizon(connection)
    if limit is not None:
        return FeedCursor(limit)
    latest = select(run_changes.c.change_position).order_by(run_changes.c.change_position.desc()).limit(1)
    # Ids are never empty: the cursor just before the next position lies past every change at this one.
    return FeedCursor(int(connection.execute(latest).scalar() or 0) + 1)


def changes_after(
    connection: Connection,
    cursor: FeedCursor,
    limit: int,
    states: frozenset[RunState] | None = None,
    shards: Collection[int] | None = None,
) -> ChangePage:
    """With `shards`, only the changes of runs in them (a watcher's); with `states`, as `Store` says."""
    limit_position = horizon(connection)
    # A horizon: PostgreSQL.
    statement = _changes_statement(limit_position is not None, _ordered(states), shards is not None)
    params: dict[str, Any] = {
        "position": cursor.position,
        "job_id": cursor.job_id,
        "run_id": cursor.run_id,
        "limit": limit,
        "horizon": limit_position,
    }
    if shards is not None:
        params["shards"] = sorted(shards)
    rows = execute_prepared(connection, statement, params).rows
    changes = [_change(row) for row in rows]
    if len(changes) == limit:
        return ChangePage(changes, changes[-1].cursor, complete=False)
    if limit_position is not None:
        # Everything below the horizon has been read: the next read starts there.
        return ChangePage(changes, max(FeedCursor(limit_position), cursor), complete=True)
    if states is not None or shards is not None:  # every change up to the latest was looked at (one writer)
        latest = execute_prepared(connection, _LATEST, {}).scalar()
        return ChangePage(changes, max(FeedCursor(int(latest or 0) + 1), cursor), complete=True)
    return ChangePage(changes, changes[-1].cursor if changes else cursor, complete=True)


_LATEST = select(func.max(run_changes.c.change_position))


def _ordered(states: frozenset[RunState] | None) -> tuple[RunState, ...] | None:
    return None if states is None else tuple(sorted(states, key=lambda state: state.value))


@lru_cache(maxsize=16)
def _changes_statement(lateral: bool, states: tuple[RunState, ...] | None, sharded: bool) -> Select[Any]:
    """Built once per shape: the feed reads many times a second.

    On PostgreSQL (`lateral`), a read of some states looks each entry's run up by key (a LATERAL subquery
    that the OFFSET keeps from being flattened into a join). Left to the planner, a state that few runs are
    in (CANCELLING: none, most of the time) looked cheaper to find by reading `job_runs` whole: a sequential
    scan of the day's partition on every read, 24 ms a read at 26,000 runs, growing with the day."""
    after = tuple_(
        bindparam("position", type_=BigInteger()),
        bindparam("job_id", type_=Text()),
        bindparam("run_id", type_=Text()),
    )
    entries = select(run_changes).where(
        tuple_(run_changes.c.change_position, run_changes.c.job_id, run_changes.c.run_id) > after
    )
    if lateral:
        entries = entries.where(run_changes.c.change_position < bindparam("horizon", type_=BigInteger()))
    changes = entries.subquery("changes")
    # A run's latest entry only: the earlier ones name an update time it no longer has.
    latest = (
        (job_runs.c.job_id == changes.c.job_id)
        & (job_runs.c.run_id == changes.c.run_id)
        & (job_runs.c.schedule_time == changes.c.schedule_time)
        & (job_runs.c.update_time == changes.c.update_time)
    )
    wanted: ColumnElement[bool] = (
        true() if states is None else job_runs.c.state.in_([state.value for state in states])
    )
    if sharded:
        wanted = wanted & job_runs.c.shard.in_(bindparam("shards", expanding=True))
    if lateral and (states is not None or sharded):
        found: Any = select(job_runs).where(latest, wanted).offset(0).lateral("found")
        joined = changes.join(found, true())
    else:
        found, joined = job_runs, changes.join(job_runs, latest & wanted)
    return (
        select(found, changes.c.change_position, jobs.c.labels)
        .select_from(joined.join(jobs, jobs.c.job_id == found.c.job_id))
        .order_by(changes.c.change_position, changes.c.job_id, changes.c.run_id)
        .limit(bindparam("limit", type_=Integer()))
    )


def _change(row: StoredRow) -> RunChange:
    cursor = FeedCursor(row["change_position"], row["job_id"], row["run_id"])
    return RunChange(run_from_row(row), dict(row["labels"] or {}), cursor)


class Listener:
    """`LISTEN` on a connection of its own, in a thread of its own: each notice calls `callback` with what
    changed. Reconnects after a failure; the feed reads on after a reconnect whatever it missed meanwhile."""

    def __init__(self, url: URL, callback: Callable[[str], None]) -> None:
        self._conninfo = url.set(drivername="postgresql").render_as_string(hide_password=False)
        self._callback = callback
        self._stop = threading.Event()
        self._listening = OutageLog(log, "listening for change notices")
        self._thread = threading.Thread(target=self._run, name="jobmesh-listen", daemon=True)
        self._thread.start()

    def close(self) -> None:
        self._stop.set()
        self._thread.join(timeout=5)

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                with psycopg.connect(self._conninfo, autocommit=True, connect_timeout=5) as connection:
                    for channel in CHANNELS:
                        connection.execute(f"LISTEN {channel}")
                    self._listening.succeeded()
                    self._callback(RUNS_CHANGED)  # what changed while this was not listening
                    self._callback(LOGS_CHANGED)
                    while not self._stop.is_set():
                        for notice in connection.notifies(timeout=0.5):
                            self._callback(CHANNELS.get(notice.channel, RUNS_CHANGED))
            except psycopg.Error as error:
                self._listening.failed(error)
                self._stop.wait(RECONNECT_DELAY)
