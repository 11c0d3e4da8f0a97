"""Each open run's queue in `open_runs`, so that a claim counts a queue's held runs (its concurrency limit,
`core.flow_control`) by an index rather than by every held run of the mesh.

- `open_runs.queue`, written at insert by 0008's triggers (as 0010 made them write the shard), from the run
  (a run's queue never changes); existing rows are backfilled.
- `ix_open_runs_queue_state (queue, state)`: the held runs of a queue are a range of it, as many as the
  queue's limit lets run.

Revision ID: 0014
Revises: 0013
Create Date: 2026-12-05
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0014"
down_revision: str | Sequence[str] | None = "0013"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

_OPEN = "('SCHEDULED', 'QUEUED', 'RUNNING', 'CANCELLING')"
_WAKE = (
    "CASE {r}.state WHEN 'SCHEDULED' THEN {r}.due_time WHEN 'QUEUED' THEN {r}.dispatch_time "
    "ELSE {r}.heartbeat_deadline END"
)
_CHANGE_COLUMNS = "job_id, run_id, schedule_time, update_time, change_position"


def _open_columns(queue: bool) -> tuple[str, str]:
    """The columns of `open_runs` the triggers write, and their values from a run `{r}`."""
    columns = "job_id, run_id, schedule_time, state, wake_time, shard" + (", queue" if queue else "")
    values = f"{{r}}.job_id, {{r}}.run_id, {{r}}.schedule_time, {{r}}.state, {_WAKE}, {{r}}.shard" + (
        ", {r}.queue" if queue else ""
    )
    return columns, values


def _open_upsert(rows: str, queue: bool) -> str:
    """0010's upsert of `open_runs` from the trigger's rows, with the run's queue when `queue`."""
    columns, values = _open_columns(queue)
    return f"""
    INSERT INTO open_runs ({columns})
    SELECT {values.format(r="r")} FROM {rows} AS r
    WHERE r.state IN {_OPEN}
    ON CONFLICT (job_id, run_id) DO UPDATE SET state = excluded.state, wake_time = excluded.wake_time
    WHERE open_runs.state IS DISTINCT FROM excluded.state
        OR open_runs.wake_time IS DISTINCT FROM excluded.wake_time
    """


def _postgres_functions(queue: bool) -> list[str]:
    """0010's trigger functions, their upserts with or without the queue."""
    return [
        f"""
        CREATE OR REPLACE FUNCTION jobmesh_runs_inserted() RETURNS trigger LANGUAGE plpgsql
        SET enable_hashjoin = on AS $$
        BEGIN
            INSERT INTO run_changes ({_CHANGE_COLUMNS})
            SELECT job_id, run_id, schedule_time, update_time, pg_current_xact_id()::text::bigint
            FROM new_runs;
            IF FOUND THEN
                PERFORM pg_notify('jobmesh_runs', '');
            END IF;
            {_open_upsert("new_runs", queue)};
            RETURN NULL;
        END $$
        """,
        f"""
        CREATE OR REPLACE FUNCTION jobmesh_runs_updated() RETURNS trigger LANGUAGE plpgsql
        SET enable_hashjoin = on AS $$
        BEGIN
            INSERT INTO run_changes ({_CHANGE_COLUMNS})
            SELECT n.job_id, n.run_id, n.schedule_time, n.update_time, pg_current_xact_id()::text::bigint
            FROM new_runs AS n JOIN old_runs AS o
                ON o.job_id = n.job_id AND o.run_id = n.run_id AND o.schedule_time = n.schedule_time
            WHERE n.update_time IS DISTINCT FROM o.update_time;
            IF FOUND THEN
                PERFORM pg_notify('jobmesh_runs', '');
            END IF;
            {_open_upsert("new_runs", queue)};
            DELETE FROM open_runs AS o USING new_runs AS n
            WHERE o.job_id = n.job_id AND o.run_id = n.run_id AND n.state NOT IN {_OPEN};
            RETURN NULL;
        END $$
        """,
    ]


def _sqlite_triggers(queue: bool) -> list[str]:
    """0010's SQLite triggers that write `open_runs`, with or without the queue."""
    columns, values = _open_columns(queue)
    upsert = f"""
    INSERT INTO open_runs ({columns})
    SELECT {values.format(r="NEW")}
    WHERE NEW.state IN {_OPEN}
    ON CONFLICT (job_id, run_id) DO UPDATE SET state = excluded.state, wake_time = excluded.wake_time
    """
    return [
        f"""
        CREATE TRIGGER run_inserted AFTER INSERT ON job_runs
        BEGIN
            UPDATE change_clock SET position = position + 1;
            INSERT INTO run_changes ({_CHANGE_COLUMNS})
            SELECT NEW.job_id, NEW.run_id, NEW.schedule_time, NEW.update_time, position
            FROM change_clock WHERE true
            ON CONFLICT (job_id, run_id, schedule_time)
            DO UPDATE SET update_time = excluded.update_time, change_position = excluded.change_position;
            {upsert};
        END
        """,
        f"""
        CREATE TRIGGER run_moved AFTER UPDATE OF state, due_time, dispatch_time, heartbeat_deadline
        ON job_runs
        BEGIN
            DELETE FROM open_runs
            WHERE job_id = NEW.job_id AND run_id = NEW.run_id AND NEW.state NOT IN {_OPEN};
            {upsert};
        END
        """,
    ]


def _replace_triggers(postgres: bool, queue: bool) -> None:
    if postgres:
        for statement in _postgres_functions(queue):
            op.execute(statement)
        return
    for trigger in ("run_inserted", "run_moved"):
        op.execute(f"DROP TRIGGER {trigger}")
    for statement in _sqlite_triggers(queue):
        op.execute(statement)


def upgrade() -> None:
    postgres = op.get_bind().dialect.name == "postgresql"
    # PostgreSQL: NOT NULL once backfilled. SQLite cannot add that constraint later (its ALTER would copy the
    # table and lose the triggers), so its column starts empty and is backfilled in place.
    op.add_column(
        "open_runs",
        sa.Column("queue", sa.Text(), nullable=True)
        if postgres
        else sa.Column("queue", sa.Text(), nullable=False, server_default=""),
    )
    _replace_triggers(postgres, queue=True)
    op.execute(
        "UPDATE open_runs SET queue = (SELECT r.queue FROM job_runs AS r WHERE r.job_id = open_runs.job_id "
        "AND r.run_id = open_runs.run_id AND r.schedule_time = open_runs.schedule_time)"
    )
    if postgres:
        op.alter_column("open_runs", "queue", nullable=False)
    op.create_index("ix_open_runs_queue_state", "open_runs", ["queue", "state"])


def downgrade() -> None:
    postgres = op.get_bind().dialect.name == "postgresql"
    op.drop_index("ix_open_runs_queue_state", "open_runs")
    _replace_triggers(postgres, queue=False)
    op.drop_column("open_runs", "queue")
