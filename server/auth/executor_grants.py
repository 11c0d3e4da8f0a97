"""What an executor's credential lets it claim: runs of the queues, and of the namespaces, its grant names."""

from __future__ import annotations

from jobmesh.core.records import RunRecord
from jobmesh.server.principals import ANY_NAMESPACE, ExecutorGrant

__all__ = ["may_claim", "restricts_claims"]


def may_claim(grant: ExecutorGrant, run: RunRecord) -> bool:
    return grant.serves_queue(run.queue) and grant.serves_namespace(run.namespace)


def restricts_claims(grant: ExecutorGrant) -> bool:
    """False for a grant of every queue and namespace: its claims need no look at the runs first."""
    return ANY_NAMESPACE not in grant.queues or ANY_NAMESPACE not in grant.namespaces
