"""What the parent of server workers does when one dies: it releases the executor names the worker held, and
an unreachable store costs one line, not the parent (the names lapse a quiet limit later)."""

from __future__ import annotations

import logging
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from jobmesh.adapters.store.factory import open_store
from jobmesh.adapters.store.sql import SqlStore
from jobmesh.processes.server_workers import release_names_of

QUIET = timedelta(seconds=9)
NOW = datetime(2026, 12, 1, tzinfo=UTC)


def test_a_dead_workers_executors_are_free_for_the_others(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    store = open_store(f"sqlite:///{tmp_path / 'store.db'}")
    try:
        store.renew_sessions(["e1", "e2"], "server-dead", NOW, stale_after=QUIET)
        store.renew_sessions(["e3"], "server-alive", NOW, stale_after=QUIET)
        with caplog.at_level(logging.INFO, "jobmesh.processes.server_workers"):
            release_names_of(store, "server-dead")
        assert caplog.messages == ["executors ['e1', 'e2'] of dead server worker server-dead released"]
        later = NOW + timedelta(seconds=1)
        assert store.renew_sessions(["e1", "e2", "e3"], "server-other", later, stale_after=QUIET) == {
            "e1",
            "e2",
        }
    finally:
        store.close()


def test_an_unreachable_store_is_one_line_and_the_names_lapse_later(caplog: pytest.LogCaptureFixture) -> None:
    store = SqlStore("postgresql+psycopg://nobody@127.0.0.1:1/none?connect_timeout=2")
    try:
        with caplog.at_level(logging.INFO, "jobmesh.processes.server_workers"):
            release_names_of(store, "server-dead")  # returns: the parent lives on
    finally:
        store.close()
    [record] = caplog.records
    assert record.levelno == logging.WARNING
    assert record.getMessage().startswith(
        "executor names of dead server worker server-dead not released (free a quiet limit later):"
    )
