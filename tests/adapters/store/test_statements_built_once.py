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
from jobmesh.core.attempts import AttemptRef
from jobmesh.core.ids import new_run_id
from jobmesh.core.ports.pipeline_store import ClaimStatus, Heartbeat, ProgressReport
from jobmesh.core.records import RunState
from tests.adapters.store.builders import at, log, new_job
from tests.adapters.store.pipeline_support import TIMEOUT, end, finish

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


def one_round(store: SqlStore, prefix: str, size: int) -> None:
    """What the pipeline does with `size` jobs: created with their first runs, handed to the queue, claimed,
    beating, reporting progress and output, then ended, one run retried and the others done."""
    outcomes = store.create_jobs(
        [new_job(f"{prefix}-{n}", first_run=new_run_id(at(60))) for n in range(size)]
    )
    refs = [AttemptRef.of(outcome.first_run) for outcome in outcomes if outcome.first_run is not None]
    assert len(refs) == size
    assert store.mark_queued(refs, at(61)) == refs
    claims = store.claim(refs, "ex1", at(62))
    assert [claim.status for claim in claims] == [ClaimStatus.GRANTED] * size
    assert set(store.attempts(refs)) == set(refs)  # what a heartbeat is checked against
    assert store.heartbeat("ex1", [Heartbeat(ref, at(63) + TIMEOUT) for ref in refs], at(63)) == []
    store.report_progress([ProgressReport(ref, "ex1", 0.5, "half") for ref in refs], at(64))
    store.append_attempt_logs([log(ref.job_id, ref.run_id, 0, "line", attempt=1) for ref in refs])
    retry = end(refs[0], RunState.FAILED, run_state=RunState.SCHEDULED, retry_due_time=at(70), executor="ex1")
    done = [end(ref, executor="ex1") for ref in refs[1:]]
    assert finish(store, [retry, *done]) == refs


@pytest.mark.parametrize("size", BATCH_SIZES)
def test_a_burst_on_the_hot_path_builds_no_statement(store: SqlStore, size: int) -> None:
    one_round(store, "warm", size)  # the first of each shape is built
    with counting_builds() as built:
        for burst in range(5):
            one_round(store, f"burst{burst}", size)
    assert built[0] == 0


def test_the_count_sees_a_statement_built_per_call(store: SqlStore) -> None:
    """The counter itself: a read that builds its statement on every call is seen."""
    one_round(store, "warm", 1)
    with counting_builds() as built:
        store.get_job("warm-0")
    assert built[0] > 0
