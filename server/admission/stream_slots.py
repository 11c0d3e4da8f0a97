"""Admission of live streams: at most so many open at once in all, from one client address, and for one
authenticated caller (a token's subject: one caller behind many addresses, or many behind one proxy)."""

from __future__ import annotations

import contextlib
from collections import Counter
from collections.abc import Iterator

from jobmesh.core.errors import ResourceExhausted
from jobmesh.server.principals import UNRESTRICTED, Principal

TOO_MANY_STREAMS = "TOO_MANY_STREAMS"


def client_of(peer: str) -> str:
    """The client part of a gRPC peer (`ipv4:10.0.0.1:5000` → `ipv4:10.0.0.1`, `ipv6:[::1]:5000` →
    `ipv6:[::1]`): its port changes with every connection, its address does not."""
    if peer.startswith(("ipv4:", "ipv6:")):
        return peer.rsplit(":", 1)[0]
    return peer


def caller_of(principal: Principal) -> str | None:
    """Whose streams a principal's count: none on a server that checks no credential (everyone is the one
    UNRESTRICTED principal there, and the per-address limit holds)."""
    return None if principal is UNRESTRICTED else principal.subject


class StreamSlots:
    def __init__(self, *, total: int, per_client: int, per_caller: int | None = None) -> None:
        self._total = total
        self._per_client = per_client
        self._per_caller = per_caller if per_caller is not None else per_client
        self._open: Counter[str] = Counter()
        self._by_caller: Counter[str] = Counter()

    @property
    def open(self) -> int:
        return self._open.total()

    @contextlib.contextmanager
    def held(self, peer: str, caller: str | None = None) -> Iterator[None]:
        """A slot for the block; RESOURCE_EXHAUSTED when none is free. `caller` is the authenticated
        subject (None where the server checks no credential)."""
        client = client_of(peer)
        if self.open >= self._total:
            raise _refused(
                f"the server has {self._total} live streams open, its limit", "server", self._total
            )
        if self._open[client] >= self._per_client:
            raise _refused(
                f"this client has {self._per_client} live streams open, the limit for one client",
                "client",
                self._per_client,
            )
        if caller is not None and self._by_caller[caller] >= self._per_caller:
            raise _refused(
                f"this caller has {self._per_caller} live streams open, the limit for one caller",
                "caller",
                self._per_caller,
            )
        self._open[client] += 1
        if caller is not None:
            self._by_caller[caller] += 1
        try:
            yield
        finally:
            _release(self._open, client)
            if caller is not None:
                _release(self._by_caller, caller)


def _release(counts: Counter[str], key: str) -> None:
    counts[key] -= 1
    if not counts[key]:
        del counts[key]


def _refused(message: str, scope: str, limit: int) -> ResourceExhausted:
    return ResourceExhausted(
        f"{message}: close a stream or retry later",
        reason=TOO_MANY_STREAMS,
        metadata={"scope": scope, "limit": str(limit)},
    )
