"""Flow control at claim: what `core.flow_control` decides, read and written in the claim's transaction.

A key counts within its namespace; a queue across all of them. A claim of runs with a concurrency key, or of
a paced queue or one with a concurrency limit, locks the gate of each key and queue involved (`flow_gates`,
one row each, in name order, so two claims never deadlock on them; SQLite has one writer at a time), counts
each key's running runs (its jobs by `ix_jobs_concurrency_key`, their open runs by primary key), each
limited queue's (its open runs by `ix_open_runs_queue_state`) and each paced queue's earliest next start,
and keeps the paced queues' new next starts. The counts are read under the gates' locks, so no two claims
admit past a limit together. A claim of other runs reads and writes nothing more than before.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from datetime import datetime

from sqlalchemy import Connection, func, select, tuple_, update

from jobmesh.adapters.store.schema import flow_gates, jobs, open_runs
from jobmesh.adapters.store.sql_batch import HELD
from jobmesh.adapters.store.sql_jobs import upsert_ignoring_conflicts
from jobmesh.adapters.store.sql_rows import StoredRow, concurrency_of_row
from jobmesh.core.flow_control import (
    NO_QUEUE_LIMITS,
    Concurrency,
    FlowCandidate,
    FlowDecision,
    Pacing,
    decide_flow,
)

__all__ = ["hold_back"]


def _scoped(row: StoredRow) -> Concurrency | None:
    """The run's job's concurrency, its key scoped to the run's namespace (`namespace/key`: a namespace has
    no `/`), so that no namespace takes another's runs' room."""
    concurrency = concurrency_of_row(row)
    if concurrency is None:
        return None
    return Concurrency(f"{row['namespace']}/{concurrency.key}", concurrency.limit)


def _key_gate(key: str) -> str:
    return f"key:{key}"


def _queue_gate(queue: str) -> str:
    return f"queue:{queue}"


def _queue_held_gate(queue: str) -> str:
    return f"queue-held:{queue}"


def hold_back(
    connection: Connection,
    rows: Sequence[StoredRow],
    now: datetime,
    rates: Mapping[str, Pacing],
    *,
    queue_limits: Mapping[str, int] = NO_QUEUE_LIMITS,
    clock: Callable[[], datetime] | None = None,
) -> dict[tuple[str, str], FlowDecision]:
    """The flow-control decision of each run about to be granted (`rows`, locked by the claim with their
    jobs' concurrency columns, in the batch's order) that has a concurrency key, or a paced queue or one
    with a concurrency limit (`queue_limits`); other runs are absent (granted as before). Decided as of
    `clock` read once the running runs are counted (else `now`): the caller's `now` may precede the end of a
    run that this claim's count already saw."""
    controlled = [
        FlowCandidate((row["job_id"], row["run_id"]), row["due_time"], row["queue"], _scoped(row))
        for row in rows
        if row["concurrency_key"] is not None or row["queue"] in rates or row["queue"] in queue_limits
    ]
    if not controlled:
        return {}
    keys = sorted({c.concurrency.key for c in controlled if c.concurrency is not None})
    queues = sorted({c.queue for c in controlled if c.queue in rates})
    limited = sorted({c.queue for c in controlled if c.queue in queue_limits})
    next_starts = _lock_gates(
        connection, [*map(_key_gate, keys), *map(_queue_gate, queues), *map(_queue_held_gate, limited)]
    )
    running = _running(connection, keys)
    queues_running = _queues_running(connection, limited)
    if clock is not None:
        now = max(now, clock())
    decisions, changed = decide_flow(
        controlled,
        now,
        running=running,
        next_starts={queue: next_starts.get(_queue_gate(queue)) for queue in queues},
        rates=rates,
        queue_limits=queue_limits,
        queues_running=queues_running,
    )
    for queue, next_start in sorted(changed.items()):
        connection.execute(
            update(flow_gates)
            .where(flow_gates.c.name == _queue_gate(queue))
            .values(next_start_time=next_start)
        )
    return decisions


def _lock_gates(connection: Connection, names: Sequence[str]) -> dict[str, datetime | None]:
    """Locks the gates (made when missing), in name order; each one's next start."""
    ordered = sorted(set(names))
    connection.execute(upsert_ignoring_conflicts(connection, flow_gates), [{"name": n} for n in ordered])
    statement = (
        select(flow_gates.c.name, flow_gates.c.next_start_time)
        .where(flow_gates.c.name.in_(ordered))
        .order_by(flow_gates.c.name)
        .with_for_update()
    )
    return {name: next_start for name, next_start in connection.execute(statement)}


def _running(connection: Connection, keys: Sequence[str]) -> dict[str, int]:
    """How many runs of each scoped key (`namespace/key`) are running (or stopping) now."""
    if not keys:
        return {}
    pairs = [tuple(key.split("/", 1)) for key in keys]
    statement = (
        select(jobs.c.namespace, jobs.c.concurrency_key, func.count())
        .select_from(jobs.join(open_runs, open_runs.c.job_id == jobs.c.job_id))
        .where(
            jobs.c.concurrency_key.in_(sorted({key for _, key in pairs})),
            tuple_(jobs.c.namespace, jobs.c.concurrency_key).in_(pairs),
            open_runs.c.state.in_(HELD),
        )
        .group_by(jobs.c.namespace, jobs.c.concurrency_key)
    )
    return {f"{namespace}/{key}": count for namespace, key, count in connection.execute(statement)}


def _queues_running(connection: Connection, queues: Sequence[str]) -> dict[str, int]:
    """How many runs of each queue are running (or stopping) now, in every namespace."""
    if not queues:
        return {}
    statement = (
        select(open_runs.c.queue, func.count())
        .where(open_runs.c.queue.in_(queues), open_runs.c.state.in_(HELD))
        .group_by(open_runs.c.queue)
    )
    return {queue: count for queue, count in connection.execute(statement)}
