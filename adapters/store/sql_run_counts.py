"""The count of runs per namespace, queue and state (`run_counts`, kept by the triggers of migration 0013).

One statement reads the counter rows and the upcoming runs (`SCHEDULED` for a later `schedule_time`, from
`open_runs`'s `(state, wake_time)` index, each run's namespace and queue by its primary key), so both come
from one snapshot. The upcoming runs are as many as the watcher makes ahead (minutes of schedules), not the
history: the read costs the rows of the counter and of what is upcoming, never a count of `job_runs`.

On PostgreSQL the triggers append each write's net change; `fold` replaces the rows by their sums once they
pass `FOLD_ROWS`. DELETE .. RETURNING sees the rows committed when it starts and the INSERT writes their sums
in the same statement: a writer's rows committed meanwhile stay for the next fold, and a concurrent fold
waits on the rows the first deleted and then skips them.
"""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import Connection, text

from jobmesh.core.records import RunState
from jobmesh.core.run_counts import RunCounts, run_counts

# The counter rows past which a read folds them (PostgreSQL; SQLite keeps one row per key).
FOLD_ROWS = 1000
_UPCOMING = "UPCOMING"  # the statement's mark of upcoming rows, never a state

_READ = text(
    f"""
    SELECT namespace, queue, state, sum(runs), count(*) FROM run_counts GROUP BY namespace, queue, state
    UNION ALL
    SELECT r.namespace, r.queue, '{_UPCOMING}', count(*), 0
    FROM open_runs AS o JOIN job_runs AS r
        ON r.job_id = o.job_id AND r.run_id = o.run_id AND r.schedule_time = o.schedule_time
    WHERE o.state = '{RunState.SCHEDULED.value}' AND o.schedule_time > :now
    GROUP BY r.namespace, r.queue
    """
)
_FOLD = text(
    """
    WITH folded AS (DELETE FROM run_counts RETURNING namespace, queue, state, runs)
    INSERT INTO run_counts (namespace, queue, state, runs)
    SELECT namespace, queue, state, sum(runs) FROM folded
    GROUP BY namespace, queue, state HAVING sum(runs) <> 0
    """
)


def read(connection: Connection, now: datetime) -> tuple[RunCounts, int]:
    """The counts at `now`, and how many counter rows hold them."""
    rows: list[tuple[str, str, str, int]] = []
    upcoming: list[tuple[str, str, int]] = []
    stored = 0
    for namespace, queue, state, runs, row_count in connection.execute(_READ, {"now": now}):
        if state == _UPCOMING:
            upcoming.append((namespace, queue, int(runs)))
        else:
            rows.append((namespace, queue, state, int(runs)))
            stored += int(row_count)
    return run_counts(rows, upcoming, now), stored


def fold(connection: Connection) -> None:
    """Replaces the counter rows by one row of their sum per key (PostgreSQL)."""
    connection.execute(_FOLD)


def uncount_partition(connection: Connection, partition: str) -> None:
    """Takes the runs of a run partition about to be dropped off the counts (a DROP fires no trigger)."""
    connection.execute(
        text(
            "INSERT INTO run_counts (namespace, queue, state, runs) "
            f"SELECT namespace, queue, state, -count(*) FROM {partition} GROUP BY namespace, queue, state"
        )
    )
