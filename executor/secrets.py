"""The executor's secret source: what `secret://NAME` in a job resolves to, on this executor only. Secrets
belong to namespaces (core/secret_refs.py): a job's NAME is its own namespace's secret NAME.

- `env:PREFIX` (the default, `env:JOBMESH_SECRET_`): the `default` namespace's NAME is the executor's
  variable PREFIX + NAME; it holds no other namespace's secrets (a variable name cannot say whose it is).
- `file:PATH`: a JSON object of keys to strings, or `KEY=VALUE` lines (`#` comments), where a key is NAME
  for the `default` namespace and NAMESPACE/NAME for another; refused when anyone but its owner and group may
  read it. It is read again at each resolution, so a rotated value is picked up.
A secret granted to some queues of its namespace only (`--secret-queues`) is refused to a job of another
queue, as the server refuses that job at create. The values go into the command's environment (or the
webhook's request) and nowhere else: the run's log and error text are redacted of them
(executor/redaction.py).
"""

from __future__ import annotations

import json
import os
import stat
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

from jobmesh.core.names import DEFAULT_NAMESPACE, DEFAULT_QUEUE
from jobmesh.core.secret_refs import (
    SecretQueues,
    SecretReference,
    SecretReferenceError,
    embedded_references,
    refused_reference,
    secret_reference,
)

__all__ = [
    "DEFAULT_SCOPE",
    "DEFAULT_SECRET_SOURCE",
    "ResolvedEnv",
    "SecretMissing",
    "SecretScope",
    "SecretSource",
    "SecretSourceError",
    "open_secret_source",
    "resolve_env",
    "resolve_text",
]

DEFAULT_SECRET_SOURCE = "env:JOBMESH_SECRET_"


class SecretMissing(Exception):
    """A referenced secret the source does not hold; the message names it, never a value."""


class SecretSourceError(Exception):
    """The source cannot be read (a file gone, or readable by anyone)."""


class SecretSource(Protocol):
    def lookup(self, namespace: str, name: str) -> str | None: ...


@dataclass(frozen=True, slots=True)
class EnvSecrets:
    prefix: str
    variables: Mapping[str, str]

    def lookup(self, namespace: str, name: str) -> str | None:
        return self.variables.get(self.prefix + name) if namespace == DEFAULT_NAMESPACE else None


@dataclass(frozen=True, slots=True)
class FileSecrets:
    path: Path

    def lookup(self, namespace: str, name: str) -> str | None:
        key = name if namespace == DEFAULT_NAMESPACE else f"{namespace}/{name}"
        return read_secrets_file(self.path).get(key)


def open_secret_source(spec: str, environ: Mapping[str, str]) -> SecretSource:
    """`env:PREFIX` or `file:PATH`. ValueError says what is wrong (a file is checked, not kept open)."""
    kind, _, where = spec.partition(":")
    if kind == "env" and where:
        return EnvSecrets(where, environ)
    if kind == "file" and where:
        try:
            read_secrets_file(Path(where))
        except SecretSourceError as exc:
            raise ValueError(str(exc)) from None
        return FileSecrets(Path(where))
    raise ValueError(f"expected env:PREFIX or file:PATH, got {spec!r}")


def read_secrets_file(path: Path) -> dict[str, str]:
    try:
        with path.open("rb") as file:
            mode = os.fstat(file.fileno()).st_mode
            if mode & stat.S_IROTH:
                raise SecretSourceError(f"secrets file {path} is readable by anyone: chmod o-rwx it")
            text = file.read().decode("utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise SecretSourceError(f"cannot read secrets file {path}: {exc}") from None
    if text.lstrip().startswith("{"):
        try:
            loaded = json.loads(text)
        except json.JSONDecodeError as exc:  # its message holds no value, only a position
            raise SecretSourceError(f"secrets file {path} is not valid JSON: line {exc.lineno}") from None
        if not isinstance(loaded, dict) or not all(isinstance(v, str) for v in loaded.values()):
            raise SecretSourceError(f"secrets file {path}: expected an object of names to strings")
        return loaded
    values: dict[str, str] = {}
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        name, equals, value = line.partition("=")
        if not equals:
            raise SecretSourceError(f"secrets file {path}: line {number} is not NAME=VALUE")
        values[name.strip()] = value
    return values


@dataclass(frozen=True, slots=True)
class SecretScope:
    """Whose secrets a job may have: its namespace's, but those granted to other queues than its own."""

    namespace: str = DEFAULT_NAMESPACE
    queue: str = DEFAULT_QUEUE
    granted: SecretQueues = field(default_factory=SecretQueues)


DEFAULT_SCOPE = SecretScope()  # a job of the default namespace and queue, no secret granted to some queues


@dataclass(frozen=True, slots=True)
class ResolvedEnv:
    env: dict[str, str]
    secrets: tuple[str, ...]  # the values resolved, to be redacted


def resolve_env(env: Mapping[str, str], source: SecretSource, scope: SecretScope) -> ResolvedEnv:
    """A job's `env` with its references replaced by its namespace's values. SecretMissing names the first
    missing secret (or one the scope refuses: another namespace's, or granted to other queues);
    SecretSourceError when the source cannot be read. A malformed reference (which the server refuses at
    create) counts as missing."""
    resolved: dict[str, str] = {}
    values: list[str] = []
    for variable, value in env.items():
        try:
            reference = secret_reference(value)
        except SecretReferenceError:
            raise SecretMissing(f"{variable}: not a valid secret reference") from None
        if reference is None:
            resolved[variable] = value
            continue
        resolved[variable] = _lookup(reference, source, scope, f"for {variable}")
        values.append(resolved[variable])
    return ResolvedEnv(resolved, tuple(values))


def resolve_text(text: str, source: SecretSource, scope: SecretScope, where: str) -> tuple[str, list[str]]:
    """`text` (a header value, a body) with the references in it replaced: the text and the values used."""
    values: list[str] = []
    parts, end = [], 0
    for match, reference in embedded_references(text):
        values.append(_lookup(reference, source, scope, f"in {where}"))
        parts += [text[end : match.start()], values[-1]]
        end = match.end()
    return "".join([*parts, text[end:]]), values


def _lookup(reference: SecretReference, source: SecretSource, scope: SecretScope, where: str) -> str:
    namespace = scope.namespace
    if refused := refused_reference(reference, namespace, scope.queue, scope.granted):
        raise SecretMissing(f"{refused} ({where})")
    secret = source.lookup(namespace, reference.name)
    if secret is None:
        raise SecretMissing(
            f"secret {reference.name!r} ({where}) is not one of namespace {namespace!r}'s secrets in this"
            " executor's secret source"
        )
    return secret
