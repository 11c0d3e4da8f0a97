"""Making cron occurrences into runs ahead of time, for the window the watcher holds in memory."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Collection
from datetime import datetime

from jobmesh.core.attempts import Dispatchable
from jobmesh.core.definitions import decode_spec, heartbeat_timeout_of, new_run
from jobmesh.core.hooks import NO_HOOKS, RunHooks
from jobmesh.core.metrics import CRON_SKIPPED
from jobmesh.core.occurrences import plan_occurrences
from jobmesh.core.ports.pipeline_store import SchedulerStore
from jobmesh.core.records import JobRecord, RunTrigger

log = logging.getLogger(__name__)
CRON_JOBS_PER_PASS = 500


class Materializer:
    def __init__(
        self, store: SchedulerStore, clock: Callable[[], datetime], hooks: RunHooks = NO_HOOKS
    ) -> None:
        self._store = store
        self._clock = clock
        self._hooks = hooks

    def materialize(self, until: datetime, shards: Collection[int]) -> list[Dispatchable]:
        """Runs for every occurrence of the shards' active cron jobs due up to `until`; returns the runs
        made."""
        start_ns = time.time_ns()
        made: list[Dispatchable] = []
        for job in self._store.cron_jobs_due(until, limit=CRON_JOBS_PER_PASS, shards=shards):
            made.extend(self._materialize_job(job, until))
        if made:
            self._hooks.create("jobmesh.watcher/materialize", start_ns, [item.run for item in made])
        return made

    def _materialize_job(self, job: JobRecord, until: datetime) -> list[Dispatchable]:
        if job.next_run_time is None:
            return []
        spec = decode_spec(job.spec)
        now = self._clock()
        plan = plan_occurrences(job.job_id, spec.schedule.cron, job.next_run_time, until, now)
        if plan.skipped_since is not None:
            CRON_SKIPPED("catchup").inc(plan.skipped)
            log.warning(
                "jobs/%s: occurrences since %s missed the catch-up window", job.job_id, plan.skipped_since
            )
        timeout = heartbeat_timeout_of(spec)
        runs = [
            new_run(job, time, now, RunTrigger.SCHEDULE, heartbeat_timeout=timeout)
            for time in plan.schedule_times
        ]
        made = self._store.materialize(
            job.job_id,
            expected_next_run_time=job.next_run_time,
            runs=runs,
            next_run_time=plan.next_run_time,
            completed=plan.next_run_time is None,
        )
        return [Dispatchable(run, spec) for run in made]
