"""What a namespace holds, for its quotas (server/admission/quotas.py): its jobs, and those of them on a cron
schedule. One count over the namespace's jobs (`ix_jobs_namespace_create_time` leads with the namespace); the
server asks at most every few seconds per namespace."""

from __future__ import annotations

from sqlalchemy import Connection, case, func, select

from jobmesh.adapters.store.schema import jobs
from jobmesh.core.ports.store import NamespaceUsage
from jobmesh.core.records import JobState, ScheduleKind

_LIVE_CRON = (jobs.c.schedule_kind == ScheduleKind.CRON.value) & jobs.c.state.in_(
    [JobState.ACTIVE.value, JobState.PAUSED.value]
)
_USAGE = select(func.count(), func.coalesce(func.sum(case((_LIVE_CRON, 1), else_=0)), 0)).where(
    jobs.c.state != JobState.DELETED.value
)


def namespace_usage(connection: Connection, namespace: str) -> NamespaceUsage:
    row = connection.execute(_USAGE.where(jobs.c.namespace == namespace)).one()
    return NamespaceUsage(jobs=int(row[0]), cron_jobs=int(row[1]))
