"""The change feed: every visible change of a run (its `update_time` changed) gets a change position, and
wakes the servers that stream changes.

`job_runs.change_position` is indexed with the run's key (the feed's keyset). On PostgreSQL it is the id of
the writing transaction (`pg_current_xact_id()`), set by a trigger that also sends `NOTIFY jobmesh_runs`; a
reader takes only positions below the oldest transaction still open, so a run committed late is never
skipped (`sql_feed`). On SQLite (one writer at a time) it is a counter that triggers advance.

Revision ID: 0004
Revises: 0003
Create Date: 2026-12-01
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0004"
down_revision: str | Sequence[str] | None = "0003"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

_POSTGRES = [
    """
    CREATE FUNCTION jobmesh_run_changed() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
        IF TG_OP = 'INSERT' OR NEW.update_time IS DISTINCT FROM OLD.update_time THEN
            NEW.change_position := pg_current_xact_id()::text::bigint;
            PERFORM pg_notify('jobmesh_runs', '');
        END IF;
        RETURN NEW;
    END $$
    """,
    """
    CREATE TRIGGER run_changed BEFORE INSERT OR UPDATE ON job_runs
    FOR EACH ROW EXECUTE FUNCTION jobmesh_run_changed()
    """,
]
_SQLITE = [
    "CREATE TABLE change_clock (position BIGINT NOT NULL)",
    "INSERT INTO change_clock (position) SELECT count(*) FROM job_runs",
    """
    CREATE TRIGGER run_inserted AFTER INSERT ON job_runs BEGIN
        UPDATE change_clock SET position = position + 1;
        UPDATE job_runs SET change_position = (SELECT position FROM change_clock) WHERE rowid = NEW.rowid;
    END
    """,
    """
    CREATE TRIGGER run_changed AFTER UPDATE OF update_time ON job_runs
    WHEN NEW.update_time IS NOT OLD.update_time BEGIN
        UPDATE change_clock SET position = position + 1;
        UPDATE job_runs SET change_position = (SELECT position FROM change_clock) WHERE rowid = NEW.rowid;
    END
    """,
]


def upgrade() -> None:
    postgres = op.get_bind().dialect.name == "postgresql"
    op.add_column(
        "job_runs", sa.Column("change_position", sa.BigInteger(), nullable=False, server_default="0")
    )
    for statement in _POSTGRES if postgres else _SQLITE:
        op.execute(statement)
    if not postgres:  # existing runs take positions in their key order
        op.execute(
            "UPDATE job_runs SET change_position = (SELECT count(*) FROM job_runs AS earlier "
            "WHERE (earlier.job_id, earlier.run_id) <= (job_runs.job_id, job_runs.run_id))"
        )
    op.create_index("ix_job_runs_change", "job_runs", ["change_position", "job_id", "run_id"])


def downgrade() -> None:
    postgres = op.get_bind().dialect.name == "postgresql"
    op.drop_index("ix_job_runs_change", "job_runs")
    if postgres:
        op.execute("DROP TRIGGER run_changed ON job_runs")
        op.execute("DROP FUNCTION jobmesh_run_changed()")
    else:
        op.execute("DROP TRIGGER run_changed")
        op.execute("DROP TRIGGER run_inserted")
        op.execute("DROP TABLE change_clock")
    op.drop_column("job_runs", "change_position")
