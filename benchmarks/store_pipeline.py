"""Store pipeline throughput: claim, heartbeat and finish_attempts of N runs in batches, against PostgreSQL.

    JOBMESH_DATABASE_URL=postgresql+psycopg://... .venv/bin/python -m benchmarks.store_pipeline \
        [--runs 20000] [--batch 500] [--threads 1] [--heartbeats 2]

Works in a schema of its own (dropped at the end): migrates it, makes the run partitions, materialises N runs
of 40 cron jobs (each with a real run id, so lookups prune to one partition), marks them QUEUED, then times
each pipeline step batch by batch, as the executors' streams and the watcher would call it: claim, a few
rounds of heartbeats, and the ends (one in ten a failure that is retried, the rest successes). Each step's
rows, seconds, this process's CPU seconds and batches go to a results file (`benchmarks/results_file.py`).
"""

from __future__ import annotations

import argparse
import os
import sys
import time
import uuid
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from typing import Any, TypeVar

from sqlalchemy import create_engine, text
from sqlalchemy.engine import make_url

from benchmarks import results_file
from jobmesh.adapters.store.migrate import upgrade
from jobmesh.adapters.store.sql import SqlStore
from jobmesh.core.attempts import AttemptEnd, AttemptRef
from jobmesh.core.ids import new_run_id
from jobmesh.core.ports.pipeline_store import ClaimStatus, Heartbeat
from jobmesh.core.ports.store import NewJob
from jobmesh.core.records import (
    JobRecord,
    JobState,
    Priority,
    RunRecord,
    RunState,
    RunTrigger,
    ScheduleKind,
)

T = TypeVar("T")
JOBS = 40


def batches(items: Sequence[T], size: int) -> list[Sequence[T]]:
    return [items[start : start + size] for start in range(0, len(items), size)]


Steps = dict[str, dict[str, Any]]  # step -> rows, seconds, cpu_seconds, batches, applied


def timed(
    name: str, work: Callable[[Sequence[T]], int], parts: list[Sequence[T]], threads: int, steps: Steps
) -> None:
    started, started_cpu = time.perf_counter(), time.process_time()
    if threads == 1:
        done = sum(work(part) for part in parts)
    else:
        with ThreadPoolExecutor(max_workers=threads) as pool:
            done = sum(pool.map(work, parts))
    seconds, cpu_seconds = time.perf_counter() - started, time.process_time() - started_cpu
    rows = sum(len(part) for part in parts)
    print(
        f"{name:<16} {rows:>7} rows {seconds:7.2f} s {rows / seconds:>9,.0f} rows/s"
        f"  ({seconds / len(parts) * 1000:5.1f} ms/batch, client CPU {cpu_seconds / len(parts) * 1000:5.2f}"
        f" ms/batch, {done} applied)"
    )
    steps[name] = {
        "rows": rows,
        "seconds": seconds,
        "cpu_seconds": cpu_seconds,  # this process's: the store's client side (PostgreSQL's is not in it)
        "batches": len(parts),
        "applied": done,
    }


def make_runs(store: SqlStore, now: datetime, count: int) -> list[RunRecord]:
    first = now - timedelta(minutes=30)
    jobs = [
        JobRecord(
            job_id=f"bench-{i:03d}",
            spec=b"\x0a\x00bench",
            display_name=f"bench {i}",
            labels={},
            schedule_kind=ScheduleKind.CRON,
            priority=Priority.NORMAL,
            queue="default",
            state=JobState.ACTIVE,
            next_run_time=first,
            create_time=now,
            update_time=now,
        )
        for i in range(JOBS)
    ]
    store.create_jobs([NewJob(job) for job in jobs])
    runs: list[RunRecord] = []
    for index, job in enumerate(jobs):
        mine = range(index, count, JOBS)
        times = [first + timedelta(milliseconds=7 * i) for i in mine]  # distinct ms: distinct windows
        occurrences = [
            RunRecord(
                job_id=job.job_id,
                run_id=new_run_id(moment),
                schedule_time=moment,
                due_time=moment,
                state=RunState.SCHEDULED,
                trigger=RunTrigger.SCHEDULE,
                priority=Priority.NORMAL,
                queue="default",
                create_time=now,
                update_time=now,
            )
            for moment in times
        ]
        made = store.materialize(
            job.job_id, expected_next_run_time=first, runs=occurrences, next_run_time=now, completed=False
        )
        runs += made
    return sorted(runs, key=lambda run: run.schedule_time)


def main(argv: Sequence[str] | None = None) -> int:
    recording = results_file.start("benchmarks.store_pipeline", argv)
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--runs", type=int, default=20_000)
    parser.add_argument("--batch", type=int, default=500)
    parser.add_argument("--threads", type=int, default=1, help="batches run on this many threads at once")
    parser.add_argument("--heartbeats", type=int, default=2, help="heartbeat rounds per attempt")
    results_file.add_option(parser)
    args = parser.parse_args(argv)
    base = os.environ.get("JOBMESH_DATABASE_URL", "")
    if not base.startswith("postgresql"):
        print("set JOBMESH_DATABASE_URL to a PostgreSQL URL", file=sys.stderr)
        return 2
    schema = f"jm_bench_{uuid.uuid4().hex[:10]}"
    admin = create_engine(base)
    with admin.begin() as connection:
        connection.execute(text(f"CREATE SCHEMA {schema}"))
    url = make_url(base).update_query_dict({"options": f"-csearch_path={schema}"})
    steps: Steps = {}
    try:
        run_benchmark(url.render_as_string(hide_password=False), args, steps)
        recording.save({"steps": steps}, args.json)
    finally:
        with admin.begin() as connection:
            connection.execute(text(f"DROP SCHEMA {schema} CASCADE"))
        admin.dispose()
    return 0


def run_benchmark(url: str, args: argparse.Namespace, steps: Steps) -> None:
    upgrade(url)
    now = datetime.now(UTC)
    with SqlStore(url) as store:
        store.maintain_partitions(now - timedelta(days=1))
        started = time.perf_counter()
        runs = make_runs(store, now, args.runs)
        print(f"setup: {len(runs)} runs of {JOBS} jobs materialised in {time.perf_counter() - started:.2f} s")
        refs = [AttemptRef(run.job_id, run.run_id, 1) for run in runs]
        parts = batches(refs, args.batch)
        executor = "bench-executor"
        timed("mark_queued", lambda part: len(store.mark_queued(part, now)), parts, args.threads, steps)

        def claim(part: Sequence[AttemptRef]) -> int:
            claims = store.claim(part, executor, now)
            return sum(c.status is ClaimStatus.GRANTED for c in claims)

        timed("claim", claim, parts, args.threads, steps)
        for round_ in range(1, args.heartbeats + 1):
            beat_time = now + timedelta(seconds=5 * round_)
            deadline = beat_time + timedelta(seconds=15)

            def beat(part: Sequence[AttemptRef], at: datetime = beat_time, until: datetime = deadline) -> int:
                fenced = store.heartbeat(executor, [Heartbeat(ref, until) for ref in part], at)
                return len(part) - len(fenced)

            timed(f"heartbeat #{round_}", beat, parts, args.threads, steps)
        ended = now + timedelta(seconds=30)

        def finish(part: Sequence[AttemptRef]) -> int:
            ends = [
                AttemptEnd(ref, RunState.SUCCEEDED, RunState.SUCCEEDED, ended, exit_code=0, executor=executor)
                for ref in part
            ]
            for i in range(0, len(ends), 10):  # one in ten failed: retried a minute later
                ends[i] = replace(
                    ends[i],
                    attempt_state=RunState.FAILED,
                    run_state=RunState.SCHEDULED,
                    exit_code=1,
                    error_type="Exit",
                    error_message="exit status 1",
                    retry_due_time=ended + timedelta(minutes=1),
                )
            decided = {end.ref: end for end in ends}
            return len(store.finish_attempts(part, lambda current: decided[AttemptRef.of(current.run)]))

        timed("finish_attempts", finish, parts, args.threads, steps)


if __name__ == "__main__":
    sys.exit(main())
