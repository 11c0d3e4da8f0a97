"""Opaque bearer tokens, for small setups: a YAML (or JSON) file of hashed tokens, each entry with a subject
and a grant (`server/auth/grants.py`):

    tokens:
      - sha256: 9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08
        subject: ci-pipeline
        roles: {team-a: operator}
      - sha256: ...
        subject: exec-1
        executor: {name: exec-1, queues: [default]}

Only the SHA-256 of a token is stored; a presented token is hashed and compared with every entry in constant
time. `jobmesh token new` makes a token and its entry. The file is read again when it changes; one that is
removed, or no longer parses, refuses every token until it is back.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import yaml

from jobmesh.core.errors import Unauthenticated
from jobmesh.server.auth.bearer import bearer_token
from jobmesh.server.auth.grants import principal_of_grant
from jobmesh.server.auth.watched_file import WatchedFile
from jobmesh.server.principals import Principal

__all__ = [
    "OPAQUE_PREFIX",
    "OpaqueTokens",
    "append_entry",
    "new_opaque_token",
    "parse_token_file",
    "token_digest",
    "token_entry",
]

# Every opaque token starts so: a bearer token of another form (a JWT) is not looked up here.
OPAQUE_PREFIX = "jm_"
_HEX = frozenset("0123456789abcdef")


def new_opaque_token() -> str:
    return OPAQUE_PREFIX + secrets.token_urlsafe(32)


def token_digest(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


@dataclass(frozen=True, slots=True)
class _TokenEntry:
    digest: bytes
    principal: Principal


def parse_token_file(content: bytes) -> tuple[_TokenEntry, ...]:
    """The entries of a token file; ValueError names the first bad one."""
    try:
        document = yaml.safe_load(content) or {}
    except yaml.YAMLError as error:
        raise ValueError(f"not YAML: {error}") from None
    tokens = document.get("tokens") if isinstance(document, Mapping) else None
    if not isinstance(tokens, list):
        raise ValueError("expected a `tokens:` list of entries")
    entries, seen = [], set()
    for number, entry in enumerate(tokens, 1):
        try:
            entries.append(_entry(entry))
        except ValueError as error:
            raise ValueError(f"entry {number}: {error}") from None
        if entries[-1].digest in seen:
            raise ValueError(f"entry {number}: the same token is listed twice")
        seen.add(entries[-1].digest)
    return tuple(entries)


def _entry(entry: object) -> _TokenEntry:
    if not isinstance(entry, Mapping):
        raise ValueError("an entry has `sha256`, `subject`, `roles` and optionally `executor`")
    digest = entry.get("sha256")
    if not isinstance(digest, str) or len(digest) != 64 or not set(digest) <= _HEX:
        raise ValueError("`sha256` is the token's SHA-256 as 64 lower-case hex digits")
    grant = {key: value for key, value in entry.items() if key not in ("sha256", "subject")}
    return _TokenEntry(bytes.fromhex(digest), principal_of_grant(entry.get("subject"), grant))


def token_entry(token: str, subject: str, grant: Mapping[str, object]) -> dict[str, object]:
    """The token file's entry for `token` (its hash, never the token); ValueError for a bad grant."""
    entry = {"sha256": token_digest(token), "subject": subject, **grant}
    _entry(entry)
    return entry


def append_entry(path: Path, entry: Mapping[str, object]) -> None:
    """Adds the entry to the token file (made when missing); the file as a whole must still parse."""
    document = yaml.safe_load(path.read_bytes()) if path.exists() else None
    document = document or {"tokens": []}
    document["tokens"].append(dict(entry))
    content = yaml.safe_dump(document, sort_keys=False).encode()
    parse_token_file(content)
    temporary = path.with_name(f".{path.name}.new")
    temporary.write_bytes(content)
    temporary.chmod(0o600)
    temporary.replace(path)  # whole, at once: a server reading it never sees half a file


class OpaqueTokens:
    """A credential source: the principal of an opaque bearer token listed in the token file."""

    def __init__(self, path: Path) -> None:
        # Fail closed: a file removed or broken revokes every token it listed.
        revoked: tuple[_TokenEntry, ...] = ()
        self._file = WatchedFile(
            path, parse_token_file, fail_closed=(revoked, "every token it held is refused")
        )

    def principal_of(
        self, metadata: Mapping[str, str], peer: Mapping[str, Sequence[bytes]]
    ) -> Principal | None:
        token = bearer_token(metadata)
        if token is None or not token.startswith(OPAQUE_PREFIX):
            return None
        presented = hashlib.sha256(token.encode()).digest()
        found = None
        for entry in self._file.current():  # every entry compared: the time says nothing of which matched
            if hmac.compare_digest(entry.digest, presented):
                found = entry.principal
        if found is None:
            raise Unauthenticated(f"an opaque token not in {self._file.path}")
        return found
