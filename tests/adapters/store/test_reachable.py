"""`check_reachable`, the store's readiness probe: it returns while the database answers, and raises
StoreUnavailable (never a driver's error) when it cannot be reached."""

from __future__ import annotations

from pathlib import Path

import pytest

from jobmesh.adapters.store.sql import SqlStore
from jobmesh.core.errors import StoreUnavailable
from tests.acceptance.processes import free_port


def test_a_reachable_store_passes_its_probe(store: SqlStore) -> None:
    store.check_reachable()  # returns, again and again: a probe asks every second
    store.check_reachable()


def test_postgresql_at_a_closed_port_fails_the_probe() -> None:
    store = SqlStore(f"postgresql+psycopg://nobody@127.0.0.1:{free_port()}/none")
    try:
        with pytest.raises(StoreUnavailable, match="Connection refused"):
            store.check_reachable()
    finally:
        store.close()


def test_a_sqlite_file_that_cannot_be_opened_fails_the_probe(tmp_path: Path) -> None:
    store = SqlStore(f"sqlite:///{tmp_path / 'gone' / 'store.db'}")  # its folder does not exist
    try:
        with pytest.raises(StoreUnavailable, match="unable to open database file"):
            store.check_reachable()
    finally:
        store.close()
