"""The hot path builds no SQL statement per call: once each statement's shape has been met, a burst of
creates, hand-offs, claims, heartbeats, progress reports, log lines and results builds nothing more.

Building is counted where SQLAlchemy does it: every element a statement is built from passes through
`sqlalchemy.sql.coercions.expect`, and executing a statement built earlier does not."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import pytest
from sqlalchemy.sql import coercions

from jobmesh.adapters.store.sql import SqlStore
from tests.adapters.store.pipeline_support import pipeline_round

BATCH_SIZES = (1, 3, 8)  # one job a call, and small batches (on SQLite: chunks of 1, 2 and 8 rows)


@contextmanager
def counting_builds() -> Iterator[list[int]]:
    count = [0]
    original = coercions.expect

    def expect(*args: object, **kwargs: object) -> object:
        count[0] += 1
        return original(*args, **kwargs)  # type: ignore[call-overload]

    coercions.expect = expect  # type: ignore[assignment]
    try:
        yield count
    finally:
        coercions.expect = original


@pytest.mark.parametrize("size", BATCH_SIZES)
def test_a_burst_on_the_hot_path_builds_no_statement(store: SqlStore, size: int) -> None:
    pipeline_round(store, "warm", size)  # the first of each shape is built
    with counting_builds() as built:
        for burst in range(5):
            pipeline_round(store, f"burst{burst}", size)
    assert built[0] == 0


def test_the_count_sees_a_statement_built_per_call(store: SqlStore) -> None:
    """The counter itself: a read that builds its statement on every call is seen."""
    pipeline_round(store, "warm", 1)
    with counting_builds() as built:
        store.get_job("warm-0")
    assert built[0] > 0
