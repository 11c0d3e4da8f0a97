"""The signal bus on Redis: PUBLISH/SUBSCRIBE for cancel routing, keys with TTLs for the executors' fallback.

Formats are in `wire.py`. Every call is one round trip (a pipeline or MGET for many attempts) with short
timeouts, so a dead Redis costs a caller about a second, never a hang; Redis errors leave as
SignalsUnavailable. Redis holds nothing the database cannot rebuild (invariant 1), so callers degrade.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from datetime import datetime, timedelta
from typing import Any

import redis
from redis.backoff import NoBackoff
from redis.client import PubSub
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import ReadOnlyError, RedisError
from redis.exceptions import TimeoutError as RedisTimeoutError
from redis.retry import Retry

from jobmesh.adapters.signals import wire
from jobmesh.core.attempts import AttemptRef
from jobmesh.core.backoff import backoff_delay
from jobmesh.core.ports.signals import CancelNotice, SignalsUnavailable
from jobmesh.core.ports.subscription import Subscription

log = logging.getLogger(__name__)

CONNECT_TIMEOUT_S = 1.0
OPERATION_TIMEOUT_S = 1.0
# One retry, at once: enough to replace a pooled connection that died with a restarted Redis, while a Redis
# that is really gone still fails within about two timeouts.
_RETRY = Retry(NoBackoff(), retries=1)
# A read-only replica (mid-failover) cannot take cancel keys either: to the caller that is "unavailable".
_UNAVAILABLE = (RedisConnectionError, RedisTimeoutError, ReadOnlyError)

POLL_S = 0.1  # how long the listener blocks per read: bounds how late close() is noticed
PING_EVERY_S = 5.0  # a half-open TCP connection says nothing; an unanswered PING exposes it
SILENCE_LIMIT_S = 2.5 * PING_EVERY_S
BACKOFF_FIRST = timedelta(milliseconds=100)
BACKOFF_MAX = timedelta(seconds=2)


@contextmanager
def _translated(action: str) -> Iterator[None]:
    try:
        yield
    except _UNAVAILABLE as error:
        raise SignalsUnavailable(f"redis {action} failed: {error}") from error


class RedisSignalBus:
    """A SignalBus on one Redis. Thread-safe: calls share a connection pool; each subscription holds its own
    connection and thread. `prefix` namespaces every key and the channel (one deployment per prefix)."""

    def __init__(self, url: str, *, prefix: str = "jobmesh") -> None:
        self._prefix = prefix
        self._client = redis.Redis.from_url(
            url,
            socket_connect_timeout=CONNECT_TIMEOUT_S,
            socket_timeout=OPERATION_TIMEOUT_S,
            retry=_RETRY,
        )
        self._lock = threading.Lock()
        self._listeners: set[_CancelSubscription] = set()

    def publish_cancel(self, notice: CancelNotice) -> None:
        with _translated("publish"):
            self._client.publish(wire.cancels_channel(self._prefix), wire.encode_notice(notice))

    def subscribe_cancels(self, handler: Callable[[CancelNotice], None]) -> Subscription:
        listener = _CancelSubscription(
            self._client, wire.cancels_channel(self._prefix), handler, self._forget
        )
        with self._lock:
            self._listeners.add(listener)
        listener.start()
        return listener

    def set_cancel_keys(self, attempts: Sequence[AttemptRef], ttl: timedelta) -> None:
        ttl_ms = wire.ttl_ms(ttl)
        self._set_many({wire.cancel_key(self._prefix, key): b"1" for key in attempts}, ttl_ms)

    def cancelled(self, attempts: Sequence[AttemptRef]) -> set[AttemptRef]:
        keys = wire.unique(attempts)
        values = self._get_many([wire.cancel_key(self._prefix, key) for key in keys])
        return {key for key, value in zip(keys, values, strict=True) if value is not None}

    def put_heartbeats(
        self, executor_id: str, attempts: Sequence[AttemptRef], at: datetime, ttl: timedelta
    ) -> None:
        value = wire.encode_heartbeat(executor_id, at)
        ttl_ms = wire.ttl_ms(ttl)
        self._set_many({wire.heartbeat_key(self._prefix, key): value for key in attempts}, ttl_ms)

    def heartbeats(self, attempts: Sequence[AttemptRef]) -> dict[AttemptRef, datetime]:
        keys = wire.unique(attempts)
        values = self._get_many([wire.heartbeat_key(self._prefix, key) for key in keys])
        found: dict[AttemptRef, datetime] = {}
        for key, value in zip(keys, values, strict=True):
            if value is None:
                continue
            try:
                found[key] = wire.decode_heartbeat(value)
            except ValueError:
                # Someone else's value under our key: not a heartbeat, so the attempt has none.
                log.warning("ignoring a malformed heartbeat for %s", key, exc_info=True)
        return found

    def fence_attempts(self, attempts: Sequence[AttemptRef], owner: str, ttl: timedelta) -> set[AttemptRef]:
        keys = wire.unique(attempts)
        if not keys:
            return set()
        ttl_ms = wire.ttl_ms(ttl)
        with _translated("fence"), self._client.pipeline(transaction=False) as pipe:
            for key in keys:
                pipe.set(wire.fence_key(self._prefix, key), owner.encode(), nx=True, px=ttl_ms)
            taken = pipe.execute()
        held = {key for key, done in zip(keys, taken, strict=True) if done}
        if others := [key for key in keys if key not in held]:  # taken before: by this owner, or another
            owners = self.fence_owners(others)
            held |= {key for key in others if owners.get(key) == owner}
        return held

    def fence_owners(self, attempts: Sequence[AttemptRef]) -> dict[AttemptRef, str]:
        keys = wire.unique(attempts)
        values = self._get_many([wire.fence_key(self._prefix, key) for key in keys])
        return {
            key: value.decode() if isinstance(value, bytes) else value
            for key, value in zip(keys, values, strict=True)
            if value is not None
        }

    def check_reachable(self) -> None:
        with _translated("ping"):
            self._client.ping()

    def close(self) -> None:
        with self._lock:
            listeners, self._listeners = self._listeners, set()
        for listener in listeners:
            listener.close()
        self._client.close()

    def _set_many(self, values: dict[str, bytes], ttl_ms: int) -> None:
        # MSET cannot set a TTL; a non-transactional pipeline of SET PX is still one round trip.
        if not values:
            return
        with _translated("write"), self._client.pipeline(transaction=False) as pipe:
            for key, value in values.items():
                pipe.set(key, value, px=ttl_ms)
            pipe.execute()

    def _get_many(self, keys: list[str]) -> list[bytes | str | None]:
        if not keys:
            return []
        with _translated("read"):
            return self._client.mget(keys)

    def _forget(self, listener: _CancelSubscription) -> None:
        with self._lock:
            self._listeners.discard(listener)


class _CancelSubscription:
    """One subscription: a daemon thread reading the channel, resubscribing with backoff whenever the
    connection is lost. Notices published while it is disconnected are missed (pub/sub keeps nothing); the
    database and the cancel keys cover those."""

    def __init__(
        self,
        client: redis.Redis,
        channel: str,
        handler: Callable[[CancelNotice], None],
        on_close: Callable[[_CancelSubscription], None],
    ) -> None:
        self._client = client
        self._channel = channel
        self._handler = handler
        self._on_close = on_close
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        # Subscribe before returning, so that a notice published once subscribe_cancels returns is received.
        # A Redis that is down does not fail the caller (degraded, not down): the thread keeps trying.
        pubsub: PubSub | None = None
        try:
            pubsub = self._connect()
        except RedisError as error:
            log.warning("cancel channel %s unavailable, will keep resubscribing: %s", self._channel, error)
        self._thread = threading.Thread(
            target=self._run, args=(pubsub,), name=f"jobmesh-signals:{self._channel}", daemon=True
        )
        self._thread.start()

    def close(self) -> None:
        self._stop.set()
        thread = self._thread
        if thread is not None and thread is not threading.current_thread():
            thread.join(wire.SUBSCRIBER_JOIN_TIMEOUT_S)
        self._on_close(self)

    def _run(self, pubsub: PubSub | None) -> None:
        failures = 0 if pubsub is not None else 1
        if failures:
            self._stop.wait(_backoff(failures))
        try:
            while not self._stop.is_set():
                try:
                    if pubsub is None:
                        pubsub = self._connect()
                        log.info("resubscribed to %s after %d failed attempts", self._channel, failures)
                        failures = 0
                    self._pump(pubsub)
                except Exception as error:
                    _close_quietly(pubsub)
                    pubsub = None
                    failures += 1
                    self._report(error, failures)
                    self._stop.wait(_backoff(failures))
        finally:
            _close_quietly(pubsub)

    def _connect(self) -> PubSub:
        pubsub: PubSub = self._client.pubsub()  # type: ignore[no-untyped-call]  # redis-py leaves it bare
        try:
            pubsub.subscribe(self._channel)
            # Until Redis confirms, a notice published by another client may still be missed.
            deadline = time.monotonic() + OPERATION_TIMEOUT_S
            while (remaining := deadline - time.monotonic()) > 0:
                message = pubsub.get_message(timeout=remaining)
                if message is not None and message["type"] == "subscribe":
                    return pubsub
            raise RedisTimeoutError(f"no confirmation of SUBSCRIBE {self._channel}")
        except BaseException:
            _close_quietly(pubsub)
            raise

    def _pump(self, pubsub: PubSub) -> None:
        """Delivers notices until closed; raises when the connection is lost or has gone silent."""
        heard = time.monotonic()
        next_ping = heard + PING_EVERY_S
        while not self._stop.is_set():
            message: dict[str, Any] | None = pubsub.get_message(timeout=POLL_S)
            now = time.monotonic()
            if message is not None:
                heard = now
                if message["type"] == "message" and not self._stop.is_set():
                    self._deliver(message["data"])
            if now - heard > SILENCE_LIMIT_S:
                raise RedisTimeoutError(f"no reply from Redis for {now - heard:.1f} s")
            if now >= next_ping:
                pubsub.ping()
                next_ping = now + PING_EVERY_S

    def _deliver(self, data: bytes) -> None:
        try:
            notice = wire.decode_notice(data)
        except ValueError:
            log.warning("dropping a malformed message on %s", self._channel, exc_info=True)
            return
        try:
            self._handler(notice)
        except Exception:
            # One bad notice or handler bug must not end cancel routing for this process.
            log.exception("cancel handler failed for %s", notice)

    def _report(self, error: Exception, failures: int) -> None:
        if failures == 1 and isinstance(error, RedisError):
            log.warning("lost cancel channel %s, resubscribing: %s", self._channel, error)
        elif failures == 1:
            log.exception("cancel listener on %s failed, restarting it", self._channel)
        else:
            # The first failure was logged; while the outage lasts, say it quietly.
            log.debug("still cannot subscribe to %s: %s", self._channel, error)


def _backoff(failures: int) -> float:
    """Exponential, capped, with jitter so that many replicas do not reconnect in lockstep."""
    return backoff_delay(BACKOFF_FIRST, failures, cap=BACKOFF_MAX).total_seconds()


def _close_quietly(pubsub: PubSub | None) -> None:
    if pubsub is None:
        return
    try:
        pubsub.close()
    except Exception:
        log.debug("closing a pub/sub connection failed", exc_info=True)
