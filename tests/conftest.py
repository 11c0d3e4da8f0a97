"""Settings and fixtures of the whole suite."""

from __future__ import annotations

import os
import shutil
import socket
import urllib.parse
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from hypothesis import settings

from jobmesh.adapters.store.factory import open_store
from jobmesh.adapters.store.migrate import upgrade
from jobmesh.adapters.store.sql import SqlStore
from tests.support import SUITE_SETTINGS

# Generated tests try this many examples in `make test`; `make unit` runs the fast tier with the `unit`
# profile (`--hypothesis-profile=unit`). A test may scale the count (the garbage tests take a tenth of it on
# SQLite) or set its own.
settings.register_profile("thorough", max_examples=10_000)
settings.register_profile("unit", max_examples=1_500)
settings.load_profile("thorough")

REDIS_VARIABLES = ("JOBMESH_REDIS_URL", "JOBMESH_REDIS_TLS_URL")


def pytest_configure(config: pytest.Config) -> None:
    """Under pytest-xdist each worker gets a Redis database of its own (gw0 → 1, gw1 → 2, …), so no worker
    sees another's keys; databases, schemas, queue names and topics are already made per module or test."""
    os.environ.update(SUITE_SETTINGS)  # for the processes tests start
    worker = os.environ.get("PYTEST_XDIST_WORKER", "")
    if not worker.startswith("gw"):
        return
    for variable in REDIS_VARIABLES:
        if url := os.environ.get(variable):
            os.environ[variable] = redis_database(url, int(worker[2:]) + 1)


def redis_database(url: str, number: int) -> str:
    """`url` with its database number replaced (Redis serves 16 by default: 0 to 15)."""
    if not 0 <= number <= 15:
        raise pytest.UsageError(f"Redis has databases 0 to 15: too many xdist workers for {number}")
    parts = urllib.parse.urlsplit(url)
    return urllib.parse.urlunsplit(parts._replace(path=f"/{number}"))


@pytest.fixture
def taken_port() -> Iterator[int]:
    """A loopback port that a listening socket holds for the test."""
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", 0))
        holder.listen()
        yield holder.getsockname()[1]


@pytest.fixture(scope="session")
def sqlite_template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A SQLite file whose schema is at head, migrated once a session for tests to copy (migrating a new file
    costs each test 40 ms or more)."""
    path = tmp_path_factory.mktemp("template") / "store.db"
    upgrade(f"sqlite:///{path}")
    return path


@pytest.fixture(scope="session")
def migrated_sqlite(sqlite_template: Path) -> Callable[[Path], str]:
    """`migrated_sqlite(path)`: the URL of a copy of `sqlite_template` at `path`; `open_store` finds nothing
    left to migrate and goes on as with a new file."""

    def copy(path: Path) -> str:
        shutil.copyfile(sqlite_template, path)
        return f"sqlite:///{path}"

    return copy


@pytest.fixture
def sqlite_store(tmp_path: Path, migrated_sqlite: Callable[[Path], str]) -> Iterator[SqlStore]:
    """A store of its own for the test, on a SQLite file migrated to head."""
    opened = open_store(migrated_sqlite(tmp_path / "store.db"))
    assert isinstance(opened, SqlStore)
    yield opened
    opened.close()
