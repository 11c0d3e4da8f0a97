"""A run's result: what a succeeded handler returned, as JSON text (`job_runs.result`).

Revision ID: 0011
Revises: 0010
Create Date: 2026-12-05
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0011"
down_revision: str | Sequence[str] | None = "0010"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    # Nullable, no default: instant on PostgreSQL, whatever the number of rows and partitions.
    op.add_column("job_runs", sa.Column("result", sa.Text(), nullable=True))


def downgrade() -> None:
    # Not a batch (a copy of the table on SQLite would lose its change-feed triggers): SQLite drops a column.
    op.drop_column("job_runs", "result")
