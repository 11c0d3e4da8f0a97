"""Run updates that touch no index: the work queues and the change feed leave `job_runs` for tables of their
own, kept by triggers.

Before, every update of a run rewrote every index of `job_runs`: the change position (the feed's index)
changed with each visible change, and the partial indexes of the watcher, the sweeper and the overlap check
name the state in their predicates, which makes any change of state an indexed change. No update could be
HOT. Now:
- `open_runs` holds each run not yet ended with its state and the time it next needs the mesh (due time,
  dispatch time or heartbeat deadline), indexed by `(state, wake_time)`: ended runs leave it.
- `run_changes` is the feed's log: an entry for each visible change of a run (its position and the run's
  `update_time` then), indexed for the feed's keyset. The feed reads a run at its latest entry only, the one
  whose `update_time` is the run's. On PostgreSQL it is appended to, never updated (one index entry a
  change, at the index's right end), and partitioned by day like `job_runs` (`sql_partitions` makes and
  drops both); on SQLite, which drops no partitions, a run keeps one entry, replaced (`ix_run_changes_run`).
- Triggers write both from every insert, update and delete of `job_runs`: on PostgreSQL one set-based
  statement a write statement (transition tables), on SQLite one trigger a row (a counter gives positions).
- The run partitions leave two fifths of each page free, for the new versions of their rows; `open_runs`,
  rewritten at each change of a run, is vacuumed after every 2,000 dead rows, not a fifth of the table.

Revision ID: 0008
Revises: 0007
Create Date: 2026-12-04
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime, timedelta

import sqlalchemy as sa
from alembic import op

from jobmesh.adapters.store.schema import (
    CHANGE_DEFAULT_PARTITION,
    CHANGE_PARTITION_PREFIX,
    RUN_DEFAULT_PARTITION,
    RUN_FILLFACTOR,
    RUN_PARTITION_PREFIX,
    UtcDateTime,
    id_type,
)

revision: str = "0008"
down_revision: str | Sequence[str] | None = "0007"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

OPEN = "('SCHEDULED', 'QUEUED', 'RUNNING', 'CANCELLING')"
# The time an open run next needs the mesh, by its state.
WAKE = (
    "CASE {r}.state WHEN 'SCHEDULED' THEN {r}.due_time WHEN 'QUEUED' THEN {r}.dispatch_time "
    "ELSE {r}.heartbeat_deadline END"
)

_OPEN_UPSERT = f"""
    INSERT INTO open_runs (job_id, run_id, schedule_time, state, wake_time)
    SELECT r.job_id, r.run_id, r.schedule_time, r.state, {WAKE.format(r="r")} FROM {{rows}} AS r
    WHERE r.state IN {OPEN}
    ON CONFLICT (job_id, run_id) DO UPDATE SET state = excluded.state, wake_time = excluded.wake_time
    WHERE open_runs.state IS DISTINCT FROM excluded.state
        OR open_runs.wake_time IS DISTINCT FROM excluded.wake_time
"""
_CHANGE_COLUMNS = "job_id, run_id, schedule_time, update_time, change_position"

_POSTGRES_FUNCTIONS = [
    f"""
    CREATE FUNCTION jobmesh_runs_inserted() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
        INSERT INTO run_changes ({_CHANGE_COLUMNS})
        SELECT job_id, run_id, schedule_time, update_time, pg_current_xact_id()::text::bigint FROM new_runs;
        IF FOUND THEN
            PERFORM pg_notify('jobmesh_runs', '');
        END IF;
        {_OPEN_UPSERT.format(rows="new_runs")};
        RETURN NULL;
    END $$
    """,
    f"""
    CREATE FUNCTION jobmesh_runs_updated() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
        INSERT INTO run_changes ({_CHANGE_COLUMNS})
        SELECT n.job_id, n.run_id, n.schedule_time, n.update_time, pg_current_xact_id()::text::bigint
        FROM new_runs AS n JOIN old_runs AS o
            ON o.job_id = n.job_id AND o.run_id = n.run_id AND o.schedule_time = n.schedule_time
        WHERE n.update_time IS DISTINCT FROM o.update_time;
        IF FOUND THEN
            PERFORM pg_notify('jobmesh_runs', '');
        END IF;
        {_OPEN_UPSERT.format(rows="new_runs")};
        DELETE FROM open_runs AS o USING new_runs AS n
        WHERE o.job_id = n.job_id AND o.run_id = n.run_id AND n.state NOT IN {OPEN};
        RETURN NULL;
    END $$
    """,
    """
    CREATE FUNCTION jobmesh_runs_deleted() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
        DELETE FROM open_runs AS o USING old_runs AS d WHERE o.job_id = d.job_id AND o.run_id = d.run_id;
        RETURN NULL;
    END $$
    """,
]
_POSTGRES_TRIGGERS = [
    "CREATE TRIGGER runs_inserted AFTER INSERT ON job_runs REFERENCING NEW TABLE AS new_runs "
    "FOR EACH STATEMENT EXECUTE FUNCTION jobmesh_runs_inserted()",
    "CREATE TRIGGER runs_updated AFTER UPDATE ON job_runs REFERENCING OLD TABLE AS old_runs "
    "NEW TABLE AS new_runs FOR EACH STATEMENT EXECUTE FUNCTION jobmesh_runs_updated()",
    "CREATE TRIGGER runs_deleted AFTER DELETE ON job_runs REFERENCING OLD TABLE AS old_runs "
    "FOR EACH STATEMENT EXECUTE FUNCTION jobmesh_runs_deleted()",
]

_SQLITE_NEXT_POSITION = f"""
    UPDATE change_clock SET position = position + 1;
    INSERT INTO run_changes ({_CHANGE_COLUMNS})
    SELECT NEW.job_id, NEW.run_id, NEW.schedule_time, NEW.update_time, position FROM change_clock WHERE true
    ON CONFLICT (job_id, run_id, schedule_time)
    DO UPDATE SET update_time = excluded.update_time, change_position = excluded.change_position;
"""
_SQLITE_OPEN_UPSERT = f"""
    INSERT INTO open_runs (job_id, run_id, schedule_time, state, wake_time)
    SELECT NEW.job_id, NEW.run_id, NEW.schedule_time, NEW.state, {WAKE.format(r="NEW")}
    WHERE NEW.state IN {OPEN}
    ON CONFLICT (job_id, run_id) DO UPDATE SET state = excluded.state, wake_time = excluded.wake_time;
"""
_SQLITE_TRIGGERS = [
    f"""
    CREATE TRIGGER run_inserted AFTER INSERT ON job_runs
    BEGIN {_SQLITE_NEXT_POSITION} {_SQLITE_OPEN_UPSERT} END
    """,
    f"""
    CREATE TRIGGER run_changed AFTER UPDATE OF update_time ON job_runs
    WHEN NEW.update_time IS NOT OLD.update_time BEGIN {_SQLITE_NEXT_POSITION} END
    """,
    f"""
    CREATE TRIGGER run_moved AFTER UPDATE OF state, due_time, dispatch_time, heartbeat_deadline ON job_runs
    BEGIN
        DELETE FROM open_runs WHERE job_id = NEW.job_id AND run_id = NEW.run_id AND NEW.state NOT IN {OPEN};
        {_SQLITE_OPEN_UPSERT}
    END
    """,
    """
    CREATE TRIGGER run_deleted AFTER DELETE ON job_runs BEGIN
        DELETE FROM open_runs WHERE job_id = OLD.job_id AND run_id = OLD.run_id;
        DELETE FROM run_changes
        WHERE job_id = OLD.job_id AND run_id = OLD.run_id AND schedule_time = OLD.schedule_time;
    END
    """,
]

# What 0004 and 0002 made, for the downgrade.
_OLD_PARTIAL_INDEXES = {
    "ix_job_runs_due": ("due_time", "state = 'SCHEDULED'"),
    "ix_job_runs_deadline": ("heartbeat_deadline", "state IN ('RUNNING', 'CANCELLING')"),
    "ix_job_runs_dispatch": ("dispatch_time", "state = 'QUEUED'"),
    "ix_job_runs_active": ("job_id", "state IN ('QUEUED', 'RUNNING', 'CANCELLING')"),
}
_OLD_POSTGRES_FEED = [
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
_OLD_SQLITE_FEED = [
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


def _create_tables(postgres: bool) -> None:
    op.create_table(
        "open_runs",
        sa.Column("job_id", id_type(), nullable=False),
        sa.Column("run_id", id_type(), nullable=False),
        sa.Column("schedule_time", UtcDateTime(), nullable=False),
        sa.Column("state", sa.Text(), nullable=False),
        sa.Column("wake_time", UtcDateTime(), nullable=True),
        sa.PrimaryKeyConstraint("job_id", "run_id", name="pk_open_runs"),
    )
    op.create_index("ix_open_runs_wake", "open_runs", ["state", "wake_time"])
    op.create_table(
        "run_changes",
        sa.Column("job_id", id_type(), nullable=False),
        sa.Column("run_id", id_type(), nullable=False),
        sa.Column("schedule_time", UtcDateTime(), nullable=False),
        sa.Column("update_time", UtcDateTime(), nullable=False),
        sa.Column("change_position", sa.BigInteger(), nullable=False),
        postgresql_partition_by="RANGE (schedule_time)" if postgres else None,
    )
    op.create_index("ix_run_changes_position", "run_changes", ["change_position", "job_id", "run_id"])
    if not postgres:
        op.create_index(
            "ix_run_changes_run", "run_changes", ["job_id", "run_id", "schedule_time"], unique=True
        )
    if postgres:
        op.execute(f"CREATE TABLE {CHANGE_DEFAULT_PARTITION} PARTITION OF run_changes DEFAULT")
        for name, day in _run_partitions():
            start, end = day.isoformat(), (day + timedelta(days=1)).isoformat()
            op.execute(
                f"CREATE TABLE {CHANGE_PARTITION_PREFIX}{name[len(RUN_PARTITION_PREFIX) :]} "
                f"PARTITION OF run_changes FOR VALUES FROM ('{start}') TO ('{end}')"
            )


def _run_partitions() -> list[tuple[str, datetime]]:
    """The daily partitions of `job_runs` (`sql_partitions` names them by their day), with their days."""
    names = (
        op.get_bind()
        .execute(
            sa.text(
                "SELECT c.relname FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid "
                "WHERE i.inhparent = to_regclass('job_runs') AND c.relname LIKE :pattern"
            ),
            {"pattern": f"{RUN_PARTITION_PREFIX}%"},
        )
        .scalars()
    )
    days = []
    for name in names:
        suffix = name[len(RUN_PARTITION_PREFIX) :]
        if suffix.isdigit() and len(suffix) == 8:
            days.append((name, datetime.strptime(suffix, "%Y%m%d").replace(tzinfo=UTC)))
    return days


def _set_fillfactor(value: int | None) -> None:
    """On each run partition (a partitioned table has no storage of its own to set it on)."""
    for name in [RUN_DEFAULT_PARTITION, *(name for name, _ in _run_partitions())]:
        op.execute(
            f"ALTER TABLE {name} SET (fillfactor = {value})"
            if value
            else f"ALTER TABLE {name} RESET (fillfactor)"
        )


def upgrade() -> None:
    postgres = op.get_bind().dialect.name == "postgresql"
    _create_tables(postgres)
    op.execute(
        f"INSERT INTO run_changes ({_CHANGE_COLUMNS}) "
        "SELECT job_id, run_id, schedule_time, update_time, change_position FROM job_runs"
    )
    op.execute(
        "INSERT INTO open_runs (job_id, run_id, schedule_time, state, wake_time) "
        f"SELECT r.job_id, r.run_id, r.schedule_time, r.state, {WAKE.format(r='r')} FROM job_runs AS r "
        f"WHERE r.state IN {OPEN}"
    )
    if postgres:
        op.execute("DROP TRIGGER run_changed ON job_runs")
        op.execute("DROP FUNCTION jobmesh_run_changed()")
    else:
        op.execute("DROP TRIGGER run_changed")
        op.execute("DROP TRIGGER run_inserted")
    for name in [*_OLD_PARTIAL_INDEXES, "ix_job_runs_change"]:
        op.drop_index(name, "job_runs")
    # Not a batch (a copy of the table on SQLite would lose its triggers): SQLite drops a column.
    op.drop_column("job_runs", "change_position")
    for statement in [*_POSTGRES_FUNCTIONS, *_POSTGRES_TRIGGERS] if postgres else _SQLITE_TRIGGERS:
        op.execute(statement)
    if postgres:
        _set_fillfactor(RUN_FILLFACTOR)
        op.execute(
            "ALTER TABLE open_runs SET (autovacuum_vacuum_scale_factor = 0, "
            "autovacuum_vacuum_threshold = 2000, autovacuum_vacuum_cost_delay = 0)"
        )


def downgrade() -> None:
    postgres = op.get_bind().dialect.name == "postgresql"
    if postgres:
        for trigger in ("runs_inserted", "runs_updated", "runs_deleted"):
            op.execute(f"DROP TRIGGER {trigger} ON job_runs")
        for function in ("jobmesh_runs_inserted", "jobmesh_runs_updated", "jobmesh_runs_deleted"):
            op.execute(f"DROP FUNCTION {function}()")
        _set_fillfactor(None)
    else:
        for trigger in ("run_inserted", "run_changed", "run_moved", "run_deleted"):
            op.execute(f"DROP TRIGGER {trigger}")
    op.add_column(
        "job_runs", sa.Column("change_position", sa.BigInteger(), nullable=False, server_default="0")
    )
    # A run's latest entry, the one of its update time (PostgreSQL keeps them all; a transaction that began
    # earlier can change a run last, so the highest position is not always the latest).
    op.execute(
        "UPDATE job_runs SET change_position = coalesce((SELECT max(c.change_position) FROM run_changes AS c "
        "WHERE c.job_id = job_runs.job_id AND c.run_id = job_runs.run_id "
        "AND c.schedule_time = job_runs.schedule_time AND c.update_time = job_runs.update_time), 0)"
    )
    for statement in _OLD_POSTGRES_FEED if postgres else _OLD_SQLITE_FEED:
        op.execute(statement)
    op.create_index("ix_job_runs_change", "job_runs", ["change_position", "job_id", "run_id"])
    for name, (column, predicate) in _OLD_PARTIAL_INDEXES.items():
        where = sa.text(predicate)
        op.create_index(name, "job_runs", [column], postgresql_where=where, sqlite_where=where)
    op.drop_table("run_changes")  # its partitions go with it
    op.drop_table("open_runs")
