"""Statements and transactions that PostgreSQL ran for the mesh, from `pg_stat_statements` and
`pg_stat_database`: `start()` before the offered window, `stop()` after it, and the difference divided by the
runs made is the write path's cost in round trips.

The throwaway PostgreSQL of `tools/services/services.sh` preloads the extension; on another server without it
the figures are absent (and say why). The benchmark's own queries carry `MARK` and are left out.
"""

from __future__ import annotations

from dataclasses import dataclass

import psycopg

MARK = "/* benchmark */"
TOP = 8


@dataclass(frozen=True, slots=True)
class Statements:
    calls: int
    commits: int
    top: list[tuple[str, int]]  # (statement, calls), most called first


def _conninfo(url: str) -> str:
    return url.replace("postgresql+psycopg://", "postgresql://", 1)


def commits(url: str) -> int:
    """The database's commits so far."""
    with psycopg.connect(_conninfo(url), autocommit=True) as connection:
        return _commits(connection)


def start(url: str) -> int | str:
    """Zeroes the statement counters; returns the database's commits so far, or why nothing is counted."""
    try:
        with psycopg.connect(_conninfo(url), autocommit=True) as connection:
            connection.execute("CREATE EXTENSION IF NOT EXISTS pg_stat_statements")
            connection.execute("SELECT pg_stat_statements_reset()")
            return _commits(connection)
    except psycopg.Error as error:
        return f"pg_stat_statements unavailable: {str(error).strip().splitlines()[0]}"


def stop(url: str, commits_before: int) -> Statements:
    with psycopg.connect(_conninfo(url), autocommit=True) as connection:
        rows = connection.execute(
            "SELECT query, calls FROM pg_stat_statements s JOIN pg_database d ON d.oid = s.dbid "
            "WHERE d.datname = current_database() AND s.query NOT LIKE %s "
            "AND s.query NOT LIKE '%%pg_stat%%' ORDER BY calls DESC",
            (f"%{MARK}%",),
        ).fetchall()
        commits = _commits(connection) - commits_before
    calls = sum(int(count) for _, count in rows)
    top = [(" ".join(str(query).split())[:120], int(count)) for query, count in rows[:TOP]]
    return Statements(calls, commits, top)


def _commits(connection: psycopg.Connection[tuple[object, ...]]) -> int:
    row = connection.execute(
        "SELECT xact_commit FROM pg_stat_database WHERE datname = current_database()"
    ).fetchone()
    return int(str(row[0])) if row else 0
