"""Admission of live streams: at most so many open at once in all, and from one client address."""

from __future__ import annotations

import contextlib
from collections import Counter
from collections.abc import Iterator

from jobmesh.core.errors import ResourceExhausted

TOO_MANY_STREAMS = "TOO_MANY_STREAMS"


def client_of(peer: str) -> str:
    """The client part of a gRPC peer (`ipv4:10.0.0.1:5000` → `ipv4:10.0.0.1`, `ipv6:[::1]:5000` →
    `ipv6:[::1]`): its port changes with every connection, its address does not."""
    if peer.startswith(("ipv4:", "ipv6:")):
        return peer.rsplit(":", 1)[0]
    return peer


class StreamSlots:
    def __init__(self, *, total: int, per_client: int) -> None:
        self._total = total
        self._per_client = per_client
        self._open: Counter[str] = Counter()

    @property
    def open(self) -> int:
        return self._open.total()

    @contextlib.contextmanager
    def held(self, peer: str) -> Iterator[None]:
        """A slot for the block; RESOURCE_EXHAUSTED when none is free."""
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
        self._open[client] += 1
        try:
            yield
        finally:
            self._open[client] -= 1
            if not self._open[client]:
                del self._open[client]


def _refused(message: str, scope: str, limit: int) -> ResourceExhausted:
    return ResourceExhausted(
        f"{message}: close a stream or retry later",
        reason=TOO_MANY_STREAMS,
        metadata={"scope": scope, "limit": str(limit)},
    )
