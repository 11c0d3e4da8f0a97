"""The backend a contract test runs on, and fresh PostgreSQL schemas for tests that need their own."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from sqlalchemy import create_engine, text
from sqlalchemy.engine import make_url

from jobmesh.adapters.store.sql import SqlStore


@dataclass
class Backend:
    name: str
    url: str
    store: SqlStore

    def execute(self, sql: str, rows: list[dict[str, Any]] | dict[str, Any] | None = None) -> list[Any]:
        """Runs SQL beside the store (to set up what no port method writes, or to look underneath)."""
        with self.store.engine.begin() as connection:
            result = connection.execute(text(sql), rows or {})
            return list(result.all()) if result.returns_rows else []


@contextmanager
def pg_schema(base_url: str, prefix: str) -> Iterator[str]:
    """A fresh schema on the test server; yields a URL whose connections use it."""
    schema = f"{prefix}_{uuid.uuid4().hex[:10]}"
    admin = create_engine(base_url)
    try:
        with admin.begin() as connection:
            connection.execute(text(f"CREATE SCHEMA {schema}"))
        url = make_url(base_url).update_query_dict({"options": f"-csearch_path={schema}"})
        yield url.render_as_string(hide_password=False)
    finally:
        with admin.begin() as connection:
            connection.execute(text(f"DROP SCHEMA IF EXISTS {schema} CASCADE"))
        admin.dispose()
