"""Secret references: a job's `env` value `secret://NAME` names a secret that the executor resolves from its
own source (docs/design.md, "Secrets"). The server stores and returns only the reference, never a value.

Secrets belong to namespaces: `secret://NAME` in a job is its own namespace's secret NAME, and the qualified
form `secret://NAMESPACE/NAME` is allowed only with the job's own namespace (the server refuses any other at
create, and the executor refuses to resolve it). In an `http` target's header values and body a reference
may stand inside the text (`Authorization: Bearer secret://API_TOKEN`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

__all__ = [
    "SECRET_SCHEME",
    "SecretReference",
    "SecretReferenceError",
    "embedded_references",
    "foreign_reference",
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


def foreign_reference(reference: SecretReference, namespace: str) -> str | None:
    """Why a job of `namespace` may not use the reference (another namespace's secret), or None."""
    if not reference.foreign_to(namespace):
        return None
    return (
        f"secret://{reference.namespace}/{reference.name} is namespace {reference.namespace!r}'s secret:"
        f" a job of namespace {namespace!r} may reference only its own namespace's secrets"
    )
