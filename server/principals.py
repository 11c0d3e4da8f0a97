"""Who is calling: the principal that a verified credential stands for, and what it may do.

Authentication (tokens, client certificates) turns a call's credential into a `Principal`; authorization asks
the principal whether it holds a role in a namespace. The principal of the call being served is kept in a
context variable, so that the servicers read it without threading it through every signature.
"""

from __future__ import annotations

import contextlib
import enum
from collections.abc import Iterator, Mapping, Sequence
from contextvars import ContextVar
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Protocol

__all__ = [
    "ANY_NAMESPACE",
    "UNRESTRICTED",
    "CredentialSource",
    "ExecutorGrant",
    "Principal",
    "Role",
    "acting_as",
    "current_principal",
]

# A grant on this namespace holds in every namespace.
ANY_NAMESPACE = "*"


class Role(enum.IntEnum):
    """Each role includes the ones below it."""

    VIEWER = 1  # reads and live feeds
    OPERATOR = 2  # create, update, cancel, run now, pause, resume, replay
    ADMIN = 3  # delete, namespace settings


@dataclass(frozen=True, slots=True)
class ExecutorGrant:
    """What an executor credential allows: the one executor name bound to it (None: any name, on a server that
    checks no credential), and the queues and namespaces whose runs it may claim."""

    name: str | None
    queues: frozenset[str] = frozenset({ANY_NAMESPACE})
    namespaces: frozenset[str] = frozenset({ANY_NAMESPACE})

    def allows_name(self, name: str) -> bool:
        return self.name is None or self.name == name

    def serves_queue(self, queue: str) -> bool:
        return ANY_NAMESPACE in self.queues or queue in self.queues

    def serves_namespace(self, namespace: str) -> bool:
        return ANY_NAMESPACE in self.namespaces or namespace in self.namespaces


@dataclass(frozen=True, slots=True)
class Principal:
    """A verified caller: `subject` names it in logs and the audit trail."""

    subject: str
    roles: Mapping[str, Role] = field(default_factory=lambda: MappingProxyType({}))
    executor: ExecutorGrant | None = None

    def role_in(self, namespace: str) -> Role | None:
        """The highest role held in `namespace`, if any."""
        held = [r for ns, r in self.roles.items() if ns in (namespace, ANY_NAMESPACE)]
        return max(held, default=None)

    def may(self, role: Role, namespace: str) -> bool:
        held = self.role_in(namespace)
        return held is not None and held >= role

    def namespaces_with(self, role: Role) -> frozenset[str] | None:
        """The namespaces where the principal holds `role`; None when it holds it in every namespace."""
        if self.may(role, ANY_NAMESPACE):
            return None
        return frozenset(ns for ns, r in self.roles.items() if r >= role)


class CredentialSource(Protocol):
    """One kind of credential a call may carry (a bearer token, a client certificate)."""

    def principal_of(
        self, metadata: Mapping[str, str], peer: Mapping[str, Sequence[bytes]]
    ) -> Principal | None:
        """The principal that the call's credential of this kind stands for; None when the call carries
        none of this kind. `metadata` is the call's (lower-case keys), `peer` its `auth_context()` (with the
        verified client certificate under TLS). Raises `Unauthenticated` for a credential present but bad."""
        ...


# The principal of a server that checks no credential (`jobmesh dev` on loopback, tests): it may do anything,
# as any executor.
UNRESTRICTED = Principal(
    subject="unauthenticated",
    roles=MappingProxyType({ANY_NAMESPACE: Role.ADMIN}),
    executor=ExecutorGrant(name=None),
)

_current: ContextVar[Principal] = ContextVar("jobmesh_principal", default=UNRESTRICTED)


def current_principal() -> Principal:
    """The principal of the call being served (UNRESTRICTED when the server checks no credential)."""
    return _current.get()


@contextlib.contextmanager
def acting_as(principal: Principal) -> Iterator[Principal]:
    """Makes `principal` the current one for the code inside (the handler of one call)."""
    token = _current.set(principal)
    try:
        yield principal
    finally:
        # A stream's generator cancelled by its client is closed by the event loop in another context, where
        # the token cannot be reset; nothing is left to restore there (each call has a context of its own).
        with contextlib.suppress(ValueError):
            _current.reset(token)
