"""The triggers of `job_runs` join their transition tables by hash.

The store's sessions turn hash and merge joins off (`sql_engine`: its statements look runs up by key), and a
trigger runs with the settings of the statement that fired it. Transition tables have no index, so the
update trigger's join of the old rows to the new was a nested loop over both: quadratic in the rows of one
statement (71 s for an update of 30,000 runs). The trigger functions now carry settings of their own.

Revision ID: 0009
Revises: 0008
Create Date: 2026-12-04
"""

from __future__ import annotations

from collections.abc import Sequence

from alembic import op

revision: str = "0009"
down_revision: str | Sequence[str] | None = "0008"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

_FUNCTIONS = ("jobmesh_runs_inserted", "jobmesh_runs_updated", "jobmesh_runs_deleted")


def upgrade() -> None:
    if op.get_bind().dialect.name != "postgresql":
        return  # SQLite's triggers run a row at a time, and join nothing
    for function in _FUNCTIONS:
        op.execute(f"ALTER FUNCTION {function}() SET enable_hashjoin = on")


def downgrade() -> None:
    if op.get_bind().dialect.name != "postgresql":
        return
    for function in _FUNCTIONS:
        op.execute(f"ALTER FUNCTION {function}() RESET enable_hashjoin")
