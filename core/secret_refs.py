"""Secret references: a job's `env` value `secret://NAME` names a secret that the executor resolves from its
own source (docs/design.md, "Secrets"). The server stores and returns only the reference, never a value.

Secrets belong to namespaces: `secret://NAME` in a job is its own namespace's secret NAME, and the qualified
form `secret://NAMESPACE/NAME` is allowed only with the job's own namespace (the server refuses any other at
create, and the executor refuses to resolve it). In an `http` target's header values and body a reference
may stand inside the text (`Authorization: Bearer secret://API_TOKEN`).

Where wanted, a secret is granted to some queues of its namespace only (`SecretQueues`): a job on another
queue may not reference it. The server refuses such a job at create and update, and the executor refuses to
resolve it, with the same `refused_reference`.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field

from jobmesh.core.names import DEFAULT_NAMESPACE, DEFAULT_QUEUE, QUEUE_NAME

__all__ = [
    "SECRET_SCHEME",
    "SecretQueues",
    "SecretReference",
    "SecretReferenceError",
    "embedded_references",
    "parse_secret_queues",
    "refused_reference",
    "secret_reference",
]

SECRET_SCHEME = "secret://"
# Letters, digits and `_`: the same name is a key of a secrets file and the end of an environment variable.
_NAME = r"[A-Za-z_][A-Za-z0-9_]{0,127}"
_NAMESPACE = r"[a-z][a-z0-9-]{0,62}"
_WHOLE = re.compile(rf"^(?:({_NAMESPACE})/)?({_NAME})$")
_EMBEDDED = re.compile(rf"{re.escape(SECRET_SCHEME)}(?:({_NAMESPACE})/)?({_NAME})")


class SecretReferenceError(ValueError):
    """A value that starts like a reference but names no valid secret."""


@dataclass(frozen=True, slots=True)
class SecretReference:
    name: str
    namespace: str | None = None  # given only in the qualified form

    def foreign_to(self, namespace: str) -> bool:
        return self.namespace is not None and self.namespace != namespace

    def __str__(self) -> str:
        owner = f"{self.namespace}/" if self.namespace is not None else ""
        return f"{SECRET_SCHEME}{owner}{self.name}"


@dataclass(frozen=True, slots=True)
class SecretQueues:
    """The secrets granted to some queues of their namespace only: (namespace, name) → those queues. A secret
    not listed serves every queue of its namespace. A plain dict, so that server workers can be sent it."""

    granted: Mapping[tuple[str, str], frozenset[str]] = field(default_factory=dict)

    def queues_of(self, namespace: str, name: str) -> frozenset[str] | None:
        """The queues the secret is granted to, or None: every queue of its namespace."""
        return self.granted.get((namespace, name))


_GRANT_FORM = "NAME=QUEUE[+QUEUE...] or NAMESPACE/NAME=QUEUE[+QUEUE...]"


def parse_secret_queues(text: str) -> SecretQueues:
    """`API_TOKEN=mail,team-a/DB_PASSWORD=db+reports` → the queues each secret is granted to. A key names a
    secret as a secrets file does (NAME: the default namespace's). ValueError says what was expected."""
    granted: dict[tuple[str, str], frozenset[str]] = {}
    for entry in filter(None, (part.strip() for part in text.split(","))):
        key, equals, queues_text = (item.strip() for item in entry.partition("="))
        match = _WHOLE.match(key)
        queues = frozenset(filter(None, (queue.strip() for queue in queues_text.split("+"))))
        if not equals or match is None or not queues:
            raise ValueError(f"expected {_GRANT_FORM} entries, got {entry[:200]!r}")
        if bad := sorted(queue for queue in queues if not QUEUE_NAME.match(queue)):
            raise ValueError(f"{bad[0][:100]!r} is not a queue name (in {entry[:200]!r})")
        secret = (match.group(1) or DEFAULT_NAMESPACE, match.group(2))
        if secret in granted:
            raise ValueError(f"secret {key!r} is granted queues twice: list them in one entry")
        granted[secret] = queues
    if not granted:
        raise ValueError(f"expected {_GRANT_FORM} entries, got {text[:200]!r}")
    return SecretQueues(granted)


def secret_reference(value: str) -> SecretReference | None:
    """The secret a whole value refers to, or None for a plain value. SecretReferenceError for a malformed
    one."""
    if not value.startswith(SECRET_SCHEME):
        return None
    match = _WHOLE.match(value[len(SECRET_SCHEME) :])
    if match is None:
        raise SecretReferenceError(
            "a secret reference is secret://NAME (or secret://NAMESPACE/NAME, the job's own namespace),"
            " NAME 1-128 of A-Z, a-z, 0-9 and `_`, not starting with a digit"
        )
    return SecretReference(match.group(2), match.group(1))


def embedded_references(text: str) -> list[tuple[re.Match[str], SecretReference]]:
    """The references inside a text (a header value, a body), each with where it stands."""
    return [(match, SecretReference(match.group(2), match.group(1))) for match in _EMBEDDED.finditer(text)]


def refused_reference(
    reference: SecretReference, namespace: str, queue: str, granted: SecretQueues
) -> str | None:
    """Why a job of `namespace` on `queue` may not use the reference (another namespace's secret, or one of
    its own granted to other queues), or None when it may."""
    if reference.foreign_to(namespace):
        return (
            f"{reference} is namespace {reference.namespace!r}'s secret:"
            f" a job of namespace {namespace!r} may reference only its own namespace's secrets"
        )
    queues = granted.queues_of(namespace, reference.name)
    if queues is None or (queue or DEFAULT_QUEUE) in queues:
        return None
    return (
        f"{reference} of namespace {namespace!r} is granted to the queues {', '.join(sorted(queues))} only:"
        f" a job on queue {queue or DEFAULT_QUEUE!r} may not reference it"
    )
