"""Initial schema: jobs, job_runs (range-partitioned by schedule_time on PostgreSQL), run_attempts, run_logs.

Revision ID: 0001
Revises:
Create Date: 2026-11-29
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import sqlalchemy as sa
from alembic import op

from jobmesh.adapters.store.schema import UtcDateTime, id_type, labels_type

revision: str = "0001"
down_revision: str | Sequence[str] | None = None
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def _is_postgres() -> bool:
    return op.get_bind().dialect.name == "postgresql"


def _partial(predicate: str) -> dict[str, Any]:
    return {"postgresql_where": sa.text(predicate), "sqlite_where": sa.text(predicate)}


def _create_jobs() -> None:
    op.create_table(
        "jobs",
        sa.Column("job_id", id_type(), primary_key=True),
        sa.Column("spec", sa.LargeBinary(), nullable=False),
        sa.Column("display_name", sa.Text(), nullable=False),
        sa.Column("labels", labels_type(), nullable=False),
        sa.Column("schedule_kind", sa.Text(), nullable=False),
        sa.Column("priority", sa.Text(), nullable=False),
        sa.Column("queue", sa.Text(), nullable=False),
        sa.Column("state", sa.Text(), nullable=False),
        sa.Column("next_run_time", UtcDateTime(), nullable=True),
        sa.Column("create_time", UtcDateTime(), nullable=False),
        sa.Column("update_time", UtcDateTime(), nullable=False),
        sa.Column("version", sa.Integer(), nullable=False),
        sa.Column("request_id", sa.Text(), nullable=True),
        sa.Column("request_hash", sa.Text(), nullable=True),
        sa.Column("first_run_id", id_type(), nullable=True),
        sa.UniqueConstraint("request_id", name="jobs_request_id_key"),
    )
    op.create_index("ix_jobs_next_run_time", "jobs", ["next_run_time"], **_partial("state = 'ACTIVE'"))
    op.create_index("ix_jobs_create_time", "jobs", ["create_time", "job_id"])
    if _is_postgres():
        op.create_index("ix_jobs_labels", "jobs", ["labels"], postgresql_using="gin")


def _create_job_runs() -> None:
    times = ("dispatch_time", "start_time", "last_heartbeat_time", "end_time", "first_start_time")
    op.create_table(
        "job_runs",
        sa.Column("job_id", id_type(), sa.ForeignKey("jobs.job_id"), nullable=False),
        sa.Column("run_id", id_type(), nullable=False),
        sa.Column("schedule_time", UtcDateTime(), nullable=False),
        sa.Column("attempt", sa.Integer(), nullable=False),
        sa.Column("due_time", UtcDateTime(), nullable=False),
        sa.Column("state", sa.Text(), nullable=False),
        sa.Column("trigger", sa.Text(), nullable=False),
        sa.Column("priority", sa.Text(), nullable=False),
        sa.Column("queue", sa.Text(), nullable=False),
        sa.Column("replay_of", id_type(), nullable=True),
        sa.Column("executor", sa.Text(), nullable=True),
        *(sa.Column(name, UtcDateTime(), nullable=True) for name in times),
        sa.Column("exit_code", sa.Integer(), nullable=True),
        sa.Column("error_type", sa.Text(), nullable=True),
        sa.Column("error_message", sa.Text(), nullable=True),
        sa.Column("progress", sa.Float(), nullable=False),
        sa.Column("progress_message", sa.Text(), nullable=False),
        sa.Column("create_time", UtcDateTime(), nullable=False),
        sa.Column("update_time", UtcDateTime(), nullable=False),
        sa.Column("request_id", sa.Text(), nullable=True),
        sa.Column("request_hash", sa.Text(), nullable=True),
        sa.PrimaryKeyConstraint("job_id", "run_id", "schedule_time", name="pk_job_runs"),
        postgresql_partition_by="RANGE (schedule_time)",
    )
    if _is_postgres():
        # Catches any run no daily partition covers, so an insert never fails for want of a partition.
        op.execute("CREATE TABLE job_runs_default PARTITION OF job_runs DEFAULT")
    op.create_index("ix_job_runs_due", "job_runs", ["due_time"], **_partial("state = 'SCHEDULED'"))
    op.create_index(
        "ix_job_runs_heartbeat", "job_runs", ["last_heartbeat_time"], **_partial("state = 'RUNNING'")
    )
    op.create_index(
        "ix_job_runs_job_schedule",
        "job_runs",
        ["job_id", sa.text("schedule_time DESC"), sa.text("run_id DESC")],
    )
    op.create_index(
        "ix_job_runs_request", "job_runs", ["job_id", "request_id"], **_partial("request_id IS NOT NULL")
    )


def _create_history() -> None:
    op.create_table(
        "run_attempts",
        sa.Column("job_id", id_type(), sa.ForeignKey("jobs.job_id"), nullable=False),
        sa.Column("run_id", id_type(), nullable=False),
        sa.Column("attempt", sa.Integer(), nullable=False),
        sa.Column("state", sa.Text(), nullable=False),
        sa.Column("executor", sa.Text(), nullable=True),
        sa.Column("start_time", UtcDateTime(), nullable=True),
        sa.Column("end_time", UtcDateTime(), nullable=True),
        sa.Column("exit_code", sa.Integer(), nullable=True),
        sa.Column("error_type", sa.Text(), nullable=True),
        sa.Column("error_message", sa.Text(), nullable=True),
        sa.PrimaryKeyConstraint("job_id", "run_id", "attempt", name="pk_run_attempts"),
    )
    op.create_table(
        "run_logs",
        sa.Column("job_id", id_type(), nullable=False),
        sa.Column("run_id", id_type(), nullable=False),
        sa.Column("sequence", sa.BigInteger(), nullable=False),
        sa.Column("attempt", sa.Integer(), nullable=False),
        sa.Column("time", UtcDateTime(), nullable=False),
        sa.Column("stream", sa.Text(), nullable=False),
        sa.Column("text", sa.Text(), nullable=False),
        sa.PrimaryKeyConstraint("job_id", "run_id", "sequence", name="pk_run_logs"),
    )


def upgrade() -> None:
    _create_jobs()
    _create_job_runs()
    _create_history()


def downgrade() -> None:
    op.drop_table("run_logs")
    op.drop_table("run_attempts")
    op.drop_table("job_runs")  # drops its partitions with it
    op.drop_table("jobs")
