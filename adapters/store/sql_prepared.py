"""The hot path's statements executed by psycopg itself, as server-side prepared statements.

The batch statements (`sql_batch`) are built once per shape; executing one through SQLAlchemy still runs its
execution context and result machinery on every call, a fifth to a third of the store's client CPU a batch
(docs/performance.md, "Statements executed by the driver"). On PostgreSQL a statement is compiled here
once, to its text and its parameters' processors, and each call binds its values and hands the text to
the connection's psycopg cursor with `prepare=True`: PostgreSQL parses and plans it once per connection.
SQLite keeps SQLAlchemy's execution.

What SQLAlchemy would do around the driver is kept: the engine's `before_cursor_execute` and
`after_cursor_execute` listeners see each statement (with no execution context), driver errors arrive as
SQLAlchemy's `DBAPIError` (so `sql_engine.translate_errors` and `run_write` treat them alike), a type's
refusal of a value as its `StatementError`, and a lost connection is invalidated in the pool.
"""

from __future__ import annotations

import weakref
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from psycopg.rows import dict_row
from sqlalchemy import Connection
from sqlalchemy import exc as sa_exc
from sqlalchemy.engine import Dialect
from sqlalchemy.sql import ClauseElement

from jobmesh.adapters.store.sql_rows import StoredRow


@dataclass(frozen=True, slots=True)
class Executed:
    """What a statement returned: its rows as mappings, and the number of rows it wrote."""

    rows: Sequence[StoredRow]
    rowcount: int

    def tuples(self) -> list[tuple[Any, ...]]:
        return [tuple(row.values()) for row in self.rows]

    def first_column(self) -> list[Any]:
        return [next(iter(row.values())) for row in self.rows]

    def scalar(self) -> Any:
        """The first column of the first row, None without rows."""
        return next(iter(self.rows[0].values())) if self.rows else None


@dataclass(frozen=True, slots=True)
class _Compiled:
    text: str
    # Values the statement carries itself (such as an OFFSET 0 that keeps a LATERAL subquery apart).
    defaults: Mapping[str, Any]
    # Each parameter's conversion to what psycopg sends (a type's checks, JSON wrapping), where it has one.
    processors: Mapping[str, Callable[[Any], Any]]


# None: a statement SQLAlchemy writes anew at each execution (an IN list of literal values), left to it.
_COMPILED: weakref.WeakKeyDictionary[ClauseElement, _Compiled | None] = weakref.WeakKeyDictionary()


def execute_prepared(connection: Connection, statement: ClauseElement, params: Mapping[str, Any]) -> Executed:
    """`statement` (built once, and kept by its builder) with `params`, in the connection's transaction."""
    compiled = _compiled(statement, connection.dialect) if connection.dialect.name == "postgresql" else None
    if compiled is None:
        result = connection.execute(statement, params)  # type: ignore[call-overload]
        rows = result.mappings().all() if result.returns_rows else []
        return Executed(rows, result.rowcount)
    return _run(connection, compiled, _values(compiled, params))


def _compiled(statement: ClauseElement, dialect: Dialect) -> _Compiled | None:
    try:
        return _COMPILED[statement]
    except KeyError:
        return _COMPILED.setdefault(statement, _compile(statement, dialect))


def _compile(statement: ClauseElement, dialect: Dialect) -> _Compiled | None:
    compiled = statement.compile(dialect=dialect)
    processors: dict[str, Callable[[Any], Any]] = {}
    for bind, name in compiled.bind_names.items():  # type: ignore[attr-defined]
        if bind.expanding or name in compiled.escaped_bind_names:  # type: ignore[attr-defined]
            return None
        processor = bind.type.dialect_impl(dialect).bind_processor(dialect)
        if processor is not None:
            processors[name] = processor
    return _Compiled(str(compiled), dict(compiled.params), processors)


def _values(compiled: _Compiled, params: Mapping[str, Any]) -> dict[str, Any]:
    values = {**compiled.defaults, **params}
    for name, processor in compiled.processors.items():
        try:
            values[name] = processor(values[name])
        except Exception as error:  # a type's check (a naive time): raised as SQLAlchemy raises it
            raise sa_exc.StatementError(str(error), compiled.text, params, error) from error
    return values


def _run(connection: Connection, compiled: _Compiled, values: dict[str, Any]) -> Executed:
    driver = connection.connection.driver_connection
    dialect = connection.dialect
    with driver.cursor(row_factory=dict_row) as cursor:  # type: ignore[union-attr]
        for before in connection.dispatch.before_cursor_execute:
            before(connection, cursor, compiled.text, values, None, False)
        try:
            cursor.execute(compiled.text, values, prepare=True)
            rows = cursor.fetchall() if cursor.description is not None else []
        except dialect.loaded_dbapi.Error as error:
            raise _translated(connection, cursor, compiled.text, values, error) from error
        for after in connection.dispatch.after_cursor_execute:
            after(connection, cursor, compiled.text, values, None, False)
        return Executed(rows, cursor.rowcount)


def _translated(
    connection: Connection, cursor: Any, text: str, values: dict[str, Any], error: Exception
) -> sa_exc.StatementError:
    """The driver's error as SQLAlchemy raises it from its own execution; a lost connection is invalidated
    first, so that the pool replaces it."""
    dialect = connection.dialect
    lost = dialect.is_disconnect(error, connection.connection.dbapi_connection, cursor)  # type: ignore[arg-type]
    if lost:
        connection.invalidate(error)
    return sa_exc.DBAPIError.instance(
        text, values, error, dialect.loaded_dbapi.Error, connection_invalidated=lost, dialect=dialect
    )
