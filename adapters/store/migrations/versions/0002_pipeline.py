"""The scheduling pipeline: per-run heartbeat timeout and deadline, the pipeline's partial indexes, leases.

The sweeper now scans `heartbeat_deadline` (each run carries its own timeout) instead of
`last_heartbeat_time`, so `ix_job_runs_heartbeat` is replaced by `ix_job_runs_deadline`. INDEXES.md says why
each index exists.

Revision ID: 0002
Revises: 0001
Create Date: 2026-11-29
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import sqlalchemy as sa
from alembic import op

from jobmesh.adapters.store.schema import UtcDateTime

revision: str = "0002"
down_revision: str | Sequence[str] | None = "0001"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

_DEFAULT_TIMEOUT_MS = 15_000


def _partial(predicate: str) -> dict[str, Any]:
    return {"postgresql_where": sa.text(predicate), "sqlite_where": sa.text(predicate)}


def _backfill_deadlines() -> None:
    """Attempts running during the upgrade get a deadline, or the sweeper (which reads only the deadline)
    would never recover them."""
    if op.get_bind().dialect.name == "postgresql":
        since = "COALESCE(last_heartbeat_time, start_time, now()) + interval '15 seconds'"
    else:
        # The stored text format is 'YYYY-MM-DD HH:MM:SS.ffffff'; strftime's %f gives milliseconds only.
        since = (
            "strftime('%Y-%m-%d %H:%M:%f', COALESCE(last_heartbeat_time, start_time, 'now'), "
            "'+15 seconds') || '000'"
        )
    op.execute(
        f"UPDATE job_runs SET heartbeat_deadline = {since} "
        "WHERE state IN ('RUNNING', 'CANCELLING') AND heartbeat_deadline IS NULL"
    )


def upgrade() -> None:
    # On PostgreSQL both are catalog-only changes (a constant default needs no table rewrite), propagated
    # to every partition.
    op.add_column(
        "job_runs",
        sa.Column(
            "heartbeat_timeout_ms",
            sa.BigInteger(),
            nullable=False,
            server_default=sa.text(str(_DEFAULT_TIMEOUT_MS)),
        ),
    )
    op.add_column("job_runs", sa.Column("heartbeat_deadline", UtcDateTime(), nullable=True))
    _backfill_deadlines()
    op.drop_index("ix_job_runs_heartbeat", table_name="job_runs")
    op.create_index(
        "ix_job_runs_deadline",
        "job_runs",
        ["heartbeat_deadline"],
        **_partial("state IN ('RUNNING', 'CANCELLING')"),
    )
    op.create_index("ix_job_runs_dispatch", "job_runs", ["dispatch_time"], **_partial("state = 'QUEUED'"))
    op.create_index(
        "ix_job_runs_active",
        "job_runs",
        ["job_id"],
        **_partial("state IN ('QUEUED', 'RUNNING', 'CANCELLING')"),
    )
    op.create_table(
        "leases",
        sa.Column("name", sa.Text(), primary_key=True),
        sa.Column("holder", sa.Text(), nullable=False),
        sa.Column("expires_at", UtcDateTime(), nullable=False),
    )


def downgrade() -> None:
    op.drop_table("leases")
    op.drop_index("ix_job_runs_active", table_name="job_runs")
    op.drop_index("ix_job_runs_dispatch", table_name="job_runs")
    op.drop_index("ix_job_runs_deadline", table_name="job_runs")
    op.create_index(
        "ix_job_runs_heartbeat", "job_runs", ["last_heartbeat_time"], **_partial("state = 'RUNNING'")
    )
    op.drop_column("job_runs", "heartbeat_deadline")
    op.drop_column("job_runs", "heartbeat_timeout_ms")
