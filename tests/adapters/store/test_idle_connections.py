"""Pooled PostgreSQL connections: one that sat idle is pinged and replaced when the database dropped it (a
restart, a failover, an idle timeout), so the next call succeeds; one in constant use is not pinged."""

from __future__ import annotations

import time
from collections.abc import Iterator
from datetime import timedelta

import pytest
import sqlalchemy

from jobmesh.adapters.store import sql_engine
from jobmesh.adapters.store.factory import open_store
from jobmesh.adapters.store.sql import SqlStore
from tests.support import fresh_postgres_database, require_service_url

pytestmark = pytest.mark.postgres

IDLE = timedelta(milliseconds=300)


@pytest.fixture
def store(monkeypatch: pytest.MonkeyPatch) -> Iterator[SqlStore]:
    monkeypatch.setattr(sql_engine, "PING_AFTER_IDLE", IDLE)
    with fresh_postgres_database(require_service_url("JOBMESH_DATABASE_URL")) as url:
        opened = open_store(url)
        try:
            yield opened
        finally:
            opened.close()


def _backend_pid(store: SqlStore) -> int:
    with store.engine.connect() as connection:
        return int(connection.exec_driver_sql("SELECT pg_backend_pid()").scalar_one())


def _terminate_the_stores_sessions(store: SqlStore) -> int:
    """What a database restart does to the pool: every session of the store's database ends."""
    admin = sqlalchemy.create_engine(
        require_service_url("JOBMESH_DATABASE_URL"),
        isolation_level="AUTOCOMMIT",
        poolclass=sqlalchemy.pool.NullPool,
    )
    try:
        with admin.connect() as connection:
            ended = connection.execute(
                sqlalchemy.text(
                    "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity "
                    "WHERE datname = :name AND pid <> pg_backend_pid()"
                ),
                {"name": store.engine.url.database},
            ).scalar_one()
    finally:
        admin.dispose()
    return int(ended)


def test_an_idle_connection_the_database_dropped_is_replaced_before_use(store: SqlStore) -> None:
    before = _backend_pid(store)
    assert _terminate_the_stores_sessions(store) >= 1
    time.sleep(IDLE.total_seconds() * 2)
    after = _backend_pid(store)  # no StoreUnavailable: the dead connection was found at checkout
    assert after != before


def test_a_connection_in_constant_use_is_not_pinged(store: SqlStore, monkeypatch: pytest.MonkeyPatch) -> None:
    _backend_pid(store)  # the pool's first connection (a new connection is pinged once)
    pinged: list[object] = []
    real = sql_engine._ping

    def counted(connection: object) -> None:
        pinged.append(connection)
        real(connection)

    monkeypatch.setattr(sql_engine, "_ping", counted)
    for _ in range(20):
        _backend_pid(store)
    assert pinged == []
    time.sleep(IDLE.total_seconds() * 2)
    _backend_pid(store)
    assert len(pinged) == 1
