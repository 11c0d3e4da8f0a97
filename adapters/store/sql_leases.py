"""Leases (watcher leadership, shards): one row per lease, taken by a single conditional upsert.

`INSERT ... ON CONFLICT (name) DO UPDATE ... WHERE <expired or ours>` decides atomically on both dialects.
On PostgreSQL two callers racing for a free name meet on the primary key: the loser's insert turns into the
conditional update, which re-reads the winner's committed row under its lock and finds it held; two callers
racing for an expired lease queue on the row lock the same way. SQLite writers are serialized anyway.
Expiry is judged by the callers' clocks (`now`): keep the watchers' clocks in step and the TTL well above
their skew.
"""

from __future__ import annotations

from datetime import datetime, timedelta

from sqlalchemy import Connection, delete, or_
from sqlalchemy.dialects import postgresql, sqlite

from jobmesh.adapters.store.schema import leases


def try_lease(connection: Connection, name: str, holder: str, ttl: timedelta, now: datetime) -> bool:
    if ttl <= timedelta(0):
        raise ValueError("a lease needs a positive ttl")
    dialect_insert = postgresql.insert if connection.dialect.name == "postgresql" else sqlite.insert
    insert = dialect_insert(leases).values(name=name, holder=holder, expires_at=now + ttl)
    statement = insert.on_conflict_do_update(
        index_elements=[leases.c.name],
        set_={"holder": insert.excluded.holder, "expires_at": insert.excluded.expires_at},
        where=or_(leases.c.holder == insert.excluded.holder, leases.c.expires_at <= now),
    ).returning(leases.c.holder)
    # No row back: the conflicting lease is another holder's and still valid, so nothing was written.
    return connection.execute(statement).first() is not None


def release_lease(connection: Connection, name: str, holder: str) -> None:
    connection.execute(delete(leases).where(leases.c.name == name, leases.c.holder == holder))
