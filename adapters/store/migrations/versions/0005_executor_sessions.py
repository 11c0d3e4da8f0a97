"""Executor sessions: when each executor's stream was last known live, renewed by the server holding it.

One row per executor, renewed for all of a server's streams in one statement a second (`sql_leases`). The
sweeper takes an attempt of a live session for alive, so heartbeats cost no write per attempt.

Revision ID: 0005
Revises: 0004
Create Date: 2026-12-01
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

from jobmesh.adapters.store.schema import UtcDateTime, id_type

revision: str = "0005"
down_revision: str | Sequence[str] | None = "0004"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "executor_sessions",
        sa.Column("executor_id", id_type(), primary_key=True),
        sa.Column("server_id", sa.Text(), nullable=False),
        sa.Column("renewed_at", UtcDateTime(), nullable=False),
    )


def downgrade() -> None:
    op.drop_table("executor_sessions")
