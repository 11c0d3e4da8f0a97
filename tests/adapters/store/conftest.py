"""One contract suite, every backend: the `backend` fixture runs each test on SQLite and on PostgreSQL.

PostgreSQL comes from JOBMESH_DATABASE_URL (skipped locally, failed under CI when unset). The suite works in a
schema of its own (dropped at the end) and empties the tables before each test; SQLite tests copy a migrated
template file into tmp_path.
"""

from __future__ import annotations

import shutil
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import Engine, create_engine, text

from jobmesh.adapters.store.factory import open_store
from jobmesh.adapters.store.sql import SqlStore
from tests.adapters.store.backend import Backend, pg_schema
from tests.support import fresh_postgres_database, require_service_url

TABLES = (
    "jobs",
    "job_runs",
    "open_runs",
    "run_changes",
    "run_attempts",
    "run_logs",
    "leases",
    "executor_sessions",
    "audit_events",
    "flow_gates",
    "run_counts",
)


@pytest.fixture(scope="session")
def pg_base_url() -> Iterator[str]:
    """A database of the test session's own (each pytest-xdist worker has one), in which tests make schemas:
    no other worker's transactions run in it, so none holds its change feed back."""
    with fresh_postgres_database(require_service_url("JOBMESH_DATABASE_URL")) as url:
        yield url


@pytest.fixture(scope="session")
def new_pg_schema(pg_base_url: str) -> Callable[[str], Any]:
    """`with new_pg_schema("prefix") as url:` a schema of one's own (partition and plan tests)."""
    return lambda prefix: pg_schema(pg_base_url, prefix)


@pytest.fixture(scope="session")
def pg_contract(pg_base_url: str) -> Iterator[tuple[str, Engine]]:
    with pg_schema(pg_base_url, "jm_store") as url:
        open_store(url).close()
        engine = create_engine(url)
        try:
            yield url, engine
        finally:
            engine.dispose()


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def backend(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Backend]:
    if request.param == "sqlite":
        path = tmp_path / "store.db"
        shutil.copyfile(request.getfixturevalue("sqlite_template"), path)
        url = f"sqlite:///{path}"
    else:
        url, engine = request.getfixturevalue("pg_contract")
        with engine.begin() as connection:
            connection.execute(text(f"TRUNCATE {', '.join(TABLES)}"))
    store = SqlStore(url)
    try:
        yield Backend(request.param, url, store)
    finally:
        store.close()


@pytest.fixture
def store(backend: Backend) -> SqlStore:
    return backend.store


@pytest.fixture
def now() -> datetime:
    return datetime.now(UTC)
