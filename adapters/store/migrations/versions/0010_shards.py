"""Watcher shards: every job and run carries its shard (`core.shards`), so that watchers can share the job
space by leasing shards, and each scans only its own.

- `jobs.shard`, `job_runs.shard` and `open_runs.shard`, written at insert (`open_runs` by its triggers, from
  the run); existing rows are backfilled. PostgreSQL checks the range, the count being fixed
  (`core.shards.SHARDS`).
- The window scan reads `ix_open_runs_shard_wake (shard, state, wake_time)`: a range per held shard. The
  sweeper's scans (one watcher, every shard) keep `ix_open_runs_wake`.
- The cron scan reads `ix_jobs_shard_next_run_time (shard, next_run_time) WHERE state = 'ACTIVE'`, which
  replaces `ix_jobs_next_run_time` (the scan is always by shard now).

Revision ID: 0010
Revises: 0009
Create Date: 2026-12-04
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

from jobmesh.core.shards import SHARDS, shard_of

revision: str = "0010"
down_revision: str | Sequence[str] | None = "0009"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

_OPEN = "('SCHEDULED', 'QUEUED', 'RUNNING', 'CANCELLING')"
_WAKE = (
    "CASE {r}.state WHEN 'SCHEDULED' THEN {r}.due_time WHEN 'QUEUED' THEN {r}.dispatch_time "
    "ELSE {r}.heartbeat_deadline END"
)
_CHANGE_COLUMNS = "job_id, run_id, schedule_time, update_time, change_position"
_BACKFILL_CHUNK = 1000


def _open_upsert(rows: str, shard: bool) -> str:
    """0008's upsert of `open_runs` from the trigger's rows, with the run's shard when `shard`."""
    columns = "job_id, run_id, schedule_time, state, wake_time" + (", shard" if shard else "")
    values = f"r.job_id, r.run_id, r.schedule_time, r.state, {_WAKE.format(r='r')}" + (
        ", r.shard" if shard else ""
    )
    return f"""
    INSERT INTO open_runs ({columns})
    SELECT {values} FROM {rows} AS r
    WHERE r.state IN {_OPEN}
    ON CONFLICT (job_id, run_id) DO UPDATE SET state = excluded.state, wake_time = excluded.wake_time
    WHERE open_runs.state IS DISTINCT FROM excluded.state
        OR open_runs.wake_time IS DISTINCT FROM excluded.wake_time
    """


def _postgres_functions(shard: bool) -> list[str]:
    """0008's trigger functions (with 0009's setting), their upserts with or without the shard."""
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
            {_open_upsert("new_runs", shard)};
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
            {_open_upsert("new_runs", shard)};
            DELETE FROM open_runs AS o USING new_runs AS n
            WHERE o.job_id = n.job_id AND o.run_id = n.run_id AND n.state NOT IN {_OPEN};
            RETURN NULL;
        END $$
        """,
    ]


def _sqlite_open_upsert(shard: bool) -> str:
    """0008's SQLite upsert of `open_runs` from the trigger's row, with the run's shard when `shard`."""
    columns = "job_id, run_id, schedule_time, state, wake_time" + (", shard" if shard else "")
    values = f"NEW.job_id, NEW.run_id, NEW.schedule_time, NEW.state, {_WAKE.format(r='NEW')}" + (
        ", NEW.shard" if shard else ""
    )
    return f"""
    INSERT INTO open_runs ({columns})
    SELECT {values}
    WHERE NEW.state IN {_OPEN}
    ON CONFLICT (job_id, run_id) DO UPDATE SET state = excluded.state, wake_time = excluded.wake_time
    """


def _sqlite_triggers(shard: bool) -> list[str]:
    """0008's SQLite triggers that write `open_runs`, with or without the shard."""
    upsert = _sqlite_open_upsert(shard)
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


def _replace_triggers(postgres: bool, shard: bool) -> None:
    if postgres:
        for statement in _postgres_functions(shard):
            op.execute(statement)
        return
    for trigger in ("run_inserted", "run_moved"):
        op.execute(f"DROP TRIGGER {trigger}")
    for statement in _sqlite_triggers(shard):
        op.execute(statement)


def _add_shard_column(table: str, postgres: bool) -> None:
    # PostgreSQL: NOT NULL once backfilled (below). SQLite cannot add that constraint later (its ALTER would
    # copy the table and lose the triggers), so its column starts at shard 0 and is backfilled in place.
    column = (
        sa.Column("shard", sa.SmallInteger(), nullable=True)
        if postgres
        else sa.Column("shard", sa.SmallInteger(), nullable=False, server_default="0")
    )
    op.add_column(table, column)


def _backfill_jobs() -> None:
    connection = op.get_bind()
    by_shard: dict[int, list[str]] = defaultdict(list)
    for job_id in connection.execute(sa.text("SELECT job_id FROM jobs")).scalars():
        by_shard[shard_of(job_id)].append(job_id)
    update = sa.text("UPDATE jobs SET shard = :shard WHERE job_id IN :ids").bindparams(
        sa.bindparam("ids", expanding=True)
    )
    for shard, job_ids in by_shard.items():
        for start in range(0, len(job_ids), _BACKFILL_CHUNK):
            connection.execute(update, {"shard": shard, "ids": job_ids[start : start + _BACKFILL_CHUNK]})


def upgrade() -> None:
    postgres = op.get_bind().dialect.name == "postgresql"
    for table in ("jobs", "job_runs", "open_runs"):
        _add_shard_column(table, postgres)
    _replace_triggers(postgres, shard=True)
    _backfill_jobs()
    for table in ("job_runs", "open_runs"):
        op.execute(
            f"UPDATE {table} SET shard = (SELECT jobs.shard FROM jobs WHERE jobs.job_id = {table}.job_id)"
        )
    if postgres:
        for table in ("jobs", "job_runs", "open_runs"):
            op.alter_column(table, "shard", nullable=False)
        for table in ("jobs", "job_runs"):
            op.create_check_constraint(f"ck_{table}_shard", table, f"shard >= 0 AND shard < {SHARDS}")
    op.drop_index("ix_jobs_next_run_time", "jobs")
    active = sa.text("state = 'ACTIVE'")
    op.create_index(
        "ix_jobs_shard_next_run_time",
        "jobs",
        ["shard", "next_run_time"],
        postgresql_where=active,
        sqlite_where=active,
    )
    op.create_index("ix_open_runs_shard_wake", "open_runs", ["shard", "state", "wake_time"])


def downgrade() -> None:
    postgres = op.get_bind().dialect.name == "postgresql"
    op.drop_index("ix_open_runs_shard_wake", "open_runs")
    op.drop_index("ix_jobs_shard_next_run_time", "jobs")
    active = sa.text("state = 'ACTIVE'")
    op.create_index(
        "ix_jobs_next_run_time", "jobs", ["next_run_time"], postgresql_where=active, sqlite_where=active
    )
    _replace_triggers(postgres, shard=False)
    for table in ("open_runs", "job_runs", "jobs"):
        op.drop_column(table, "shard")  # with its check constraint
