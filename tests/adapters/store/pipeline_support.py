"""Builders for the pipeline suites: runs with real run ids (their schedule time inside), refs, ends."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime, timedelta
from typing import Any

from jobmesh.adapters.store.sql import SqlStore
from jobmesh.core.attempts import AttemptEnd, AttemptRef
from jobmesh.core.ids import new_run_id
from jobmesh.core.ports.pipeline_store import ClaimStatus, Heartbeat, ProgressReport
from jobmesh.core.records import RunRecord, RunState
from tests.adapters.store.builders import at, log, new_job, run

TIMEOUT = timedelta(seconds=42)


def add_job(store: SqlStore, job_id: str = "alpha", **overrides: Any) -> str:
    store.create_jobs([new_job(job_id, **overrides)])
    return job_id


def add_run(store: SqlStore, seconds: float = 60, *, job_id: str = "alpha", **overrides: Any) -> RunRecord:
    """A run scheduled `seconds` after the suite's base time, with an id made by new_run_id (so lookups
    prune to one partition), stored through create_run."""
    moment = overrides.pop("schedule_time", at(seconds))
    overrides.setdefault("due_time", moment)
    overrides.setdefault("heartbeat_timeout", TIMEOUT)
    record = run(job_id, overrides.pop("run_id", new_run_id(moment)), schedule_time=moment, **overrides)
    store.create_run(record)
    return record


def ref(record: RunRecord, attempt: int | None = None) -> AttemptRef:
    return AttemptRef(record.job_id, record.run_id, record.attempt if attempt is None else attempt)


def end(
    target: AttemptRef,
    state: RunState = RunState.SUCCEEDED,
    *,
    run_state: RunState | None = None,
    end_time: datetime | None = None,
    **overrides: Any,
) -> AttemptEnd:
    return AttemptEnd(
        ref=target,
        attempt_state=state,
        run_state=run_state or state,
        end_time=end_time or at(500),
        **overrides,
    )


def finish(store: SqlStore, ends: Sequence[AttemptEnd]) -> list[AttemptRef]:
    """The store ends these attempts as decided here ahead (the first end given for a ref counts); the refs
    it applied."""
    decided: dict[AttemptRef, AttemptEnd] = {}
    for item in ends:
        decided.setdefault(item.ref, item)
    written = store.finish_attempts(list(decided), lambda current: decided[AttemptRef.of(current.run)])
    return [written_end.ref for _, written_end in written]


def pipeline_round(store: SqlStore, prefix: str, size: int) -> None:
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
