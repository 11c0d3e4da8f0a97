"""The Kafka adapter of the queue port (confluent-kafka, i.e. librdkafka).

One idempotent producer per queue object, shared by every publishing thread; one consumer per lane in each
`consumer()` (see `kafka_consumer.py`). Topics are created on first use, so brokers with auto-create off work.
"""

from __future__ import annotations

import concurrent.futures
import logging
import threading
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from confluent_kafka import KafkaError, KafkaException, Producer
from confluent_kafka.admin import AdminClient
from confluent_kafka.cimpl import NewTopic  # its typed home; confluent_kafka.admin re-exports it untyped

from jobmesh.adapters.queue import codec
from jobmesh.adapters.queue.codec import DEAD_LETTER_TOPIC, LANES, lane_of, topic_of
from jobmesh.adapters.queue.kafka_consumer import MAX_POLL_INTERVAL_MS, KafkaRunConsumer, lane_opener
from jobmesh.control.v1 import dispatch_pb2
from jobmesh.core.outage_log import OutageLog
from jobmesh.core.ports.queue import QueueUnavailable

log = logging.getLogger(__name__)

PRODUCER_SETTINGS: dict[str, Any] = {
    "enable.idempotence": True,  # librdkafka's retries never duplicate or reorder
    "acks": "all",
    "linger.ms": 5,  # a few ms of batching buys the throughput; publish() flushes, so no added latency
    "batch.num.messages": 10000,
    "compression.type": "lz4",  # cheap, and small protobuf runs of one batch compress well
    "message.timeout.ms": 30000,
    # Java's partitioner, so producers in other languages put a job's runs on the same partition as we do.
    "partitioner": "murmur2_random",
}
# How long publish() waits in one flush before checking its own deliveries (other threads may be producing).
FLUSH_SLICE = 0.1
PURGE_WAIT = 0.2  # seconds a failed publish may spend dropping what it queued
PROBE_METADATA_TIMEOUT_S = 1.5  # under the readiness probe's own timeout (core/readiness.py)
RECONNECT_BACKOFF_MAX_MS = 500


class _LibrdkafkaLog(logging.LoggerAdapter[logging.Logger]):
    """librdkafka's own log lines (it calls `log(level, "%s [%s] %s", facility, client, text)`). It logs
    every failed connection, twenty a second per client while a broker is away: those (facility FAIL) go to
    DEBUG, as the clients' error callbacks say once an outage that the broker is away (`OutageLog`)."""

    def log(self, level: int, msg: object, *args: object, **kwargs: Any) -> None:
        if args and args[0] == "FAIL":
            level = logging.DEBUG
        super().log(level, msg, *args, **kwargs)


_LIBRDKAFKA_LOG = _LibrdkafkaLog(log)


class _Acks:
    """Counts one publish() call's delivery reports; called from whichever thread serves the callbacks."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.pending = 0
        self.failed = 0
        self.timed_out = 0
        self.first_error: KafkaError | None = None

    def expect(self) -> None:
        with self._lock:
            self.pending += 1

    def __call__(self, error: KafkaError | None, _message: object) -> None:
        with self._lock:
            self.pending -= 1
            if error is not None:
                self.failed += 1
                self.timed_out += error.code() == KafkaError._MSG_TIMED_OUT
                self.first_error = self.first_error or error


class _Topics:
    """Creates topics once per process, tolerating ones that exist already. An admin client whose request
    timed out is replaced: against a broker that stalled (frozen, then let go) it can stay wedged for good."""

    def __init__(self, new_admin: Callable[[], AdminClient], partitions: int) -> None:
        self._new_admin = new_admin
        self._admin = new_admin()
        self._partitions = partitions
        self._known: set[str] = set()
        self._lock = threading.Lock()

    def ensure(self, topics: Iterable[str], timeout: float) -> None:
        with self._lock:
            missing = sorted(set(topics) - self._known)
        if not missing:
            return
        deadline = time.monotonic() + timeout
        admin = self._admin
        try:
            futures = admin.create_topics(
                [NewTopic(topic, num_partitions=self._partitions) for topic in missing],
                request_timeout=timeout,
                operation_timeout=timeout,
            )
        except KafkaException as exc:
            raise QueueUnavailable(f"cannot create topics {missing}: {exc}") from exc
        try:
            for topic, future in futures.items():
                self._await_created(topic, future, deadline)
                with self._lock:
                    self._known.add(topic)
        except QueueUnavailable as exc:
            if isinstance(exc.__cause__, concurrent.futures.TimeoutError):
                with self._lock:
                    if self._admin is admin:
                        self._admin = self._new_admin()
            raise
        finally:
            admin.poll(0)  # serves librdkafka's log lines to `log`

    def forget(self, topics: Iterable[str]) -> None:
        """After a failed publish: the broker may have lost them (wiped, or recreated without auto-create)."""
        with self._lock:
            self._known.difference_update(topics)

    @staticmethod
    def _await_created(topic: str, future: concurrent.futures.Future[None], deadline: float) -> None:
        try:
            future.result(timeout=max(0.0, deadline - time.monotonic()))
        except concurrent.futures.TimeoutError as exc:
            raise QueueUnavailable(f"cannot create topic {topic}: broker did not answer in time") from exc
        except KafkaException as exc:
            if exc.args[0].code() != KafkaError.TOPIC_ALREADY_EXISTS:
                raise QueueUnavailable(f"cannot create topic {topic}: {exc}") from exc


class KafkaRunQueue:
    """The run queue on Kafka. Thread-safe for publishing; each consumer belongs to one thread."""

    durable = True
    in_process_id = ""

    def __init__(
        self,
        bootstrap: str,
        *,
        client_id: str = "jobmesh",
        partitions: int = 3,
        admin_timeout: float = 10.0,
        session_timeout_ms: int | None = None,
        delivery_timeout_ms: int | None = None,
        security: Mapping[str, str] | None = None,
    ) -> None:
        """`session_timeout_ms`: how soon a consumer that died stops holding its partitions (the broker's
        `group.min.session.timeout.ms` bounds it; 6 s by default, the floor of a stock broker).
        `delivery_timeout_ms`: how long the producer keeps trying a message before it reports it undelivered
        (30 s by default); the watcher sends what was not acknowledged again. `security`: librdkafka's TLS
        settings (`security.protocol`, `ssl.ca.location`, ...), for every client."""
        self._base: dict[str, Any] = {
            "bootstrap.servers": bootstrap,
            "client.id": client_id,
            "logger": _LIBRDKAFKA_LOG,
            # librdkafka backs off up to 10 s between reconnections: after an outage a client would wait that
            # long for a broker already back. Half a second at most, for every client.
            "reconnect.backoff.max.ms": RECONNECT_BACKOFF_MAX_MS,
            **(security or {}),
        }
        self._consumer_settings = (
            {
                "session.timeout.ms": session_timeout_ms,
                "max.poll.interval.ms": max(session_timeout_ms, MAX_POLL_INTERVAL_MS),
            }
            if session_timeout_ms
            else {}
        )
        self._producer_settings = {
            **PRODUCER_SETTINGS,
            **({"message.timeout.ms": delivery_timeout_ms} if delivery_timeout_ms else {}),
        }
        self._admin_timeout = admin_timeout
        self._topics = _Topics(lambda: AdminClient(dict(self._base)), partitions)
        self._lock = threading.Lock()
        self._producer_broken = False
        # librdkafka reports each failed reconnection while a broker is away: logged once an outage.
        self._producer_outage = OutageLog(log, "the Kafka producer's connection")
        self._producer = self._new_producer()
        self._consumers: list[KafkaRunConsumer] = []
        self._closed = False

    def publish(self, runs: Sequence[dispatch_pb2.DispatchedRun], *, timeout: float = 5.0) -> None:
        self._send([(topic_of(run.queue, lane_of(run)), run) for run in runs], timeout)

    def publish_dead_letters(
        self, runs: Sequence[dispatch_pb2.DispatchedRun], *, timeout: float = 5.0
    ) -> None:
        self._send([(DEAD_LETTER_TOPIC, run) for run in runs], timeout)

    def consumer(self, group: str, queues: Sequence[str], *, member: str = "") -> KafkaRunConsumer:
        if not queues:
            raise ValueError("a consumer needs at least one executor queue")
        topics = {lane: [topic_of(queue, lane) for queue in queues] for lane in LANES}
        self._topics.ensure((topic for lane in LANES for topic in topics[lane]), self._admin_timeout)
        open_lane = lane_opener({**self._base, **self._consumer_settings}, group, member)
        consumer = KafkaRunConsumer(open_lane, topics, self._forget)
        with self._lock:
            self._consumers.append(consumer)
        return consumer

    def check_reachable(self) -> None:
        """A metadata request through the producer's own connections: no client of its own per probe."""
        try:
            self._producer.list_topics(timeout=PROBE_METADATA_TIMEOUT_S)
        except KafkaException as exc:
            raise QueueUnavailable(f"the broker did not answer: {exc}") from exc

    def close(self) -> None:
        with self._lock:
            if self._closed:
                return
            self._closed = True
            consumers, self._consumers = self._consumers, []
        for consumer in consumers:
            consumer.close()
        remaining = self._producer.flush(self._admin_timeout)
        if remaining:
            log.warning("closing the Kafka producer with %d runs undelivered", remaining)
        self._producer.close()

    def _send(self, items: Sequence[tuple[str, dispatch_pb2.DispatchedRun]], timeout: float) -> None:
        if not items:
            return
        deadline = time.monotonic() + timeout
        topics = {topic for topic, _ in items}
        self._topics.ensure(topics, timeout)
        try:
            self._deliver(items, deadline, timeout)
        except QueueUnavailable:
            self._topics.forget(topics)
            raise
        self._producer_outage.succeeded()

    def _deliver(
        self, items: Sequence[tuple[str, dispatch_pb2.DispatchedRun]], deadline: float, timeout: float
    ) -> None:
        producer = self._current_producer()
        acks = _Acks()
        try:
            self._produce_all(producer, items, acks, deadline)
            self._await_acks(producer, acks, deadline)
        except KafkaException as exc:
            raise QueueUnavailable(f"Kafka publish failed: {exc}") from exc
        finally:
            unacknowledged = acks.pending  # before the purge turns them into "purged" delivery reports
            if unacknowledged:
                self._drop_queued(producer)
            if unacknowledged or acks.timed_out:
                # A producer whose requests timed out against a broker that stalled can stay wedged after the
                # broker returns (seen with a frozen broker: it dropped the only broker it knew, and every
                # message timed out after): the next publish starts on a fresh one.
                with self._lock:
                    self._producer_broken = True
        if unacknowledged:
            raise QueueUnavailable(f"{unacknowledged} of {len(items)} runs unacknowledged after {timeout}s")
        if acks.failed:
            raise QueueUnavailable(f"{acks.failed} of {len(items)} runs not delivered: {acks.first_error}")

    def _produce_all(
        self,
        producer: Producer,
        items: Sequence[tuple[str, dispatch_pb2.DispatchedRun]],
        acks: _Acks,
        deadline: float,
    ) -> None:
        for topic, run in items:
            key = codec.job_key(run).encode()
            headers = codec.headers_of(run)
            while True:
                try:
                    producer.produce(topic, codec.encode(run), key, headers=headers, on_delivery=acks)
                    break
                except BufferError:  # librdkafka's queue is full: let it drain, within our time
                    if time.monotonic() >= deadline:
                        raise QueueUnavailable("Kafka producer queue full") from None
                    producer.poll(0.05)
            acks.expect()

    @staticmethod
    def _await_acks(producer: Producer, acks: _Acks, deadline: float) -> None:
        # flush() rather than poll(): it sends at once instead of lingering. In slices, because it also waits
        # for other threads' messages, and ours may be done first.
        while acks.pending and (remaining := deadline - time.monotonic()) > 0:
            producer.flush(min(remaining, FLUSH_SLICE))

    @staticmethod
    def _drop_queued(producer: Producer) -> None:
        # Runs still queued after a failed publish would otherwise go out whenever the broker returns, on top
        # of the caller's retry, and pile up while it is down. In-flight ones may still land (at-least-once).
        # A loaded machine showed messages left after one purge (moving between librdkafka's queues as it
        # ran, or their purge reports not yet served by poll): purged again, briefly, until none is left.
        ends = time.monotonic() + PURGE_WAIT
        while True:
            producer.purge(in_queue=True, in_flight=False, blocking=True)
            producer.poll(0)
            if not len(producer) or time.monotonic() >= ends:
                return
            time.sleep(0.01)

    def _new_producer(self) -> Producer:
        return Producer({**self._base, **self._producer_settings, "error_cb": self._on_producer_error})

    def _on_producer_error(self, error: KafkaError) -> None:
        if error.fatal():  # e.g. an idempotence sequence gap: this producer will never send again
            log.error("Kafka producer failed for good, replacing it: %s", error)
            self._producer_broken = True
        else:
            self._producer_outage.failed(str(error))

    def _current_producer(self) -> Producer:
        with self._lock:
            if self._closed:
                raise QueueUnavailable("the queue is closed")
            if self._producer_broken:
                old, self._producer = self._producer, self._new_producer()
                self._producer_broken = False
                old.purge()
                old.close()
            return self._producer

    def _forget(self, consumer: KafkaRunConsumer) -> None:
        with self._lock:
            if consumer in self._consumers:
                self._consumers.remove(consumer)
