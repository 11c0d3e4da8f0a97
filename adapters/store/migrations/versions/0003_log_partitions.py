"""Run logs partitioned like the runs: by day, so that they age out with their runs' partitions.

`run_logs` becomes a table partitioned by range of `run_id` (a run id starts with its schedule time, so a
day's runs lie between two ids), with a DEFAULT partition; the daily partitions are made by
`sql_partitions.maintain`, which moves each day's lines out of DEFAULT. PostgreSQL only: SQLite keeps one
table.

Revision ID: 0003
Revises: 0002
Create Date: 2026-12-01
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

from jobmesh.adapters.store.schema import UtcDateTime, id_type

revision: str = "0003"
down_revision: str | Sequence[str] | None = "0002"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

COLUMNS = "job_id, run_id, sequence, attempt, time, stream, text"


def _create_logs(name: str, partitioned: bool) -> None:
    op.create_table(
        name,
        sa.Column("job_id", id_type(), nullable=False),
        sa.Column("run_id", id_type(), nullable=False),
        sa.Column("sequence", sa.BigInteger(), nullable=False),
        sa.Column("attempt", sa.Integer(), nullable=False),
        sa.Column("time", UtcDateTime(), nullable=False),
        sa.Column("stream", sa.Text(), nullable=False),
        sa.Column("text", sa.Text(), nullable=False),
        sa.PrimaryKeyConstraint("job_id", "run_id", "sequence", name=f"pk_{name}"),
        postgresql_partition_by="RANGE (run_id)" if partitioned else None,
    )


def _rebuild(partitioned: bool) -> None:
    op.execute("ALTER TABLE run_logs RENAME TO run_logs_old")
    op.execute("ALTER TABLE run_logs_old RENAME CONSTRAINT pk_run_logs TO pk_run_logs_old")
    _create_logs("run_logs", partitioned)
    if partitioned:
        op.execute("CREATE TABLE run_logs_default PARTITION OF run_logs DEFAULT")
    op.execute(f"INSERT INTO run_logs ({COLUMNS}) SELECT {COLUMNS} FROM run_logs_old")
    op.execute("DROP TABLE run_logs_old")


def upgrade() -> None:
    if op.get_bind().dialect.name == "postgresql":
        _rebuild(partitioned=True)


def downgrade() -> None:
    if op.get_bind().dialect.name == "postgresql":
        _rebuild(partitioned=False)  # the partitions go with the table they belonged to
