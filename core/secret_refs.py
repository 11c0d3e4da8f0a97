"""Secret references: a job's `env` value `secret://NAME` names a secret that the executor resolves from its
own source (docs/design.md, "Secrets"). The server stores and returns only the reference, never a value."""

from __future__ import annotations

import re

__all__ = ["SECRET_SCHEME", "SecretReferenceError", "secret_name"]

SECRET_SCHEME = "secret://"
# Letters, digits and `_`: the same name is a key of a secrets file and the end of an environment variable.
_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,127}$")


class SecretReferenceError(ValueError):
    """A value that starts like a reference but names no valid secret."""


def secret_name(value: str) -> str | None:
    """The secret a value refers to, or None for a plain value. SecretReferenceError for a malformed one."""
    if not value.startswith(SECRET_SCHEME):
        return None
    name = value[len(SECRET_SCHEME) :]
    if not _NAME.match(name):
        raise SecretReferenceError(
            "a secret reference is secret://NAME, NAME 1-128 of A-Z, a-z, 0-9 and `_`,"
            " not starting with a digit"
        )
    return name
