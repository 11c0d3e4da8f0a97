"""What only the Redis adapter has: failing fast, surviving a restart, and its wire format.

The restart tests run their own throwaway redis-server (the shared one must not be killed under other tests).
"""

from __future__ import annotations

import json
import logging
import shutil
import socket
import subprocess
import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta

import pytest
import redis
from redis.backoff import NoBackoff
from redis.retry import Retry

from jobmesh.adapters.signals import redis as signals_redis
from jobmesh.adapters.signals.redis import RedisSignalBus
from jobmesh.adapters.signals.wire import encode_notice
from jobmesh.core.attempts import AttemptRef
from jobmesh.core.ports.signals import CancelNotice, SignalsUnavailable
from tests.adapters.signals.helpers import Inbox, eventually, notice, with_new_listeners
from tests.support import missing, require_service_url

DEAD_URL = "redis://127.0.0.1:1/0"
LONG = timedelta(seconds=60)


class ThrowawayRedis:
    """A redis-server of the test's own, on a free port, that the test stops and starts."""

    def __init__(self) -> None:
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            self.port: int = probe.getsockname()[1]
        self.url = f"redis://127.0.0.1:{self.port}/0"
        self._process: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        command = ["redis-server", "--bind", "127.0.0.1", "--port", str(self.port)]
        command += ["--save", "", "--appendonly", "no"]
        self._process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        assert eventually(self._answers, timeout=5.0), "redis-server did not come up"

    def kill(self) -> None:
        """As a crash would: no goodbye to the clients."""
        if self._process is not None:
            self._process.kill()
            self._process.wait(5)
            self._process = None

    def _answers(self) -> bool:
        try:
            with redis.Redis(
                port=self.port, socket_connect_timeout=0.2, retry=Retry(NoBackoff(), 0)
            ) as client:
                return bool(client.ping())
        except redis.ConnectionError:
            return False


@pytest.fixture
def throwaway_redis() -> Iterator[ThrowawayRedis]:
    if shutil.which("redis-server") is None:
        missing("redis-server is not on PATH")
    server = ThrowawayRedis()
    try:
        yield server
    finally:
        server.kill()


@pytest.fixture
def redis_url() -> str:
    return require_service_url("JOBMESH_REDIS_URL")


@pytest.mark.timing
def test_a_dead_redis_fails_every_call_fast() -> None:
    bus = RedisSignalBus(DEAD_URL)
    key = AttemptRef("a", "1", 1)
    started = time.monotonic()
    try:
        for call in (
            lambda: bus.publish_cancel(notice(1)),
            lambda: bus.set_cancel_keys([key], LONG),
            lambda: bus.cancelled([key]),
            lambda: bus.put_heartbeats("executors/e1", [key], time_now(), LONG),
            lambda: bus.heartbeats([key]),
            lambda: bus.fence_attempts([key], "executors/e1", LONG),
            lambda: bus.fence_owners([key]),
            bus.check_reachable,
        ):
            with pytest.raises(SignalsUnavailable):
                call()
        # Subscribing does not fail the caller: the listener keeps retrying until closed.
        bus.subscribe_cancels(Inbox()).close()
    finally:
        bus.close()
    assert time.monotonic() - started < 3.0


def test_the_probe_of_a_dead_redis_raises_signals_unavailable() -> None:
    bus = RedisSignalBus(DEAD_URL)
    try:
        with pytest.raises(SignalsUnavailable, match="ping"):
            bus.check_reachable()
    finally:
        bus.close()


def test_fences_on_a_dead_redis_raise_signals_unavailable() -> None:
    bus = RedisSignalBus(DEAD_URL)
    key = AttemptRef("a", "1", 1)
    try:
        with pytest.raises(SignalsUnavailable, match="fence"):
            bus.fence_attempts([key], "executors/e1", LONG)
        with pytest.raises(SignalsUnavailable):
            bus.fence_owners([key])
    finally:
        bus.close()


@pytest.mark.redis
def test_the_probe_answers_on_the_real_redis(redis_url: str) -> None:
    bus = RedisSignalBus(redis_url)
    try:
        bus.check_reachable()
    finally:
        bus.close()


@pytest.mark.redis
def test_the_probe_fails_while_redis_is_away_and_passes_once_it_is_back(
    throwaway_redis: ThrowawayRedis,
) -> None:
    throwaway_redis.start()
    bus = RedisSignalBus(throwaway_redis.url)
    try:
        bus.check_reachable()
        throwaway_redis.kill()
        with pytest.raises(SignalsUnavailable):
            bus.check_reachable()
        throwaway_redis.start()
        bus.check_reachable()  # the same bus, on a new connection: no restart of the process
    finally:
        bus.close()


@pytest.mark.redis
def test_a_subscriber_survives_a_redis_restart(throwaway_redis: ThrowawayRedis) -> None:
    throwaway_redis.start()
    subscriber = RedisSignalBus(throwaway_redis.url, prefix="restart")
    publisher = RedisSignalBus(throwaway_redis.url, prefix="restart")
    inbox = Inbox()
    try:
        subscriber.subscribe_cancels(inbox)
        publisher.publish_cancel(notice(1))
        assert inbox.wait_for(1) == [notice(1)]

        throwaway_redis.kill()
        with pytest.raises(SignalsUnavailable):
            publisher.publish_cancel(notice(2))
        throwaway_redis.start()

        assert _delivered_eventually(publisher, inbox, notice(3))
    finally:
        subscriber.close()
        publisher.close()


@pytest.mark.redis
def test_a_subscriber_opened_while_redis_is_down_catches_up(throwaway_redis: ThrowawayRedis) -> None:
    subscriber = RedisSignalBus(throwaway_redis.url, prefix="late")
    publisher = RedisSignalBus(throwaway_redis.url, prefix="late")
    inbox = Inbox()
    try:
        subscription, listeners = with_new_listeners(lambda: subscriber.subscribe_cancels(inbox))
        throwaway_redis.start()

        assert _delivered_eventually(publisher, inbox, notice(1))
        subscription.close()
        assert listeners
        assert not any(listener.is_alive() for listener in listeners)  # stopped within close's join
    finally:
        subscriber.close()
        publisher.close()


@pytest.mark.redis
def test_malformed_messages_are_dropped(redis_url: str, prefix: str) -> None:
    subscriber = RedisSignalBus(redis_url, prefix=prefix)
    inbox = Inbox()
    try:
        subscriber.subscribe_cancels(inbox)
        with redis.Redis.from_url(redis_url) as raw:
            for garbage in (b"not json", b'{"v":99}', b'{"v":1,"executor":"e","attempts":[["r","1"]]}'):
                raw.publish(f"{prefix}:cancels", garbage)
            raw.publish(f"{prefix}:cancels", encode_notice(notice(1)))

        assert inbox.wait_for(1) == [notice(1)]
    finally:
        subscriber.close()  # joins the listener: nothing else can arrive after this
    assert inbox.notices == [notice(1)]


@pytest.mark.redis
def test_keys_follow_the_wire_format(redis_url: str, prefix: str) -> None:
    bus = RedisSignalBus(redis_url, prefix=prefix)
    key = AttemptRef("a", "b", 2)
    try:
        bus.set_cancel_keys([key], LONG)
        bus.put_heartbeats("executors/e1", [key], time_now(), LONG)
        with redis.Redis.from_url(redis_url) as raw:
            assert 0 < raw.pttl(f"{prefix}:cancel:jobs/a/runs/b:2") <= LONG.total_seconds() * 1000
            assert 0 < raw.pttl(f"{prefix}:hb:jobs/a/runs/b:2") <= LONG.total_seconds() * 1000
            value = raw.get(f"{prefix}:hb:jobs/a/runs/b:2")
            assert value is not None
            assert json.loads(value)["executor"] == "executors/e1"
            raw.set(f"{prefix}:hb:jobs/a/runs/b:3", b"garbage")
            assert bus.heartbeats([AttemptRef("a", "b", 3)]) == {}
            raw.delete(*raw.keys(f"{prefix}:*"))
    finally:
        bus.close()


def _delivered_eventually(publisher: RedisSignalBus, inbox: Inbox, sent: CancelNotice) -> bool:
    """Publishes until the subscriber has it: what is published before it resubscribes is lost by design."""

    def delivered() -> bool:
        try:
            publisher.publish_cancel(sent)
        except SignalsUnavailable:
            return False
        return sent in inbox.wait_for(len(inbox.notices) + 1, timeout=0.2)

    return eventually(delivered, timeout=8.0, interval=0.05)


def time_now() -> datetime:
    return datetime.now(UTC)


@pytest.mark.redis
def test_a_quiet_subscription_pings_and_stays_connected(
    redis_url: str, prefix: str, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setattr(signals_redis, "PING_EVERY_S", 0.05)
    monkeypatch.setattr(signals_redis, "SILENCE_LIMIT_S", 0.3)
    bus = RedisSignalBus(redis_url, prefix=prefix)
    inbox = Inbox()
    try:
        with caplog.at_level(logging.DEBUG, logger="jobmesh.adapters.signals"):
            bus.subscribe_cancels(inbox)
            time.sleep(0.6)  # many pings, each answered within the silence limit
            bus.publish_cancel(notice(1))
            assert inbox.wait_for(1) == [notice(1)]
    finally:
        bus.close()
    assert "resubscrib" not in caplog.text
