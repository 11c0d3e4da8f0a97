"""`open_signals` picks the adapter by URL; `memory://NAME` buses of one name meet, other names do not."""

from __future__ import annotations

import uuid
from datetime import timedelta

import pytest

from jobmesh.adapters.signals.factory import open_signals
from jobmesh.adapters.signals.memory import MemorySignalBus
from jobmesh.adapters.signals.redis import RedisSignalBus
from jobmesh.core.attempts import AttemptRef
from tests.adapters.signals.helpers import Inbox, notice

KEY = AttemptRef("a", "1", 1)


def test_memory_buses_of_one_name_share_signals_and_others_do_not() -> None:
    name = f"memory://dev-{uuid.uuid4().hex}"
    server, executor, stranger = open_signals(name), open_signals(name), open_signals(name + "-other")
    inbox, strangers_inbox = Inbox(), Inbox()
    try:
        assert isinstance(server, MemorySignalBus)
        executor.subscribe_cancels(inbox)
        stranger.subscribe_cancels(strangers_inbox)
        server.set_cancel_keys([KEY], timedelta(minutes=1))
        server.publish_cancel(notice(1))

        assert inbox.wait_for(1) == [notice(1)]
        assert executor.cancelled([KEY]) == {KEY}
        assert stranger.cancelled([KEY]) == set()
    finally:
        for bus in (server, executor, stranger):
            bus.close()
    assert strangers_inbox.notices == []


@pytest.mark.parametrize("url", ["redis://127.0.0.1:1/0", "rediss://user:secret@127.0.0.1:1/0", "REDIS://h"])
def test_redis_urls_open_a_redis_bus_without_connecting(url: str) -> None:
    bus = open_signals(url)
    try:
        assert isinstance(bus, RedisSignalBus)
    finally:
        bus.close()


@pytest.mark.parametrize(
    "url", ["", "localhost:6379", "kafka://broker:9092", "http://user:secret@host/", "memory:name"]
)
def test_other_urls_are_refused_without_echoing_secrets(url: str) -> None:
    with pytest.raises(ValueError, match="memory://NAME") as raised:
        open_signals(url)
    assert "secret" not in str(raised.value)
