"""Namespaces and the audit trail.

`jobs.namespace` and `job_runs.namespace` (a copy of the job's, so lists, filters and the live feed scope runs
without a join) are added with `'default'` for existing rows: every job so far lies in the default namespace.
On PostgreSQL a constant default is stored in the catalog, so neither table (nor any run partition) is
rewritten. A job's `request_id` becomes unique per namespace (`ux_jobs_request`), so that one namespace's
request ids never collide with, or reveal, another's. `audit_events` holds the audit trail (`core.audit`).

Indexes, from `EXPLAIN (ANALYZE, BUFFERS)` on PostgreSQL 15 (2 busy cores) with the volumes of INDEXES.md
(20,000 jobs and 350,000 runs over 38 daily partitions) spread over 20 namespaces, first page of 50;
`tests/adapters/store/test_query_plans.py` keeps the plans honest:
- `ix_job_runs_namespace_schedule (namespace, schedule_time DESC, job_id DESC, run_id DESC)`, ListRuns of
  `jobs/-` in its default order. One namespace: a Merge Append of one ordered index scan per partition, 133
  buffers, 0.4-4 ms; without it, a parallel Seq Scan of every partition and a top-N sort, 9,200 buffers,
  400 ms. PostgreSQL 15 cannot walk the index in order for an IN list of namespaces (it scanned and sorted
  36,000 runs for two: 270 ms), so a scope of a few namespaces is one ordered branch per namespace, merged
  (`sql_query._in_namespaces`): two namespaces, 250 buffers, 1-6 ms; without the index 18,000 buffers,
  0.6-2 s.
- `ix_jobs_namespace_create_time (namespace, create_time, job_id)`, ListJobs in its default order: an Index
  Scan Backward reading only the namespace's jobs, 21 buffers, 0.07 ms; without it the walk of
  `ix_jobs_create_time` filters out the other namespaces' jobs, a cost that grows as the namespace's share
  shrinks (31 buffers at 1 in 20, the whole index for a namespace with no recent job).
- `ux_jobs_request (namespace, request_id)`: the create's `ON CONFLICT DO NOTHING` and its replay lookup.
- `audit_events`: `(job_id, time, event_id)` for a job page's trail, `(namespace, time, event_id)` for a
  scoped trail and `(time, event_id)` for an admin's, each the keyset of `time desc` paging.

Revision ID: 0006
Revises: 0005
Create Date: 2026-12-01
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

from jobmesh.adapters.store.schema import UtcDateTime, id_type

revision: str = "0006"
down_revision: str | Sequence[str] | None = "0005"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

_DEFAULT = sa.text("'default'")


def upgrade() -> None:
    op.add_column("jobs", sa.Column("namespace", sa.Text(), nullable=False, server_default=_DEFAULT))
    op.add_column("job_runs", sa.Column("namespace", sa.Text(), nullable=False, server_default=_DEFAULT))
    if op.get_bind().dialect.name == "postgresql":
        op.drop_constraint("jobs_request_id_key", "jobs", type_="unique")
    else:  # SQLite drops a table constraint by copying the table
        with op.batch_alter_table("jobs", recreate="always") as batch:
            batch.drop_constraint("jobs_request_id_key", type_="unique")
    op.create_index("ux_jobs_request", "jobs", ["namespace", "request_id"], unique=True)
    op.create_index("ix_jobs_namespace_create_time", "jobs", ["namespace", "create_time", "job_id"])
    op.create_index(
        "ix_job_runs_namespace_schedule",
        "job_runs",
        ["namespace", sa.text("schedule_time DESC"), sa.text("job_id DESC"), sa.text("run_id DESC")],
    )
    op.create_table(
        "audit_events",
        sa.Column("event_id", id_type(), primary_key=True),
        sa.Column("time", UtcDateTime(), nullable=False),
        sa.Column("actor", sa.Text(), nullable=False),
        sa.Column("action", sa.Text(), nullable=False),
        sa.Column("resource", sa.Text(), nullable=False),
        sa.Column("job_id", id_type(), nullable=False),
        sa.Column("namespace", sa.Text(), nullable=False),
        sa.Column("request_id", sa.Text(), nullable=False),
    )
    op.create_index("ix_audit_events_job", "audit_events", ["job_id", "time", "event_id"])
    op.create_index("ix_audit_events_namespace", "audit_events", ["namespace", "time", "event_id"])
    op.create_index("ix_audit_events_time", "audit_events", ["time", "event_id"])


def downgrade() -> None:
    op.drop_table("audit_events")
    op.drop_index("ix_job_runs_namespace_schedule", "job_runs")
    op.drop_index("ix_jobs_namespace_create_time", "jobs")
    op.drop_index("ux_jobs_request", "jobs")
    if op.get_bind().dialect.name == "postgresql":
        op.create_unique_constraint("jobs_request_id_key", "jobs", ["request_id"])
        op.drop_column("jobs", "namespace")
    else:
        with op.batch_alter_table("jobs", recreate="always") as batch:
            batch.create_unique_constraint("jobs_request_id_key", ["request_id"])
            batch.drop_column("namespace")
    op.drop_column("job_runs", "namespace")
