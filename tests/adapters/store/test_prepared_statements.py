"""On PostgreSQL the hot path's statements go to psycopg as prepared statements, past SQLAlchemy's execution;
what SQLAlchemy did around the driver still holds: errors arrive as its own, a lost connection leaves the
pool, the engine's cursor listeners see each statement, and the types' checks run on each value."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from typing import Any

import pytest
from sqlalchemy import Connection, bindparam, create_engine, event, select, text, update
from sqlalchemy import exc as sa_exc

from jobmesh.adapters.store.schema import UtcDateTime, job_runs, jobs
from jobmesh.adapters.store.sql import SqlStore
from jobmesh.adapters.store.sql_engine import run_write, write_transaction
from jobmesh.adapters.store.sql_prepared import execute_prepared
from jobmesh.core.errors import StoreUnavailable
from tests.adapters.store.backend import Backend
from tests.adapters.store.pipeline_support import add_job, add_run, pipeline_round, ref

# SQLite's statements are executed by SQLAlchemy.
pytestmark = pytest.mark.parametrize(
    "backend", [pytest.param("postgres", marks=pytest.mark.postgres)], indirect=True
)

_BY_ID = select(jobs.c.job_id, jobs.c.queue).where(jobs.c.job_id == bindparam("job_id"))
_MOVE = update(job_runs).where(job_runs.c.run_id == bindparam("wanted")).values(job_id=bindparam("owner"))
_TOUCH = update(job_runs).where(job_runs.c.run_id == bindparam("wanted")).values(update_time=bindparam("at"))


@contextmanager
def _executions(store: SqlStore) -> Iterator[Counter[str]]:
    seen: Counter[str] = Counter()

    def by_sqlalchemy(*_: Any) -> None:
        seen["sqlalchemy"] += 1

    def by_cursor(*_: Any) -> None:
        seen["cursor"] += 1

    event.listen(store.engine, "before_execute", by_sqlalchemy)
    event.listen(store.engine, "before_cursor_execute", by_cursor)
    try:
        yield seen
    finally:
        event.remove(store.engine, "before_execute", by_sqlalchemy)
        event.remove(store.engine, "before_cursor_execute", by_cursor)


def test_the_hot_path_goes_to_the_driver_past_sqlalchemys_execution(backend: Backend) -> None:
    pipeline_round(backend.store, "warm", 3)
    with _executions(backend.store) as seen:
        pipeline_round(backend.store, "burst", 3)
    # Creates, hand-offs, claims, heartbeats, progress, logs and ends: each statement seen by the cursor
    # listeners (so tracing and the plan tests see them), none executed by SQLAlchemy.
    assert seen["cursor"] >= 15
    assert seen["sqlalchemy"] == 0


def test_a_statement_runs_prepared_on_its_connection(backend: Backend) -> None:
    add_job(backend.store, "alpha")
    with write_transaction(backend.store.engine) as connection:
        for _ in range(3):
            assert execute_prepared(connection, _BY_ID, {"job_id": "alpha"}).tuples() == [
                ("alpha", "default")
            ]
        prepared = connection.exec_driver_sql("SELECT statement FROM pg_prepared_statements").scalars().all()
    assert any("FROM jobs" in statement and "$1" in statement for statement in prepared), prepared


def test_a_statement_sqlalchemy_writes_anew_at_each_call_is_left_to_it(backend: Backend) -> None:
    """SQLAlchemy renders an IN list of literal values when it executes: such a statement is left to it."""
    add_job(backend.store, "alpha")
    listed = select(jobs.c.job_id).where(jobs.c.job_id.in_(["alpha", "beta"]))
    with _executions(backend.store) as seen, write_transaction(backend.store.engine) as connection:
        assert execute_prepared(connection, listed, {}).first_column() == ["alpha"]
    assert seen["sqlalchemy"] == 1


def test_a_refused_statement_raises_sqlalchemys_error_and_the_transaction_rolls_back(
    backend: Backend,
) -> None:
    record = add_run(backend.store, 60, job_id=add_job(backend.store, "alpha"))
    later = datetime(2030, 1, 1, tzinfo=UTC)

    def touch_then_move(connection: Connection) -> None:
        execute_prepared(connection, _TOUCH, {"wanted": record.run_id, "at": later})
        execute_prepared(connection, _MOVE, {"wanted": record.run_id, "owner": "no-such-job"})

    # As the store's writes run: the error leaves the transaction, which rolls back with the touch in it.
    with pytest.raises(sa_exc.IntegrityError) as raised:
        run_write(backend.store.engine, touch_then_move)
    assert type(raised.value.orig).__name__ == "ForeignKeyViolation"
    assert backend.store.get_run(record.job_id, record.run_id).update_time == record.update_time


def test_a_naive_time_is_refused_before_it_is_sent(backend: Backend) -> None:
    record = add_run(backend.store, 60, job_id=add_job(backend.store, "alpha"))
    assert isinstance(job_runs.c.update_time.type, UtcDateTime)
    with (
        write_transaction(backend.store.engine) as connection,
        pytest.raises(sa_exc.StatementError, match="naive datetime"),
    ):
        execute_prepared(connection, _TOUCH, {"wanted": record.run_id, "at": datetime(2030, 1, 1)})


def test_a_connection_lost_under_a_statement_is_unavailable_and_replaced(backend: Backend) -> None:
    store = backend.store
    record = add_run(store, 60, job_id=add_job(store, "alpha"))
    store.engine.dispose()  # the next call opens the pool's one connection, which the claim then takes
    store.mark_queued([ref(record)], record.schedule_time)
    assert store.engine.pool.checkedin() == 1  # type: ignore[attr-defined]
    with store.engine.connect() as connection:
        backend_pid = connection.exec_driver_sql("SELECT pg_backend_pid()").scalar_one()
    admin = create_engine(backend.url)
    try:
        with admin.begin() as connection:
            connection.execute(text("SELECT pg_terminate_backend(:pid)"), {"pid": backend_pid})
    finally:
        admin.dispose()
    # The pooled connection is dead and, used within the idle ping's delay, is not pinged first: the claim's
    # first statement meets the loss.
    with pytest.raises(StoreUnavailable):
        store.claim([ref(record)], "ex1", record.schedule_time)
    [claim] = store.claim([ref(record)], "ex1", record.schedule_time)
    assert claim.run is not None
    assert claim.run.executor == "ex1"
