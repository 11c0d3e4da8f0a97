"""Flow control: each job's concurrency key and limit, and the gates that claims of keys and paced queues
take.

Revision ID: 0012
Revises: 0011
Create Date: 2026-12-05
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

from jobmesh.adapters.store.schema import UtcDateTime

revision: str = "0012"
down_revision: str | Sequence[str] | None = "0011"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

_KEYED = sa.text("concurrency_key IS NOT NULL")


def upgrade() -> None:
    # Nullable, no default: instant on PostgreSQL, whatever the number of jobs.
    op.add_column("jobs", sa.Column("concurrency_key", sa.Text(), nullable=True))
    op.add_column("jobs", sa.Column("concurrency_limit", sa.Integer(), nullable=True))
    # A claim counts the running runs of a key: its jobs by this index, their open runs by primary key.
    op.create_index(
        "ix_jobs_concurrency_key",
        "jobs",
        ["concurrency_key"],
        postgresql_where=_KEYED,
        sqlite_where=_KEYED,
    )
    op.create_table(
        "flow_gates",
        sa.Column("name", sa.Text(), primary_key=True),
        sa.Column("next_start_time", UtcDateTime(), nullable=True),
    )


def downgrade() -> None:
    op.drop_table("flow_gates")
    op.drop_index("ix_jobs_concurrency_key", table_name="jobs")
    # Not a batch (a copy of the table on SQLite would lose its triggers): SQLite drops a column.
    op.drop_column("jobs", "concurrency_limit")
    op.drop_column("jobs", "concurrency_key")
