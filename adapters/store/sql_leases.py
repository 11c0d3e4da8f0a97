"""Leases (watcher leadership, shards): one row per lease, taken by a single conditional upsert. And executor
sessions: when each executor's stream was last known live, renewed by the server that holds it, and taken
the same way, so that one executor name has one live stream across every server process.

`INSERT ... ON CONFLICT (name) DO UPDATE ... WHERE <expired or ours>` decides atomically on both dialects.
On PostgreSQL two callers racing for a free name meet on the primary key: the loser's insert turns into the
conditional update, which re-reads the winner's committed row under its lock and finds it held; two callers
racing for an expired lease queue on the row lock the same way. SQLite writers are serialized anyway.
Expiry is judged by the callers' clocks (`now`): keep the watchers' clocks in step and the TTL well above
their skew.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime, timedelta

from sqlalchemy import Connection, Text, delete, func, or_, select, update
from sqlalchemy.dialects import postgresql, sqlite

from jobmesh.adapters.store.schema import UtcDateTime, executor_sessions, leases
from jobmesh.adapters.store.sql_batch import batch_chunks, batch_size, batch_table, batch_values, chunks
from jobmesh.core.ports.pipeline_store import Lease

RELEASED = ""  # the server id of a session whose stream ended cleanly


def try_leases(
    connection: Connection, names: Sequence[str], holder: str, ttl: timedelta, now: datetime
) -> frozenset[str]:
    """Takes or renews each lease for `holder` in one statement; returns the names it holds now."""
    if ttl <= timedelta(0):
        raise ValueError("a lease needs a positive ttl")
    if not names:
        return frozenset()
    dialect_insert = postgresql.insert if connection.dialect.name == "postgresql" else sqlite.insert
    rows = [{"name": name, "holder": holder, "expires_at": now + ttl} for name in sorted(set(names))]
    insert = dialect_insert(leases).values(rows)
    statement = insert.on_conflict_do_update(
        index_elements=[leases.c.name],
        set_={"holder": insert.excluded.holder, "expires_at": insert.excluded.expires_at},
        where=or_(leases.c.holder == insert.excluded.holder, leases.c.expires_at <= now),
    ).returning(leases.c.name)
    # A name not returned: its lease is another holder's and still valid, so nothing was written there.
    return frozenset(connection.execute(statement).scalars())


def try_lease(connection: Connection, name: str, holder: str, ttl: timedelta, now: datetime) -> bool:
    return name in try_leases(connection, [name], holder, ttl, now)


def leases_named(connection: Connection, prefix: str) -> dict[str, Lease]:
    """Every lease whose name starts with `prefix`, expired or not (the table holds a few rows a watcher)."""
    statement = select(leases.c.name, leases.c.holder, leases.c.expires_at).where(
        func.substr(leases.c.name, 1, len(prefix)) == prefix
    )
    return {row.name: Lease(row.holder, row.expires_at) for row in connection.execute(statement)}


def release_lease(connection: Connection, name: str, holder: str) -> None:
    connection.execute(delete(leases).where(leases.c.name == name, leases.c.holder == holder))


_RENEWED_COLUMNS = (("executor_id", Text()), ("server_id", Text()), ("at", UtcDateTime()))


def renew_sessions(
    connection: Connection,
    executor_ids: Sequence[str],
    server_id: str,
    now: datetime,
    stale_after: timedelta,
) -> frozenset[str]:
    """One conditional upsert per chunk, the lease pattern above: a session is renewed (never moved back)
    where it is `server_id`'s, new, or not renewed for `stale_after`; one that another server renewed more
    recently stays that server's, unless it released it. Returns the executors whose sessions `server_id`
    holds now."""
    postgres = connection.dialect.name == "postgresql"
    dialect_insert = postgresql.insert if postgres else sqlite.insert
    latest = func.greatest if postgres else func.max
    held: set[str] = set()
    for chunk in batch_chunks(connection, sorted(set(executor_ids))):
        rows = [(executor_id, server_id, now) for executor_id in chunk]
        size = batch_size(connection, len(chunk))
        batch = batch_table(connection.dialect.name, "renewed", _RENEWED_COLUMNS, size)
        insert = dialect_insert(executor_sessions).from_select(
            ["executor_id", "server_id", "renewed_at"],
            select(batch.c.executor_id, batch.c.server_id, batch.c.at).where(
                batch.c.executor_id.is_not(None)
            ),
        )
        statement = insert.on_conflict_do_update(
            index_elements=[executor_sessions.c.executor_id],
            set_={
                "server_id": insert.excluded.server_id,
                "renewed_at": latest(executor_sessions.c.renewed_at, insert.excluded.renewed_at),
            },
            where=or_(
                executor_sessions.c.server_id == insert.excluded.server_id,
                executor_sessions.c.server_id == RELEASED,
                executor_sessions.c.renewed_at <= now - stale_after,
            ),
        ).returning(executor_sessions.c.executor_id)
        params = batch_values(connection, "renewed", _RENEWED_COLUMNS, rows)
        held.update(connection.execute(statement, params).scalars())
    return frozenset(held)


def release_sessions(
    connection: Connection, server_id: str, executor_id: str | None = None
) -> frozenset[str]:
    """`server_id`'s sessions (of `executor_id` alone, when given) are free for any server at once; their
    renewal times stay, for the sweeper. Returns the executors released.

    All of a server's sessions are released when its process died (the parent that saw it die does it), a
    rare event: without an index on `server_id` that is a scan of the table (a row an executor), which
    spares every renewal the upkeep of one more index."""
    statement = update(executor_sessions).where(executor_sessions.c.server_id == server_id)
    if executor_id is not None:
        statement = statement.where(executor_sessions.c.executor_id == executor_id)
    released = statement.values(server_id=RELEASED).returning(executor_sessions.c.executor_id)
    return frozenset(connection.execute(released).scalars())


def session_renewals(connection: Connection, executor_ids: Sequence[str]) -> Mapping[str, datetime]:
    found: dict[str, datetime] = {}
    for chunk in chunks(sorted(set(executor_ids))):
        statement = select(executor_sessions.c.executor_id, executor_sessions.c.renewed_at).where(
            executor_sessions.c.executor_id.in_(chunk)
        )
        found.update({row.executor_id: row.renewed_at for row in connection.execute(statement)})
    return found
