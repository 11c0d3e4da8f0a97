"""Batches as tables: many rows in one statement, joined to `job_runs` by key and pruned to their partitions.

A batch is `unnest(array, array, ...)` on PostgreSQL (one typed parameter per column whatever the batch size:
the statement text stays the same, so psycopg prepares it once and the planner knows every type) and a
`WITH name(...) AS (VALUES ...)` CTE on SQLite (which has no arrays). Both join like a table.

Writes about attempts go in two steps: `lock_runs` reads the batch's runs by key, locked in (job_id, run_id)
order, the caller checks its fence on them in Python, and `update_by_key` writes the passing ones by primary
key. Two reasons:
- PostgreSQL locks rows in the order its plan visits them; a fixed order keeps two batches over the same
  runs (a sweep and a report) from deadlocking (`sql_engine.run_write` still retries one).
- Neither statement mentions the run state, so no state-partial index is a candidate: with a fence such as
  `state IN ('RUNNING', 'CANCELLING')` in SQL and statistics that lag a burst (the planner believing a
  partition holds almost no running runs), PostgreSQL read every running run of the partition through
  `ix_job_runs_deadline` for each batch (measured: 20k rows read for 500 written, 4x slower and growing).
  Keyed statements leave it the primary key only.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any, TypeVar

from sqlalchemy import (
    ColumnElement,
    Connection,
    FromClause,
    RowMapping,
    Table,
    Text,
    and_,
    bindparam,
    column,
    func,
    literal_column,
    or_,
    select,
    true,
    update,
    values,
)
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.types import ARRAY, TypeEngine

from jobmesh.adapters.store.schema import FAR_FUTURE, UtcDateTime, job_runs
from jobmesh.adapters.store.sql_rows import RUN_ROW_COLUMNS, run_row
from jobmesh.core.attempts import AttemptRef
from jobmesh.core.ids import schedule_window
from jobmesh.core.records import RunRecord, RunState

T = TypeVar("T")

# Rows per statement: SQLite binds every value (at most 32,766 parameters a statement); arrays do not mind.
CHUNK = 1000
# The window of a run id not made by `new_run_id`: any schedule time (the lookup probes every partition).
EVER = (datetime(1, 1, 2, tzinfo=UTC), FAR_FUTURE)
_MICROSECOND = timedelta(microseconds=1)

# In the order of the predicates of ix_job_runs_active and ix_job_runs_deadline: SQLite uses a partial index
# only when the query repeats its predicate as written.
ACTIVE = (RunState.QUEUED, RunState.RUNNING, RunState.CANCELLING)
HELD = (RunState.RUNNING, RunState.CANCELLING)

Columns = Sequence[tuple[str, TypeEngine[Any]]]
# A run named by its ids, with the schedule window its run id gives (the attempt is checked on the row read).
RUN_COLUMNS: Columns = (("job_id", Text()), ("run_id", Text()), ("lo", UtcDateTime()), ("hi", UtcDateTime()))
# A run's exact key, once it has been read: the write then touches one partition by primary key.
KEY_COLUMNS: Columns = (("job_id", Text()), ("run_id", Text()), ("schedule_time", UtcDateTime()))


def chunks(items: Sequence[T], size: int = CHUNK) -> Iterator[Sequence[T]]:
    for start in range(0, len(items), size):
        yield items[start : start + size]


def batch_table(
    connection: Connection, name: str, columns: Columns, rows: Sequence[Sequence[Any]]
) -> FromClause:
    """`rows` (not empty) as a table `name` with `columns`."""
    if not rows:
        raise ValueError("an empty batch has no table")
    typed = [column(col, type_) for col, type_ in columns]
    if connection.dialect.name == "postgresql":
        arrays = [
            bindparam(f"{name}_{col}", [row[i] for row in rows], type_=ARRAY(type_))
            for i, (col, type_) in enumerate(columns)
        ]
        return func.unnest(*arrays).table_valued(*typed).render_derived(name)
    return values(*typed, name=name).data([tuple(row) for row in rows]).cte(name)


def insert_rows(
    connection: Connection,
    table: Table,
    columns: Columns,
    rows: Sequence[Sequence[Any]],
    *,
    skip_taken: bool,
    returning: ColumnElement[Any] | None = None,
) -> list[Any]:
    """INSERT the rows in one statement per chunk through a batch table (`INSERT ... SELECT`), and with
    `skip_taken` ignoring rows whose key exists; the `returning` column of the rows inserted. One statement
    text whatever the number of rows, which SQLAlchemy's multi-row VALUES is not (psycopg parses each anew,
    and SQLAlchemy sends `ON CONFLICT` inserts one statement a row)."""
    names = [name for name, _ in columns]
    returned: list[Any] = []
    for chunk in chunks(rows):
        batch = batch_table(connection, f"new_{table.name}", columns, chunk)
        # SQLite needs a WHERE in an INSERT ... SELECT ... ON CONFLICT to tell the clauses apart.
        source = select(*(batch.c[name] for name in names)).where(true())
        dialect_insert = postgresql.insert if connection.dialect.name == "postgresql" else sqlite.insert
        statement = dialect_insert(table).from_select(names, source)
        if skip_taken:
            statement = statement.on_conflict_do_nothing()
        if returning is not None:
            returned += connection.execute(statement.returning(returning)).scalars().all()
        else:
            connection.execute(statement)
    return returned


def insert_runs(connection: Connection, runs: Sequence[RunRecord]) -> None:
    insert_rows(connection, job_runs, RUN_ROW_COLUMNS, [run_row(run) for run in runs], skip_taken=False)


def state_is(*states: RunState) -> ColumnElement[bool]:
    """The run state test spelled with literals: a partial index is only used when the planner can prove its
    predicate, which it cannot from a bind parameter (see INDEXES.md). Keep the order of the index
    predicates: SQLite matches an IN list term by term."""
    literals = [literal_column(f"'{state.value}'", Text) for state in states]
    if len(literals) == 1:
        return job_runs.c.state == literals[0]
    return job_runs.c.state.in_(literals)


def window_of(run_id: str) -> tuple[datetime, datetime]:
    return schedule_window(run_id) or EVER


RunRow = tuple[str, str, datetime, datetime]


def run_rows(refs: Iterable[AttemptRef]) -> list[RunRow]:
    """Rows of RUN_COLUMNS for the refs' runs (each run once), in key order."""
    runs = sorted({(ref.job_id, ref.run_id) for ref in refs})
    return [(job_id, run_id, *window_of(run_id)) for job_id, run_id in runs]


def run_match(batch: FromClause) -> ColumnElement[bool]:
    """`job_runs` rows of the batch's runs. The window is an index condition of the primary key (job_id,
    run_id, schedule_time), so each run is one probe."""
    return and_(
        job_runs.c.job_id == batch.c.job_id,
        job_runs.c.run_id == batch.c.run_id,
        job_runs.c.schedule_time >= batch.c.lo,
        job_runs.c.schedule_time < batch.c.hi,
    )


def runs_of(connection: Connection, rows: Sequence[RunRow]) -> tuple[FromClause, ColumnElement[bool]]:
    """The batch table of `run_rows` and the join condition with `job_runs`, pruned to their partitions."""
    batch = batch_table(connection, "runs", RUN_COLUMNS, rows)
    return batch, and_(run_match(batch), partitions([(row[2], row[3]) for row in rows]))


def key_match(batch: FromClause) -> ColumnElement[bool]:
    return and_(
        job_runs.c.job_id == batch.c.job_id,
        job_runs.c.run_id == batch.c.run_id,
        job_runs.c.schedule_time == batch.c.schedule_time,
    )


def partitions(windows: Sequence[tuple[datetime, datetime]]) -> ColumnElement[bool]:
    """A schedule-time condition made of constants, so PostgreSQL prunes the statement to the partitions
    (days) the batch touches; the per-row windows in a join cannot prune. One range per UTC day."""
    days: dict[object, tuple[datetime, datetime]] = {}
    for lo, hi in windows:
        if (lo, hi) == EVER:
            return and_(True)  # an id without a window: every partition
        day = lo.astimezone(UTC).date()
        low, high = days.get(day, (lo, hi))
        days[day] = (min(low, lo), max(high, hi))
    return or_(
        *(
            and_(job_runs.c.schedule_time >= lo, job_runs.c.schedule_time < hi)
            for lo, hi in sorted(days.values())
        )
    )


def key_partitions(times: Sequence[datetime]) -> ColumnElement[bool]:
    return partitions([(moment, moment + _MICROSECOND) for moment in times]) if times else and_(True)


# Writes about attempts ---------------------------------------------------------------------------------


# What a fence looks at, and the key to write by.
FENCE_COLUMNS = ("job_id", "run_id", "schedule_time", "attempt", "state", "executor")


def lock_runs(
    connection: Connection, refs: Sequence[AttemptRef], columns: Sequence[str] | None = None
) -> dict[tuple[str, str], RowMapping]:
    """The current rows of the refs' runs, whatever their attempt and state (all columns, or `columns`),
    locked in key order against concurrent claims, ends and cancels until the transaction ends."""
    found: dict[tuple[str, str], RowMapping] = {}
    selected = [job_runs.c[name] for name in columns] if columns else [job_runs]
    for chunk in chunks(run_rows(refs)):
        batch, match = runs_of(connection, chunk)
        statement = (
            select(*selected)
            .join_from(job_runs, batch, match)
            .order_by(job_runs.c.job_id, job_runs.c.run_id)
            .with_for_update(of=job_runs, key_share=True)
        )
        for row in connection.execute(statement).mappings():
            found[(row["job_id"], row["run_id"])] = row
    return found


@dataclass(frozen=True, slots=True)
class FromBatch:
    """In `update_by_key`'s SET: the value of the batch's column `name` for the row."""

    name: str


def update_by_key(
    connection: Connection, name: str, columns: Columns, rows: list[tuple[Any, ...]], **sets: Any
) -> int:
    """UPDATE job_runs from a batch of (job_id, run_id, schedule_time, *columns) rows, by primary key: rows
    `lock_runs` locked and the caller's fence passed."""
    changed = 0
    for chunk in chunks(sorted(rows, key=lambda row: (row[0], row[1]))):
        batch = batch_table(connection, name, (*KEY_COLUMNS, *columns), chunk)
        values = {
            column: batch.c[value.name] if isinstance(value, FromBatch) else value
            for column, value in sets.items()
        }
        statement = (
            update(job_runs)
            .where(key_match(batch), key_partitions([row[2] for row in chunk]))
            .values(**values)
        )
        changed += connection.execute(statement).rowcount
    return changed
