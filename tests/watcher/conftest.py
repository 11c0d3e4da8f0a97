from __future__ import annotations

import pytest

from jobmesh.adapters.store.sql import SqlStore


@pytest.fixture
def store(sqlite_store: SqlStore) -> SqlStore:
    """The watcher's tests run on a SQLite store of their own (tests/conftest.py)."""
    return sqlite_store
