"""Quotas per namespace: how many jobs and cron jobs it may hold, how often its cron jobs may fire, and how
many runs per minute the API may start in it. A request past one is refused `RESOURCE_EXHAUSTED` (reason
`QUOTA_EXCEEDED`) with a `google.rpc.QuotaFailure` naming the namespace and the quota; nothing of it is
written. (The log an attempt may leave is capped where the logs arrive: server/admission/log_limits.py.) Every
namespace has the server's default limits but those an operator set for it (`QuotaLimits`).

Counting every create at the store would cost a query per call: a namespace's usage is read at most every
USAGE_TTL seconds and counted up here meanwhile, so replicas together may pass a quota by what they admit
within that time. The runs-per-minute budget is per server process, and counts the runs the API makes
(immediate creates, RunJobNow, ReplayRun, BulkReplayRuns): the runs cron jobs make are bounded by the cron
quotas.
"""

from __future__ import annotations

import itertools
import threading
import time
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, fields
from datetime import UTC, datetime, timedelta
from typing import Any

from jobmesh.core.errors import QuotaExceeded
from jobmesh.core.names import DEFAULT_NAMESPACE
from jobmesh.core.ports.store import NamespaceUsage, Store
from jobmesh.core.schedules import CronError, next_occurrence, parse_cron
from jobmesh.v1 import job_pb2

__all__ = ["QUOTA_NAMES", "NamespaceQuotas", "QuotaLimits", "Quotas"]

USAGE_TTL = 2.0  # seconds a namespace's counted usage is trusted before it is read again
CRON_SAMPLES = 32  # occurrences looked at for a cron's shortest interval
CRON_RESOLUTION = timedelta(seconds=1)


@dataclass(frozen=True, slots=True)
class Quotas:
    """One namespace's limits; 0 (or a zero interval): no quota."""

    jobs: int = 0
    cron_jobs: int = 0
    min_cron_interval: timedelta = timedelta(0)
    runs_per_minute: int = 0
    attempt_log_bytes: int = 0  # applied by server/admission/log_limits.py

    def overridden(self, limits: Mapping[str, int | timedelta]) -> Quotas:
        """These limits, but those named in `limits` (QUOTA_NAMES)."""
        values: dict[str, Any] = {name: limits.get(name, getattr(self, name)) for name in QUOTA_NAMES}
        return Quotas(**values)


QUOTA_NAMES = tuple(quota.name for quota in fields(Quotas))  # as refusals and --namespace-quotas name them


@dataclass(frozen=True, slots=True)
class QuotaLimits:
    """The defaults, and the namespaces whose limits an operator set (a plain dict: server workers get it
    pickled)."""

    defaults: Quotas = field(default_factory=Quotas)
    namespaces: Mapping[str, Quotas] = field(default_factory=dict)

    def of(self, namespace: str) -> Quotas:
        return self.namespaces.get(namespace, self.defaults)

    def anywhere(self, applies: Callable[[Quotas], bool]) -> bool:
        """Whether a quota applies in some namespace."""
        return applies(self.defaults) or any(map(applies, self.namespaces.values()))


class NamespaceQuotas:
    """Admits creates, schedule changes and runs against their namespace's quotas (thread-safe: the server's
    workers call it)."""

    def __init__(
        self, limits: QuotaLimits, store: Store, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self._limits = limits
        self._limits_runs = limits.anywhere(lambda quotas: quotas.runs_per_minute > 0)
        self._store = store
        self._clock = clock
        self._lock = threading.Lock()
        self._usage: dict[str, tuple[float, NamespaceUsage]] = {}
        self._runs: dict[str, tuple[float, float]] = {}  # namespace → (tokens, when counted)

    @property
    def limits_runs(self) -> bool:
        return self._limits_runs

    def counts_held(self, jobs: Sequence[job_pb2.Job]) -> bool:
        """Whether admitting `jobs` needs what their namespaces hold (a store read, now and then): only under
        a jobs quota, or a cron-jobs quota for cron jobs."""
        return any(self._counts(job) for job in jobs)

    def _counts(self, job: job_pb2.Job) -> bool:
        quotas = self._limits.of(namespace_of(job))
        return bool(quotas.jobs) or (bool(quotas.cron_jobs) and _is_cron(job))

    def admits_at_once(self, jobs: Sequence[job_pb2.Job]) -> bool:
        """Whether admitting `jobs` neither reads the store nor takes the lock that a store read holds: the
        create path then admits them on its event loop, without a thread."""
        return not self.counts_held(jobs) and not self.limits_runs

    def admit_jobs(self, jobs: Sequence[job_pb2.Job]) -> None:
        """New jobs: counted as held once admitted; QuotaExceeded names every quota they would pass."""
        violations: list[tuple[str, str]] = []
        for job in jobs:
            violations += self._cron_interval(job)
        if self.admits_at_once(jobs):  # the common case, on the create path: no count is read or taken
            if violations:
                raise _refusal(violations)
            return
        namespaces = Counter(namespace_of(job) for job in jobs)
        crons = Counter(namespace_of(job) for job in jobs if _is_cron(job))
        immediate = Counter(
            namespace_of(job) for job in jobs if job.schedule.WhichOneof("kind") == "immediate"
        )
        counting = self.counts_held(jobs)
        with self._lock:
            if counting:
                held = {namespace: self._held(namespace) for namespace in namespaces}
                for namespace, count in namespaces.items():
                    quotas = self._limits.of(namespace)
                    jobs_held = held[namespace].jobs + count
                    violations += self._over("jobs", namespace, jobs_held, quotas.jobs)
                    cron = held[namespace].cron_jobs + crons[namespace]
                    violations += self._over("cron_jobs", namespace, cron, quotas.cron_jobs)
            violations += self._take_runs(immediate, dry_run=True)
            if violations:
                raise _refusal(violations)
            self._take_runs(immediate, dry_run=False)
            if counting:  # uncounted jobs change no count a quota reads; the store's next count has them
                self._count_in(namespaces, crons)

    def _count_in(self, namespaces: Counter[str], crons: Counter[str]) -> None:
        for namespace, count in namespaces.items():
            fetched, usage = self._usage[namespace]
            self._usage[namespace] = (
                fetched,
                NamespaceUsage(usage.jobs + count, usage.cron_jobs + crons[namespace]),
            )

    def admit_schedule(self, job: job_pb2.Job, was_cron: bool) -> None:
        """A job's new schedule: a cron's interval, and one more cron job when it was not one."""
        violations = self._cron_interval(job)
        namespace = namespace_of(job)
        becomes_cron = job.schedule.WhichOneof("kind") == "cron" and not was_cron
        with self._lock:
            if becomes_cron:
                cron = self._held(namespace).cron_jobs + 1
                violations += self._over("cron_jobs", namespace, cron, self._limits.of(namespace).cron_jobs)
            if violations:
                raise _refusal(violations)
            if becomes_cron:
                fetched, usage = self._usage[namespace]
                self._usage[namespace] = (fetched, NamespaceUsage(usage.jobs, usage.cron_jobs + 1))

    def admit_run(self, namespace: str) -> None:
        """One run the API makes now (RunJobNow, ReplayRun)."""
        self.admit_runs({namespace: 1})

    def admit_runs(self, counts: Mapping[str, int]) -> None:
        """Runs the API makes now, by namespace (BulkReplayRuns): all of them are admitted, or none."""
        wanted = Counter(counts)
        with self._lock:
            if violations := self._take_runs(wanted, dry_run=True):
                raise _refusal(violations)
            self._take_runs(wanted, dry_run=False)

    def _held(self, namespace: str) -> NamespaceUsage:
        fetched = self._usage.get(namespace)
        now = self._clock()
        if fetched is None or now - fetched[0] > USAGE_TTL:
            fetched = (now, self._store.namespace_usage(namespace))
            self._usage[namespace] = fetched
        return fetched[1]

    def _take_runs(self, wanted: Counter[str], *, dry_run: bool) -> list[tuple[str, str]]:
        """A token bucket per namespace: runs_per_minute at once, refilled at that rate."""
        violations, now = [], self._clock()
        for namespace, count in wanted.items():
            limit = self._limits.of(namespace).runs_per_minute
            if not limit:
                continue
            tokens, then = self._runs.get(namespace, (float(limit), now))
            tokens = min(float(limit), tokens + (now - then) * limit / 60.0)
            if count > tokens:
                violations.append(
                    (
                        f"namespace:{namespace}",
                        f"runs_per_minute: {limit} runs a minute; {count} more now would pass it",
                    )
                )
            elif not dry_run:
                self._runs[namespace] = (tokens - count, now)
        return violations

    @staticmethod
    def _over(quota: str, namespace: str, count: int, limit: int) -> list[tuple[str, str]]:
        if not limit or count <= limit:
            return []
        return [
            (f"namespace:{namespace}", f"{quota}: the namespace may hold {limit}; this would make {count}")
        ]

    def _cron_interval(self, job: job_pb2.Job) -> list[tuple[str, str]]:
        shortest = self._limits.of(namespace_of(job)).min_cron_interval
        if job.schedule.WhichOneof("kind") != "cron" or shortest <= CRON_RESOLUTION:
            return []  # no cron fires more often than once a second
        interval = shortest_interval(job.schedule.cron)
        if interval is None or interval >= shortest:
            return []
        return [
            (
                f"namespace:{namespace_of(job)}",
                f"min_cron_interval: its cron jobs may fire every {shortest.total_seconds():g} s at the most;"
                f" {job.schedule.cron.expression!r} fires {interval.total_seconds():g} s apart",
            )
        ]


def _is_cron(job: job_pb2.Job) -> bool:
    return job.schedule.WhichOneof("kind") == "cron"


def namespace_of(job: job_pb2.Job) -> str:
    return job.namespace or DEFAULT_NAMESPACE


def shortest_interval(cron: job_pb2.Schedule.Cron) -> timedelta | None:
    """The shortest time between two of the next CRON_SAMPLES occurrences (None: it does not parse, which
    validation reports)."""
    try:
        spec = parse_cron(cron.expression, cron.time_zone or "UTC")
    except (CronError, ValueError):
        return None
    times = [datetime.now(UTC)]
    try:
        for _ in range(CRON_SAMPLES):
            times.append(next_occurrence(spec, times[-1]))
    except (CronError, ValueError):  # it stops firing: what it has shown decides
        if len(times) < 3:
            return None
    return min(later - earlier for earlier, later in itertools.pairwise(times[1:]))


def _refusal(violations: list[tuple[str, str]]) -> QuotaExceeded:
    quota = violations[0][1].split(":", 1)[0]
    return QuotaExceeded(f"the namespace's quota is reached: {violations[0][1]}", violations, quota=quota)
