"""The grant format that a token carries: roles per namespace and, for an executor, the name and queues its
credential binds. A JWT holds it under its `jobmesh` claim; an entry of the opaque-token file holds the same
keys beside its `sha256` and `subject`:

    {"roles": {"team-a": "operator", "*": "viewer"},
     "executor": {"name": "exec-1", "queues": ["default"], "namespaces": ["*"]}}

Both parts are optional: a token with no `roles` may do nothing through the API, one with no `executor` may
not connect as an executor. `*` stands for every namespace (or queue).
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType

from jobmesh.server.principals import ANY_NAMESPACE, ExecutorGrant, Principal, Role

__all__ = ["GRANT_CLAIM", "principal_of_grant"]

# The JWT claim that holds a grant.
GRANT_CLAIM = "jobmesh"
_ROLES = {role.name.lower(): role for role in Role}


def principal_of_grant(subject: object, grant: object) -> Principal:
    """The principal that `grant` (decoded JSON or YAML) gives `subject`; ValueError says what is wrong."""
    if not isinstance(subject, str) or not subject:
        raise ValueError("the subject is missing")
    if grant is None:
        grant = {}
    if not isinstance(grant, Mapping):
        raise ValueError("a grant is an object with `roles` and `executor`")
    unknown = set(grant) - {"roles", "executor"}
    if unknown:
        raise ValueError(f"unknown grant keys: {sorted(unknown)}")
    return Principal(
        subject=subject,
        roles=MappingProxyType(_roles(grant.get("roles") or {})),
        executor=_executor(grant.get("executor")),
    )


def _roles(roles: object) -> dict[str, Role]:
    if not isinstance(roles, Mapping):
        raise ValueError("`roles` maps a namespace (or `*`) to viewer, operator or admin")
    parsed = {}
    for namespace, role in roles.items():
        if not isinstance(namespace, str) or not namespace:
            raise ValueError(f"{namespace!r} is not a namespace")
        if not isinstance(role, str) or role.lower() not in _ROLES:
            raise ValueError(f"{role!r} is not a role (viewer, operator, admin)")
        parsed[namespace] = _ROLES[role.lower()]
    return parsed


def _executor(executor: object) -> ExecutorGrant | None:
    if executor is None:
        return None
    if not isinstance(executor, Mapping):
        raise ValueError("`executor` is an object with `name`, `queues` and `namespaces`")
    name = executor.get("name")
    if not isinstance(name, str) or not name:
        raise ValueError("an executor grant names its executor (`name`)")
    return ExecutorGrant(
        name=name,
        queues=_names(executor.get("queues", [ANY_NAMESPACE]), "queues"),
        namespaces=_names(executor.get("namespaces", [ANY_NAMESPACE]), "namespaces"),
    )


def _names(values: object, key: str) -> frozenset[str]:
    if not isinstance(values, list) or not all(isinstance(v, str) and v for v in values):
        raise ValueError(f'`{key}` is a list of names (or ["*"])')
    return frozenset(values)
