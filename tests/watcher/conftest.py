from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from jobmesh.adapters.store.factory import open_store
from jobmesh.adapters.store.sql import SqlStore


@pytest.fixture
def store(tmp_path: Path, migrated_sqlite: Callable[[Path], str]) -> Iterator[SqlStore]:
    """A store on a SQLite file migrated to head."""
    opened = open_store(migrated_sqlite(tmp_path / "store.db"))
    assert isinstance(opened, SqlStore)
    yield opened
    opened.close()
