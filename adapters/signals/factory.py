"""Opens the signal bus a URL names: `memory://NAME` (in-process), `redis://…` or `rediss://…`."""

from __future__ import annotations

from jobmesh.adapters.signals.memory import MemorySignalBus, shared_hub
from jobmesh.adapters.signals.redis import RedisSignalBus
from jobmesh.core.ports.signals import SignalBus


def open_signals(url: str, *, prefix: str = "jobmesh") -> SignalBus:
    """A bus for `url`. Every `memory://NAME` in one process shares the hub NAME (so the components of
    `jobmesh dev` meet; each gets its own handle to close). `prefix` namespaces the Redis keys and channel;
    the memory bus has no use for it. Nothing connects here: a Redis that is down fails the first call."""
    scheme, separator, rest = url.partition("://")
    scheme = scheme.lower()
    if separator and scheme == "memory":
        return MemorySignalBus(shared_hub(rest))
    if separator and scheme in {"redis", "rediss"}:
        return RedisSignalBus(f"{scheme}://{rest}", prefix=prefix)  # redis-py wants the scheme in lower case
    # Only the scheme is echoed: the rest of a Redis URL may hold a password.
    shown = f"scheme {scheme!r}" if separator else "a URL without a scheme"
    raise ValueError(
        f"unsupported signal bus URL ({shown}): use memory://NAME, redis://HOST:PORT/DB or rediss://HOST:PORT/DB"
    )
