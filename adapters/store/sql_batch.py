"""Batches as tables: many rows in one statement, joined to `job_runs` by key and pruned to their partitions.

A batch is `unnest(array, array, ...)` on PostgreSQL (one typed parameter per column whatever the batch size:
the statement text stays the same, so psycopg prepares it once and the planner knows every type) and a CTE
of `SELECT ... UNION ALL SELECT ...` rows on SQLite (which has no arrays). Both join like a table.

Writes about attempts go in two steps: `lock_runs` reads the batch's runs by key, locked in (job_id, run_id)
order, the caller checks its fence on them in Python, and `update_by_key` writes the passing ones by primary
key. Two reasons:
- PostgreSQL locks rows in the order its plan visits them; a fixed order keeps two batches over the same
  runs (a sweep and a report) from deadlocking (`sql_engine.run_write` still retries one).
- Neither statement mentions the run state, so no index but the primary key is a candidate: with a fence
  such as `state IN ('RUNNING', 'CANCELLING')` in SQL and statistics that lag a burst (the planner believing
  a partition holds almost no running runs), PostgreSQL read every running run of the partition through the
  state-partial index that `job_runs` had then for each batch (measured: 20k rows read for 500 written, 4x
  slower and growing). Keyed statements leave it the primary key only.

On PostgreSQL the two do not join the batch to `job_runs`: each key is looked up on its own, in a LATERAL
subquery the planner may not flatten (`_looked_up`, `_located`), and the update reaches the rows found by
their row ids. As a join, with a partition's statistics stale, the planner read the batch's whole
schedule-time range into a hash, at a cost that grew with the rate (docs/performance.md, "Where the time
goes").

Statements are built once per shape (`functools.lru_cache` on the builders) with placeholders, and each call
binds its values: building a statement costs far more than executing it (SQLAlchemy coerces every element),
and the hot path runs these on every create, claim and result. On PostgreSQL the shape is the same whatever
the number of rows; SQLite binds every value, so a batch goes in chunks of a power of two rows, of which
there are few shapes.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from functools import lru_cache
from typing import Any, TypeVar

from sqlalchemy import (
    ColumnElement,
    Connection,
    FromClause,
    Select,
    Table,
    Text,
    Update,
    and_,
    bindparam,
    column,
    func,
    literal_column,
    or_,
    select,
    true,
    union_all,
    update,
)
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.engine import Dialect
from sqlalchemy.types import ARRAY, DateTime, TypeDecorator, TypeEngine

from jobmesh.adapters.store.schema import FAR_FUTURE, UtcDateTime, job_runs, jobs
from jobmesh.adapters.store.sql_prepared import execute_prepared
from jobmesh.adapters.store.sql_rows import RUN_ROW_COLUMNS, StoredRow, run_row
from jobmesh.core.attempts import AttemptRef
from jobmesh.core.ids import schedule_window
from jobmesh.core.records import RunRecord, RunState

T = TypeVar("T")

# Rows per statement: SQLite binds every value (at most 32,766 parameters a statement); arrays do not mind.
CHUNK = 1000
# SQLite's largest chunk: a power of two, so that a batch is a few chunks of the shapes 1, 2, 4, ... 256,
# and below the 500 selects SQLite allows in a UNION ALL.
_SQLITE_CHUNK = 256
# Shapes of statements kept built: a few per statement on PostgreSQL, ten sizes each on SQLite.
_SHAPES = 512
# The window of a run id not made by `new_run_id`: any schedule time (the lookup probes every partition).
EVER = (datetime(1, 1, 2, tzinfo=UTC), FAR_FUTURE)
_MICROSECOND = timedelta(microseconds=1)

# The states of runs an overlap policy counts as still going, and of runs that hold an executor's slot.
ACTIVE = (RunState.QUEUED, RunState.RUNNING, RunState.CANCELLING)
HELD = (RunState.RUNNING, RunState.CANCELLING)
JOB_STATE = jobs.c.state.label("job_state")  # a locked run's job's state, beside the run's own

Columns = Sequence[tuple[str, TypeEngine[Any]]]
# A run named by its ids (the attempt is checked on the row read). No schedule time: the pair is the primary
# key's prefix, so each run is one probe in each partition the batch's day ranges keep; time arrays would cost
# the client a conversion per element for nothing.
RUN_COLUMNS: Columns = (("job_id", Text()), ("run_id", Text()))
# A run's exact key, once it has been read: the write then touches one partition by primary key.
KEY_COLUMNS: Columns = (("job_id", Text()), ("run_id", Text()), ("schedule_time", UtcDateTime()))
# A run looked up on PostgreSQL (`_looked_up`): with the millisecond its id puts its schedule time in.
WINDOW_COLUMNS: Columns = (*RUN_COLUMNS, ("earliest", UtcDateTime()), ("latest", UtcDateTime()))


def chunks(items: Sequence[T], size: int = CHUNK) -> Iterator[Sequence[T]]:
    for start in range(0, len(items), size):
        yield items[start : start + size]


def batch_chunks(connection: Connection, items: Sequence[T]) -> Iterator[Sequence[T]]:
    """`items` in the chunks a batch statement takes: up to CHUNK on PostgreSQL; on SQLite, powers of two
    (a batch of 37 is 32, 4 and 1), the sizes its statements are built for."""
    if connection.dialect.name == "postgresql":
        yield from chunks(items)
        return
    start = 0
    while start < len(items):
        size = min(_SQLITE_CHUNK, 1 << ((len(items) - start).bit_length() - 1))
        yield items[start : start + size]
        start += size


def batch_size(connection: Connection, rows: int) -> int:
    """A batch table's shape: its number of rows on SQLite (one parameter a value), none on PostgreSQL."""
    return 0 if connection.dialect.name == "postgresql" else rows


@lru_cache(maxsize=_SHAPES)
def batch_table(dialect: str, name: str, columns: Columns, size: int) -> FromClause:
    """A table `name` with `columns` whose rows `batch_values` binds: `size` rows on SQLite. Parameter names
    hold double underscores, which SQLAlchemy's own (`column_1`) never do."""
    typed = [column(col, type_) for col, type_ in columns]
    if dialect == "postgresql":
        arrays = [bindparam(f"{name}__{col}", type_=_array_of(type_)) for col, type_ in columns]
        return func.unnest(*arrays).table_valued(*typed).render_derived(name)
    if size < 1:
        raise ValueError("an empty batch has no table")
    # Rows of a UNION ALL, not VALUES: SQLAlchemy caches no compiled VALUES, and would compile it anew on
    # every call.
    rows = [
        select(*(bindparam(f"{name}__{col}__{i}", type_=type_).label(col) for col, type_ in columns))
        for i in range(size)
    ]
    return (rows[0] if size == 1 else union_all(*rows)).cte(name)


class UtcDateTimeArray(TypeDecorator[list[datetime | None]]):
    """A batch's times on PostgreSQL: checked aware in one pass over the list and sent as they are (psycopg
    sends an aware time as `timestamptz`, whatever its zone). `ARRAY(UtcDateTime)` would run
    `UtcDateTime`'s conversion through SQLAlchemy's machinery once per element, a tenth of a batch's cost."""

    impl = ARRAY(DateTime(timezone=True))
    cache_ok = True

    def process_bind_param(
        self, value: list[datetime | None] | None, dialect: Dialect
    ) -> list[datetime | None] | None:
        for moment in value or ():
            if moment is not None and moment.tzinfo is None:
                raise ValueError(f"naive datetime {moment!r}: the store keeps timezone-aware times only")
        return value


def _array_of(type_: TypeEngine[Any]) -> TypeEngine[Any]:
    return UtcDateTimeArray() if isinstance(type_, UtcDateTime) else ARRAY(type_)


def batch_values(
    connection: Connection, name: str, columns: Columns, rows: Sequence[Sequence[Any]]
) -> dict[str, Any]:
    """The parameters that give `batch_table(..., name, columns, ...)` the `rows`."""
    if connection.dialect.name == "postgresql":
        return {f"{name}__{col}": [row[i] for row in rows] for i, (col, _) in enumerate(columns)}
    return {f"{name}__{col}__{r}": row[i] for r, row in enumerate(rows) for i, (col, _) in enumerate(columns)}


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
    returned: list[Any] = []
    name = f"new_{table.name}"
    for chunk in batch_chunks(connection, rows):
        statement = _insert_statement(
            connection.dialect.name,
            table,
            columns,
            batch_size(connection, len(chunk)),
            skip_taken=skip_taken,
            returning=returning,
        )
        done = execute_prepared(connection, statement, batch_values(connection, name, columns, chunk))
        if returning is not None:
            returned += done.first_column()
    return returned


@lru_cache(maxsize=_SHAPES)
def _insert_statement(
    dialect: str,
    table: Table,
    columns: Columns,
    size: int,
    *,
    skip_taken: bool,
    returning: ColumnElement[Any] | None,
) -> Any:
    names = [name for name, _ in columns]
    batch = batch_table(dialect, f"new_{table.name}", columns, size)
    # SQLite needs a WHERE in an INSERT ... SELECT ... ON CONFLICT to tell the clauses apart.
    source = select(*(batch.c[name] for name in names)).where(true())
    dialect_insert = postgresql.insert if dialect == "postgresql" else sqlite.insert
    statement = dialect_insert(table).from_select(names, source)
    if skip_taken:
        statement = statement.on_conflict_do_nothing()
    return statement.returning(returning) if returning is not None else statement


def insert_runs(connection: Connection, runs: Sequence[RunRecord]) -> None:
    insert_rows(connection, job_runs, RUN_ROW_COLUMNS, [run_row(run) for run in runs], skip_taken=False)


def window_of(run_id: str) -> tuple[datetime, datetime]:
    return schedule_window(run_id) or EVER


RunRow = tuple[str, str]


def run_rows(refs: Iterable[AttemptRef]) -> list[RunRow]:
    """Rows of RUN_COLUMNS for the refs' runs (each run once), in key order."""
    return sorted({(ref.job_id, ref.run_id) for ref in refs})


Params = dict[str, Any]


def run_batch(connection: Connection, rows: Sequence[RunRow]) -> tuple[Ranges, Params]:
    """The day ranges of the schedule times the rows' run ids give, and the parameters of the rows' batch
    with those ranges (on PostgreSQL, each run with the millisecond its id gives: `_looked_up`)."""
    windows = [window_of(run_id) for _, run_id in rows]
    ranges = day_ranges(windows)
    if connection.dialect.name == "postgresql":
        keyed = [(job_id, run_id, *window) for (job_id, run_id), window in zip(rows, windows, strict=True)]
        values = batch_values(connection, "runs", WINDOW_COLUMNS, keyed)
    else:
        values = batch_values(connection, "runs", RUN_COLUMNS, rows)
    return ranges, values | _range_values(ranges)


def run_match(batch: FromClause) -> ColumnElement[bool]:
    """`job_runs` rows of the batch's runs: a probe of the primary key (job_id, run_id, schedule_time) by its
    prefix."""
    return and_(job_runs.c.job_id == batch.c.job_id, job_runs.c.run_id == batch.c.run_id)


def select_runs(connection: Connection, rows: Sequence[RunRow]) -> tuple[Select[Any], Params]:
    """The `job_runs` rows of a batch of `run_rows` (whatever their attempt), pruned to their partitions:
    the statement and its parameters."""
    ranges, params = run_batch(connection, rows)
    statement = _select_statement(
        connection.dialect.name, batch_size(connection, len(rows)), _shape_of(ranges)
    )
    return statement, params


@lru_cache(maxsize=_SHAPES)
def _select_statement(dialect: str, size: int, ranges: int) -> Select[Any]:
    if dialect == "postgresql":
        return _looked_up(select(job_runs), ranges, locked=False)
    batch = batch_table(dialect, "runs", RUN_COLUMNS, size)
    return select(job_runs).join(batch, and_(run_match(batch), _partitions(ranges)))


def _looked_up(
    rows: Select[Any], ranges: int, *, locked: bool, with_spec: bool = False, with_job_state: bool = False
) -> Select[Any]:
    """`rows` of `job_runs` for each run of the batch in turn, by its key (PostgreSQL). As a join, the
    planner may read the batch's whole schedule-time range into a hash instead: it does whenever the
    partition's statistics are stale (a new day's partition, a burst), and that costs the range's runs, not
    the batch's (docs/performance.md, "Where the time goes"). A LATERAL subquery that PostgreSQL may not
    flatten (a lock, or an OFFSET) is looked up once per key, within the millisecond its run id gives (so
    either index that leads with the job finds it exactly) and in the partitions of the batch's days. Keys
    come sorted (`run_rows`), so locks are taken in key order. With `with_spec`, each run's job definition
    comes with it, by the jobs' primary key (only the runs are locked); with `with_job_state`, its job's
    state (`job_state`)."""
    batch = batch_table("postgresql", "runs", WINDOW_COLUMNS, 0)
    found = rows.where(
        run_match(batch),
        job_runs.c.schedule_time >= batch.c.earliest,
        job_runs.c.schedule_time < batch.c.latest,
        _partitions(ranges),
    )
    found = found.with_for_update(key_share=True) if locked else found.offset(0)
    lateral = found.lateral("found")
    statement = select(lateral).select_from(batch).join(lateral, true())
    return _with_job(statement, lateral.c.job_id, with_spec, with_job_state)


def _with_job(statement: Select[Any], job_id: Any, with_spec: bool, with_job_state: bool) -> Select[Any]:
    """`statement` with its runs' job columns asked for, by the jobs' primary key."""
    wanted = [column for column, on in ((jobs.c.spec, with_spec), (JOB_STATE, with_job_state)) if on]
    if with_job_state:  # a claim's: its flow control needs the job's concurrency key and limit
        wanted += [jobs.c.concurrency_key, jobs.c.concurrency_limit]
    return statement.add_columns(*wanted).join(jobs, jobs.c.job_id == job_id) if wanted else statement


def key_match(batch: FromClause) -> ColumnElement[bool]:
    return and_(
        job_runs.c.job_id == batch.c.job_id,
        job_runs.c.run_id == batch.c.run_id,
        job_runs.c.schedule_time == batch.c.schedule_time,
    )


# Partition pruning: the days a batch touches --------------------------------------------------------------

Ranges = list[tuple[datetime, datetime]] | None  # None: every partition


def day_ranges(windows: Sequence[tuple[datetime, datetime]]) -> Ranges:
    """One schedule-time range per UTC day the windows touch, or None when one of them is any time."""
    days: dict[object, tuple[datetime, datetime]] = {}
    for lo, hi in windows:
        if (lo, hi) == EVER:
            return None  # an id without a window: every partition
        day = lo.astimezone(UTC).date()
        low, high = days.get(day, (lo, hi))
        days[day] = (min(low, lo), max(high, hi))
    return sorted(days.values())


def _shape_of(ranges: Ranges) -> int:
    return -1 if ranges is None else len(ranges)


@lru_cache(maxsize=_SHAPES)
def _partitions(count: int, runs: FromClause = job_runs) -> ColumnElement[bool]:
    """A schedule-time condition of `count` ranges bound as parameters (-1: none), so that PostgreSQL
    prunes the statement to the partitions (days) the batch touches when it runs (a join's keys cannot
    prune). `runs`: `job_runs` or an alias of it."""
    if count < 0:
        return and_(True)
    return or_(
        *(
            and_(
                runs.c.schedule_time >= bindparam(f"day__lo__{i}", type_=UtcDateTime()),
                runs.c.schedule_time < bindparam(f"day__hi__{i}", type_=UtcDateTime()),
            )
            for i in range(count)
        )
    )


def _range_values(ranges: Ranges) -> Params:
    params: Params = {}
    for i, (lo, hi) in enumerate(ranges or ()):
        params[f"day__lo__{i}"], params[f"day__hi__{i}"] = lo, hi
    return params


def _key_ranges(times: Sequence[datetime]) -> Ranges:
    return day_ranges([(moment, moment + _MICROSECOND) for moment in times]) if times else None


# Writes about attempts ---------------------------------------------------------------------------------


# What a fence looks at, and the key to write by.
FENCE_COLUMNS = ("job_id", "run_id", "schedule_time", "attempt", "state", "executor")


def lock_runs(
    connection: Connection,
    refs: Sequence[AttemptRef],
    columns: Sequence[str] | None = None,
    *,
    with_spec: bool = False,
    with_job_state: bool = False,
) -> dict[tuple[str, str], StoredRow]:
    """The current rows of the refs' runs, whatever their attempt and state (all columns, or `columns`),
    locked in key order against concurrent claims, ends and cancels until the transaction ends. With
    `with_spec`, each row also carries its job's definition (`spec`), and with `with_job_state` its job's
    state (`job_state`) and concurrency key and limit (a claim's flow control), read in the same statement."""
    found: dict[tuple[str, str], StoredRow] = {}
    wanted = tuple(columns) if columns else None
    for chunk in batch_chunks(connection, run_rows(refs)):
        ranges, params = run_batch(connection, chunk)
        statement = _lock_statement(
            connection.dialect.name,
            wanted,
            batch_size(connection, len(chunk)),
            _shape_of(ranges),
            with_spec=with_spec,
            with_job_state=with_job_state,
        )
        for row in execute_prepared(connection, statement, params).rows:
            found[(row["job_id"], row["run_id"])] = row
    return found


@lru_cache(maxsize=_SHAPES)
def _lock_statement(
    dialect: str,
    columns: tuple[str, ...] | None,
    size: int,
    ranges: int,
    *,
    with_spec: bool,
    with_job_state: bool,
) -> Select[Any]:
    selected = [job_runs.c[name] for name in columns] if columns else [job_runs]
    if dialect == "postgresql":
        return _looked_up(
            select(*selected), ranges, locked=True, with_spec=with_spec, with_job_state=with_job_state
        )
    batch = batch_table(dialect, "runs", RUN_COLUMNS, size)
    statement = select(*selected).join_from(job_runs, batch, and_(run_match(batch), _partitions(ranges)))
    statement = _with_job(statement, job_runs.c.job_id, with_spec, with_job_state)
    return statement.order_by(job_runs.c.job_id, job_runs.c.run_id).with_for_update(
        of=job_runs, key_share=True
    )


@dataclass(frozen=True, slots=True)
class FromBatch:
    """In `update_by_key`'s SET: the value of the batch's column `name` for the row."""

    name: str


@dataclass(frozen=True, slots=True)
class _Bound:
    """In a cached UPDATE's shape: a SET value bound as a parameter (the value itself is not the shape)."""


_BOUND = _Bound()
SetShape = tuple[tuple[str, object], ...]


def update_by_key(
    connection: Connection, name: str, columns: Columns, rows: list[tuple[Any, ...]], **sets: Any
) -> int:
    """UPDATE job_runs from a batch of (job_id, run_id, schedule_time, *columns) rows, by primary key: rows
    `lock_runs` locked and the caller's fence passed. A SET value is a `FromBatch`, None, an expression
    built once (such as `job_runs.c.attempt + 1` kept in a constant) or a value, bound."""
    shape: SetShape = tuple(sorted((col, _set_shape(value)) for col, value in sets.items()))
    bound = {f"set__{col}": value for col, value in sets.items() if _set_shape(value) is _BOUND}
    batch_columns = (*KEY_COLUMNS, *columns)
    changed = 0
    for chunk in batch_chunks(connection, sorted(rows, key=lambda row: (row[0], row[1]))):
        ranges = _key_ranges([row[2] for row in chunk])
        statement = _update_statement(
            connection.dialect.name,
            name,
            batch_columns,
            batch_size(connection, len(chunk)),
            ranges=_shape_of(ranges),
            sets=shape,
        )
        params = batch_values(connection, name, batch_columns, chunk) | _range_values(ranges) | bound
        changed += execute_prepared(connection, statement, params).rowcount
    return changed


def _set_shape(value: Any) -> object:
    if value is None or isinstance(value, (FromBatch, ColumnElement)):
        return value
    return _BOUND


@lru_cache(maxsize=_SHAPES)
def _update_statement(
    dialect: str, name: str, columns: Columns, size: int, *, ranges: int, sets: SetShape
) -> Update:
    batch = batch_table(dialect, name, columns, size)
    if dialect == "postgresql":
        located = _located(batch, name, ranges)
        values = {col: _set_value(located, col, value) for col, value in sets}
        reached = (
            literal_column("job_runs.ctid") == located.c.row_id,
            literal_column("job_runs.tableoid") == located.c.part,
            job_runs.c.job_id == located.c.job_id,  # what ties the two for SQLAlchemy (and checks the row)
        )
        return update(job_runs).where(*reached, _partitions(ranges)).values(**values)
    values = {col: _set_value(batch, col, value) for col, value in sets}
    return update(job_runs).where(key_match(batch), _partitions(ranges)).values(**values)


def _located(batch: FromClause, name: str, ranges: int) -> FromClause:
    """The batch's rows, each with the row id (`row_id`, `part`) of its run, found by its key on its own
    (PostgreSQL): as a join of the keys, the planner may read the batch's whole range into a hash (see
    `_looked_up`). The update then reaches each run by its row id."""
    located = job_runs.alias("located")
    row = (
        select(
            literal_column("located.ctid").label("row_id"), literal_column("located.tableoid").label("part")
        )
        .select_from(located)
        .where(
            located.c.job_id == batch.c.job_id,
            located.c.run_id == batch.c.run_id,
            located.c.schedule_time == batch.c.schedule_time,
            _partitions(ranges, located),
        )
        .offset(0)
        .lateral("found")
    )
    return select(batch, row).select_from(batch).join(row, true()).subquery(f"{name}_located")


def _set_value(batch: FromClause, col: str, value: object) -> Any:
    if isinstance(value, FromBatch):
        return batch.c[value.name]
    if value is _BOUND:
        return bindparam(f"set__{col}", type_=job_runs.c[col].type)
    return value
