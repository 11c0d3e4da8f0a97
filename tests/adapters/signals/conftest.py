"""One contract suite, both adapters: `open_bus` opens buses that reach each other, in memory or on Redis.

Redis comes from JOBMESH_REDIS_URL (skipped locally, failed under CI when unset); each test works under a
prefix of its own, whose keys are deleted afterwards. Memory tests each use a hub name of their own.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator

import pytest
import redis

from jobmesh.adapters.signals.factory import open_signals
from jobmesh.core.ports.signals import SignalBus
from tests.support import require_service_url

OpenBus = Callable[[], SignalBus]


@pytest.fixture
def prefix() -> str:
    return f"jmtest-{uuid.uuid4().hex[:10]}"


@pytest.fixture(params=["memory", pytest.param("redis", marks=pytest.mark.redis)])
def open_bus(request: pytest.FixtureRequest, prefix: str) -> Iterator[OpenBus]:
    """Opens another bus on the same backend, as another process would (closed at the end)."""
    url = f"memory://{prefix}" if request.param == "memory" else require_service_url("JOBMESH_REDIS_URL")
    opened: list[SignalBus] = []

    def open_one() -> SignalBus:
        bus = open_signals(url, prefix=prefix)
        opened.append(bus)
        return bus

    yield open_one
    for bus in opened:
        bus.close()
    if request.param == "redis":
        _delete_keys(url, prefix)


@pytest.fixture
def bus(open_bus: OpenBus) -> SignalBus:
    return open_bus()


def _delete_keys(url: str, prefix: str) -> None:
    with redis.Redis.from_url(url) as client:
        keys = list(client.scan_iter(match=f"{prefix}:*"))
        if keys:
            client.delete(*keys)
