"""Opens the signal bus a URL names: `memory://NAME` (in-process), `redis://…` or `rediss://…`.

`parse_signals_url` checks a URL without connecting to anything; `open_signals` opens what it names.
"""

from __future__ import annotations

from typing import Literal

from jobmesh.adapters.signals.memory import MemorySignalBus, shared_hub
from jobmesh.adapters.signals.redis import RedisSignalBus
from jobmesh.core.ports.signals import SignalBus


def parse_signals_url(url: str) -> tuple[Literal["memory", "redis"], str]:
    """("memory", hub name) or ("redis", the URL for redis-py); ValueError names only the scheme, since the
    rest of a Redis URL may hold a password."""
    scheme, separator, rest = url.strip().partition("://")
    scheme = scheme.lower()
    if separator and scheme == "memory":
        return "memory", rest
    if separator and scheme in {"redis", "rediss"}:
        return "redis", f"{scheme}://{rest}"  # redis-py wants the scheme in lower case
    shown = f"scheme {scheme!r}" if separator else "a URL without a scheme"
    raise ValueError(
        f"unsupported signal bus URL ({shown}): use memory://NAME, redis://HOST:PORT/DB or rediss://HOST:PORT/DB"
    )


def open_signals(url: str, *, prefix: str = "jobmesh") -> SignalBus:
    """A bus for `url`. Every `memory://NAME` in one process shares the hub NAME (so the components of
    `jobmesh dev` meet; each gets its own handle to close). `prefix` namespaces the Redis keys and channel;
    the memory bus has no use for it. Nothing connects here: a Redis that is down fails the first call."""
    kind, target = parse_signals_url(url)
    if kind == "memory":
        return MemorySignalBus(shared_hub(target))
    return RedisSignalBus(target, prefix=prefix)
