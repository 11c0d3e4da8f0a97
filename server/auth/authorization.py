"""Who may call what: the role each RPC of `JobService` and `SearchService` needs (`RPC_ROLES`, the one
table), and `Access`, the one place that checks it against the caller's roles in a resource's namespace.

AIP-211: a caller who holds no role in a resource's namespace is told the resource is not there
(`NOT_FOUND`), one who holds a lower role is refused (`PERMISSION_DENIED`). A create names a namespace the
caller chose, so it is refused without OPERATOR there. Lists and feeds are scoped to the namespaces where the
caller is a VIEWER. A caller with no role in any namespace (an executor's credential) is refused every call.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from types import MappingProxyType

from jobmesh.core.audit import AuditAction, AuditEvent
from jobmesh.core.errors import NotFound, PermissionDenied
from jobmesh.core.ids import new_run_id
from jobmesh.server.principals import Principal, Role, current_principal
from jobmesh.v1 import job_service_pb2, search_service_pb2

__all__ = ["RPC_ROLES", "Access", "access_to"]

_JOBS = job_service_pb2.DESCRIPTOR.services_by_name["JobService"].full_name
_SEARCH = search_service_pb2.DESCRIPTOR.services_by_name["SearchService"].full_name

# The role each RPC needs in the namespace of the resource it touches (full method names, as gRPC sends them).
RPC_ROLES: Mapping[str, Role] = MappingProxyType(
    {
        f"/{_JOBS}/CreateJob": Role.OPERATOR,
        f"/{_JOBS}/BatchCreateJobs": Role.OPERATOR,
        f"/{_JOBS}/GetJob": Role.VIEWER,
        f"/{_JOBS}/UpdateJob": Role.OPERATOR,
        f"/{_JOBS}/DeleteJob": Role.ADMIN,
        f"/{_JOBS}/PauseJob": Role.OPERATOR,
        f"/{_JOBS}/ResumeJob": Role.OPERATOR,
        f"/{_JOBS}/RunJobNow": Role.OPERATOR,
        f"/{_JOBS}/CancelRun": Role.OPERATOR,
        f"/{_JOBS}/ReplayRun": Role.OPERATOR,
        f"/{_JOBS}/BackfillJob": Role.OPERATOR,
        f"/{_JOBS}/BulkCancelRuns": Role.OPERATOR,
        f"/{_JOBS}/BulkReplayRuns": Role.OPERATOR,
        f"/{_JOBS}/BulkPauseJobs": Role.OPERATOR,
        f"/{_JOBS}/BulkResumeJobs": Role.OPERATOR,
        f"/{_SEARCH}/ListJobs": Role.VIEWER,
        f"/{_SEARCH}/ListRuns": Role.VIEWER,
        f"/{_SEARCH}/GetRun": Role.VIEWER,
        f"/{_SEARCH}/WatchRuns": Role.VIEWER,
        f"/{_SEARCH}/CountRuns": Role.VIEWER,
        f"/{_SEARCH}/TailRunLogs": Role.VIEWER,
        f"/{_SEARCH}/PreviewSchedule": Role.VIEWER,
        f"/{_SEARCH}/ListAuditEvents": Role.VIEWER,
    }
)


@dataclass(frozen=True, slots=True)
class Access:
    """What one call may do: its caller and the role its RPC needs. The servicer makes it on the call's
    task (where the principal is current) and hands it to the commands and queries, which run on worker
    threads."""

    principal: Principal
    method: str
    role: Role

    def check(self, namespace: str, resource: str) -> None:
        """Raises NotFound (`resource`) without any role in `namespace`, PermissionDenied with a lower one."""
        held = self.principal.role_in(namespace)
        if held is None:
            raise NotFound(resource)
        if held < self.role:
            raise self._denied(namespace, resource)

    def check_create(self, namespace: str, resource: str) -> None:
        """A new resource: the caller named the namespace, so there is nothing to hide."""
        if not self.principal.may(self.role, namespace):
            raise self._denied(namespace, resource)

    def readable(self) -> frozenset[str] | None:
        """The namespaces whose resources lists and feeds show this caller (None: all)."""
        return self.principal.namespaces_with(Role.VIEWER)

    def changeable(self) -> frozenset[str] | None:
        """The namespaces where this call's role is held (None: all): what a call by filter may change."""
        return self.principal.namespaces_with(self.role)

    def audited(
        self, action: AuditAction, resource: str, namespace: str, now: datetime, request_id: str = ""
    ) -> AuditEvent:
        """The audit event of a change this call makes to `resource` (`jobs/{job}` or a run of it)."""
        return AuditEvent(
            event_id=new_run_id(now),
            time=now,
            actor=self.principal.subject,
            action=action,
            resource=resource,
            job_id=resource.split("/")[1],
            namespace=namespace,
            request_id=request_id,
        )

    def _denied(self, namespace: str, resource: str) -> PermissionDenied:
        rpc, role = self.method.rsplit("/", 1)[-1], self.role.name.lower()
        return PermissionDenied(
            f"{rpc} on {resource} needs the {role} role in namespace {namespace!r}",
            metadata={"method": self.method, "namespace": namespace, "role": self.role.name},
        )


def access_to(method: str) -> Access:
    """The access of the call being served to `method` (a key of RPC_ROLES). A caller who holds no role in
    any namespace (an executor's credential) is refused every such call, before its request is read."""
    access = Access(current_principal(), method, RPC_ROLES[method])
    if access.readable() == frozenset():
        raise PermissionDenied(
            f"{method.rsplit('/', 1)[-1]} needs a role in a namespace; the caller holds none",
            metadata={"method": method, "role": access.role.name},
        )
    return access
