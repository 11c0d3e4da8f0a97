"""What an executor's credential lets it claim: runs of the queues, and of the namespaces, its grant names."""

from __future__ import annotations

from jobmesh.core.records import RunRecord
from jobmesh.server.principals import ANY_NAMESPACE, ExecutorGrant

__all__ = ["may_claim", "may_claim_namespace", "restricts_claims", "run_namespace"]


def run_namespace(run: RunRecord) -> str | None:
    """The namespace a run belongs to; None while runs carry none (every namespace's check then passes)."""
    return None


def may_claim_namespace(grant: ExecutorGrant, namespace: str | None) -> bool:
    """Whether the grant covers runs of `namespace` (a run of no namespace: yes)."""
    return namespace is None or grant.serves_namespace(namespace)


def may_claim(grant: ExecutorGrant, run: RunRecord) -> bool:
    return grant.serves_queue(run.queue) and may_claim_namespace(grant, run_namespace(run))


def restricts_claims(grant: ExecutorGrant) -> bool:
    """False for a grant of every queue and namespace: its claims need no look at the runs first."""
    return ANY_NAMESPACE not in grant.queues or ANY_NAMESPACE not in grant.namespaces
