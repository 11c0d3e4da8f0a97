"""The mesh's count of runs per namespace, queue and state (`run_counts`), kept by triggers on `job_runs`, so
that the dashboard's board and `CountRuns` read a few rows rather than count the runs.

- PostgreSQL: each write statement on `job_runs` appends its net change per namespace, queue and state (one
  statement-level trigger per event, beside 0008's; a statement that changes no state, a heartbeat or a
  progress report, appends nothing). Appending takes no lock that another writer waits for: a counter row
  updated in place would queue every writer of runs behind the one that holds it, and two writers changing
  two states in opposite orders would deadlock. The reader sums the rows; `sql_run_counts.fold` replaces
  them by their sums when they grow (a DELETE .. RETURNING and an INSERT of the sums in one statement, safe
  beside concurrent writers and another fold).
- SQLite (one writer at a time): one row per namespace, queue and state, updated in place by row triggers.
- Run partitions dropped by retention fire no trigger: `sql_partitions` takes their runs off the counts.

Revision ID: 0013
Revises: 0012
Create Date: 2026-12-05
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0013"
down_revision: str | Sequence[str] | None = "0012"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

_COUNT_COLUMNS = "namespace, queue, state, runs"

_POSTGRES_FUNCTIONS = [
    f"""
    CREATE FUNCTION jobmesh_run_counts_inserted() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
        INSERT INTO run_counts ({_COUNT_COLUMNS})
        SELECT namespace, queue, state, count(*) FROM new_runs GROUP BY namespace, queue, state;
        RETURN NULL;
    END $$
    """,
    f"""
    CREATE FUNCTION jobmesh_run_counts_updated() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
        INSERT INTO run_counts ({_COUNT_COLUMNS})
        SELECT namespace, queue, state, sum(runs) FROM (
            SELECT n.namespace, n.queue, n.state, 1 AS runs FROM new_runs AS n
            UNION ALL
            SELECT o.namespace, o.queue, o.state, -1 AS runs FROM old_runs AS o
        ) AS moved
        GROUP BY namespace, queue, state HAVING sum(runs) <> 0;
        RETURN NULL;
    END $$
    """,
    f"""
    CREATE FUNCTION jobmesh_run_counts_deleted() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
        INSERT INTO run_counts ({_COUNT_COLUMNS})
        SELECT namespace, queue, state, -count(*) FROM old_runs GROUP BY namespace, queue, state;
        RETURN NULL;
    END $$
    """,
]
_POSTGRES_TRIGGERS = [
    "CREATE TRIGGER run_counts_inserted AFTER INSERT ON job_runs REFERENCING NEW TABLE AS new_runs "
    "FOR EACH STATEMENT EXECUTE FUNCTION jobmesh_run_counts_inserted()",
    "CREATE TRIGGER run_counts_updated AFTER UPDATE ON job_runs REFERENCING OLD TABLE AS old_runs "
    "NEW TABLE AS new_runs FOR EACH STATEMENT EXECUTE FUNCTION jobmesh_run_counts_updated()",
    "CREATE TRIGGER run_counts_deleted AFTER DELETE ON job_runs REFERENCING OLD TABLE AS old_runs "
    "FOR EACH STATEMENT EXECUTE FUNCTION jobmesh_run_counts_deleted()",
]


def _sqlite_add(row: str, runs: int) -> str:
    return (
        f"INSERT INTO run_counts ({_COUNT_COLUMNS}) "
        f"VALUES ({row}.namespace, {row}.queue, {row}.state, {runs}) "
        "ON CONFLICT (namespace, queue, state) DO UPDATE SET runs = runs + excluded.runs;"
    )


_SQLITE_TRIGGERS = [
    f"CREATE TRIGGER run_counted AFTER INSERT ON job_runs BEGIN {_sqlite_add('NEW', 1)} END",
    f"""
    CREATE TRIGGER run_recounted AFTER UPDATE OF namespace, queue, state ON job_runs
    WHEN NEW.state IS NOT OLD.state OR NEW.queue IS NOT OLD.queue OR NEW.namespace IS NOT OLD.namespace
    BEGIN {_sqlite_add("OLD", -1)} {_sqlite_add("NEW", 1)} END
    """,
    f"CREATE TRIGGER run_uncounted AFTER DELETE ON job_runs BEGIN {_sqlite_add('OLD', -1)} END",
]


def upgrade() -> None:
    postgres = op.get_bind().dialect.name == "postgresql"
    op.create_table(
        "run_counts",
        sa.Column("namespace", sa.Text(), nullable=False),
        sa.Column("queue", sa.Text(), nullable=False),
        sa.Column("state", sa.Text(), nullable=False),
        sa.Column("runs", sa.BigInteger(), nullable=False),
    )
    if not postgres:
        op.create_index("ux_run_counts", "run_counts", ["namespace", "queue", "state"], unique=True)
    # The triggers first: a run written before the count is read is in it, one written after is a change.
    for statement in [*_POSTGRES_FUNCTIONS, *_POSTGRES_TRIGGERS] if postgres else _SQLITE_TRIGGERS:
        op.execute(statement)
    op.execute(
        f"INSERT INTO run_counts ({_COUNT_COLUMNS}) "
        "SELECT namespace, queue, state, count(*) FROM job_runs GROUP BY namespace, queue, state"
    )
    if postgres:
        # Appended to and folded: vacuumed often, whatever its size.
        op.execute(
            "ALTER TABLE run_counts SET (autovacuum_vacuum_scale_factor = 0, "
            "autovacuum_vacuum_threshold = 1000, autovacuum_vacuum_cost_delay = 0)"
        )


def downgrade() -> None:
    postgres = op.get_bind().dialect.name == "postgresql"
    if postgres:
        for trigger in ("run_counts_inserted", "run_counts_updated", "run_counts_deleted"):
            op.execute(f"DROP TRIGGER {trigger} ON job_runs")
        for function in (
            "jobmesh_run_counts_inserted",
            "jobmesh_run_counts_updated",
            "jobmesh_run_counts_deleted",
        ):
            op.execute(f"DROP FUNCTION {function}()")
    else:
        for trigger in ("run_counted", "run_recounted", "run_uncounted"):
            op.execute(f"DROP TRIGGER {trigger}")
    op.drop_table("run_counts")
