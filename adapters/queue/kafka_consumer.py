"""The Kafka consumer side: one confluent Consumer per lane, in one group, polled in lane priority order."""

from __future__ import annotations

import hashlib
import json
import logging
import re
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, KafkaException, Message, TopicPartition

from jobmesh.adapters.queue import codec
from jobmesh.core.metrics import KAFKA_CONSUMER_LAG
from jobmesh.core.outage_log import OutageLog
from jobmesh.core.ports.queue import Delivery, QueueUnavailable

log = logging.getLogger(__name__)

MAX_POLL_INTERVAL_MS = 15000
CONSUMER_SETTINGS: dict[str, Any] = {
    "enable.auto.commit": False,  # committed only once the claim is recorded
    "enable.auto.offset.store": False,
    "auto.offset.reset": "earliest",  # runs published before the group first joined are still owed
    # Short session and heartbeat: a group (re)joins in ~3 s instead of ~20 s.
    "session.timeout.ms": 6000,
    "heartbeat.interval.ms": 500,
    # Also the broker's wait, in a rebalance, for members to join again: a member that dies in the middle of
    # a join is kept that long, and its group's partitions wait with it (at librdkafka's 5 minutes, a killed
    # executor could stop its queue for 5 minutes). The claim loop polls all the time while in the group (a
    # busy or out-of-contact executor steps aside), except while its claims wait for a server out of reach:
    # past this it leaves the group, and joins again at its next poll. At least the session timeout.
    "max.poll.interval.ms": MAX_POLL_INTERVAL_MS,
    "partition.assignment.strategy": "cooperative-sticky",
}
# While idle, poll() blocks on one lane at a time for this long: a message on any lane waits ~2 slices.
WAIT_SLICE = 0.01

# How long step_aside() serves the consumers for their leave to be sent and their partitions revoked.
STEP_ASIDE_WAIT = 2.0

# How long an assignment waits for the group's committed offsets (each ask up to COMMITTED_ASK) before it
# leaves them to librdkafka.
COMMITTED_WAIT = 10.0
# How long close() waits for its lanes' consumers to close. librdkafka's close can wait without end for a
# group rebalance that no other member finishes; past this the lane's consumer is left behind (its thread
# does not keep the process alive) and its partitions go to the others after the group's session timeout.
CLOSE_WAIT = 10.0
COMMITTED_ASK = 2.0

# A lane consumer whose group has looked for its coordinator this long, with nothing assigned, while another
# lane's group has found its own (Kafka answers), is opened again (see `CoordinatorWatch`); librdkafka reports
# the group's state this often.
LOST_COORDINATOR_MS = 20000
# When every lane looks for its coordinator, Kafka itself is away most likely: a consumer opened again has
# nothing to reach either, and when the broker returns it joins its group seconds later than the one it
# replaced (a Kafka stopped 30 s: runs taken 2.6 s after its return instead of at once). They are opened again
# only past this, in case all of them are stuck.
ALL_LANES_LOST_MS = 120000
STATISTICS_INTERVAL_MS = 5000
_SEEKING_COORDINATOR = frozenset({"query-coord", "wait-coord", "wait-broker", "wait-broker-transport"})

# How long commit() retries while the group rebalances before it gives up (the runs then come again).
COMMIT_REBALANCE_WAIT = 5.0
_REBALANCING = {KafkaError.ILLEGAL_GENERATION, KafkaError.REBALANCE_IN_PROGRESS, KafkaError.UNKNOWN_MEMBER_ID}

TopicPartitionKey = tuple[str, int]


@dataclass(frozen=True, slots=True)
class KafkaPosition:
    """The commit handle of one Kafka delivery (`Delivery.token`)."""

    lane: str
    topic: str
    partition: int
    offset: int


class _Ledger:
    """Per partition of one lane: the last offset handed out and the committed position, so that a skipped
    malformed message is committed only once every delivery before it is. A Kafka commit is a position:
    committing past a delivery the caller has not committed yet would lose it in a crash."""

    def __init__(self) -> None:
        self._handed: dict[TopicPartitionKey, int] = {}
        self._committed: dict[TopicPartitionKey, int] = {}
        self._skipped: dict[TopicPartitionKey, list[tuple[int, int]]] = {}

    def handed(self, tp: TopicPartitionKey, offset: int) -> None:
        self._handed[tp] = offset

    def skip(self, tp: TopicPartitionKey, offset: int) -> int | None:
        """The position to commit now for a skipped message, or None when it must wait for earlier ones."""
        last = self._handed.get(tp)
        if last is None or self._committed.get(tp, -1) > last:
            return offset + 1
        self._skipped.setdefault(tp, []).append((offset, last))
        return None

    def position(self, tp: TopicPartitionKey, offset: int) -> int:
        """The position to commit for a delivery, including skipped messages it has caught up with."""
        position = offset + 1
        pending = self._skipped.get(tp, [])
        while pending and position > pending[0][1]:
            position = max(position, pending.pop(0)[0] + 1)
        return position

    def committed(self, tp: TopicPartitionKey, position: int) -> None:
        self._committed[tp] = max(position, self._committed.get(tp, -1))


class CoordinatorWatch:
    """Whether a lane consumer's group is lost, from librdkafka's statistics (its `stats_cb`, which consume()
    serves). A broker that comes back from a stall can answer metadata without itself; the client then drops
    the only broker it knew and should start again from `bootstrap.servers`. A consumer that misses that
    start (librdkafka 2.16, one lane of three, after Kafka was frozen for 12 s) looks for its group's
    coordinator with no broker to ask, and its lane takes nothing until it is opened again."""

    def __init__(self) -> None:
        self.lost_ms = 0  # how long the group has looked for its coordinator, with nothing assigned
        self.coordinated = False  # the group has its coordinator: Kafka answers this consumer
        # Set by the lane's reader on a fatal error: the consumer will never take anything again. A static
        # member whose session ran out while the broker was away rejoins under a new id and is then fenced by
        # that very rejoin (librdkafka's issue 3437); opened again, it takes its partitions back at once.
        self.failed: KafkaError | None = None

    def __call__(self, statistics: str) -> None:
        parsed = json.loads(statistics)
        _measure_lag(parsed)
        group = parsed.get("cgrp") or {}
        seeking = group.get("state") in _SEEKING_COORDINATOR and not group.get("assignment_size")
        self.lost_ms = int(group.get("stateage", 0)) if seeking else 0
        self.coordinated = group.get("state") == "up"

    @property
    def lost(self) -> bool:
        """The group has looked for its coordinator, with nothing assigned, for `LOST_COORDINATOR_MS`."""
        return self.lost_ms >= LOST_COORDINATOR_MS


# What the broker accepts as a `group.instance.id` (Kafka's JoinGroup checks it).
_INSTANCE_ID = re.compile(r"[A-Za-z0-9._-]{1,200}")


def instance_id(member: str, lane: str) -> str:
    """A lane consumer's static member id: the member's name when Kafka accepts it as one, else a digest of
    it (an executor may be named with any characters; two names must never map to one id)."""
    name = f"{member}.{lane}"
    if _INSTANCE_ID.fullmatch(name):
        return name
    return f"member-{hashlib.sha256(name.encode()).hexdigest()[:40]}"


def _measure_lag(statistics: Mapping[str, Any]) -> None:
    """The consumer lag of each topic, over the partitions assigned here (librdkafka's statistics, read
    every STATISTICS_INTERVAL_MS: no call to the broker of its own)."""
    for topic, found in (statistics.get("topics") or {}).items():
        lags = [
            partition.get("consumer_lag", -1)
            for key, partition in (found.get("partitions") or {}).items()
            if key != "-1"
        ]
        KAFKA_CONSUMER_LAG(topic).set(sum(lag for lag in lags if lag >= 0))


# Opens a lane's subscribed consumer: (lane, topics) -> (consumer, its watch).
OpenLane = Callable[[str, Sequence[str]], tuple[Consumer, CoordinatorWatch]]


def lane_opener(base: Mapping[str, Any], group: str, member: str = "") -> OpenLane:
    """Opens a lane's subscribed Consumer, in a group of the lane's own (`{group}.{lane}`): the lanes'
    members never rebalance against each other.

    With a `member` name the consumer is a static member (`group.instance.id`). A dynamic member that loses
    its coordinator for longer than its session (Kafka stopped 30 s) joins again under a new id, and the
    group waits for the old id's session to run out, 6 s, before anyone takes anything; a static one takes
    its partitions back as soon as the broker answers, as does an executor started again under its name."""

    def open_lane(lane: str, topics: Sequence[str]) -> tuple[Consumer, CoordinatorWatch]:
        watch = CoordinatorWatch()
        consumer = Consumer(
            {
                **CONSUMER_SETTINGS,
                **base,
                "group.id": f"{group}.{lane}",
                "client.id": f"{base['client.id']}-{lane}",
                **({"group.instance.id": instance_id(member, lane)} if member else {}),
                "statistics.interval.ms": STATISTICS_INTERVAL_MS,
                "stats_cb": watch,
            }
        )
        try:
            _subscribe(consumer, topics)
        except KafkaException:
            consumer.close()
            raise
        return consumer, watch

    return open_lane


class KafkaRunConsumer:
    """A RunConsumer over one Consumer per lane. Not thread-safe: one executor thread polls and commits."""

    def __init__(
        self,
        open_lane: OpenLane,
        topics: Mapping[str, Sequence[str]],
        on_close: Callable[[KafkaRunConsumer], None],
    ) -> None:
        """One consumer per lane of `topics`, opened by `open_lane`; all are closed again if any fails."""
        self._open_lane = open_lane
        self._topics = {lane: list(lane_topics) for lane, lane_topics in topics.items()}
        self._consumers: dict[str, Consumer] = {}
        self._watches: dict[str, CoordinatorWatch] = {}
        try:
            for lane, lane_topics in self._topics.items():
                self._consumers[lane], self._watches[lane] = open_lane(lane, lane_topics)
        except KafkaException as exc:
            for consumer in self._consumers.values():
                consumer.close()
            raise QueueUnavailable(f"cannot open Kafka consumers: {exc}") from exc
        self._aside = False
        self._ledgers = {lane: _Ledger() for lane in self._consumers}
        # Errors come with every failed reconnection while a broker is away: logged once an outage, by lane.
        self._lane_outages = {
            lane: OutageLog(log, f"the Kafka consumer's {lane} lane") for lane in self._consumers
        }
        self._order = codec.LaneOrder()
        self._on_close = on_close
        self._closed = False

    def poll(self, max_items: int, timeout: float) -> list[Delivery]:
        if self._closed:
            raise RuntimeError("the consumer is closed")
        self._reopen_lost_lanes()
        deadline = time.monotonic() + timeout
        order = self._order.next()
        batch = self._sweep(order, max_items)
        turn = 0
        # No cross-consumer wait exists in confluent-kafka: block on each lane in turn for a short slice.
        while not batch and max_items > 0 and (remaining := deadline - time.monotonic()) > 0:
            lane = order[turn % len(order)]
            turn += 1
            batch = self._take(lane, 1, min(WAIT_SLICE, remaining))
            if batch:
                batch += self._sweep(order, max_items - len(batch))
        return batch

    def commit(self, deliveries: Sequence[Delivery]) -> None:
        highest: dict[str, dict[TopicPartitionKey, int]] = {}
        for delivery in deliveries:
            token = delivery.token
            if not isinstance(token, KafkaPosition):
                raise TypeError(f"not a Kafka delivery: {token!r}")
            lane_highest = highest.setdefault(token.lane, {})
            tp = (token.topic, token.partition)
            lane_highest[tp] = max(token.offset, lane_highest.get(tp, -1))
        for lane, offsets in highest.items():
            ledger = self._ledgers[lane]
            self._commit(lane, {tp: ledger.position(tp, offset) for tp, offset in offsets.items()})

    def step_aside(self) -> None:
        """Leaves the groups, so that their partitions move to the other members at once: a member that
        merely stops polling keeps them until `max.poll.interval.ms`, and paused partitions stay its own."""
        if self._aside:
            return
        self._aside = True
        try:
            _leave(list(self._consumers.values()))
        except KafkaException as exc:
            raise QueueUnavailable(f"cannot leave the Kafka group: {exc}") from exc

    def rejoin(self) -> None:
        if not self._aside:
            return
        try:
            for lane, consumer in self._consumers.items():
                _subscribe(consumer, self._topics[lane])
        except KafkaException as exc:
            raise QueueUnavailable(f"cannot rejoin the Kafka group: {exc}") from exc
        self._aside = False

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        # In parallel: a lane consumer closing in the middle of a group join waits for the join, which waits
        # for the group's other members, the other lanes, to answer; they answer only while being served.
        closers = [
            threading.Thread(target=_close_lane, args=(lane, consumer), name=f"close-{lane}", daemon=True)
            for lane, consumer in self._consumers.items()
        ]
        for closer in closers:
            closer.start()
        deadline = time.monotonic() + CLOSE_WAIT
        for lane, closer in zip(self._consumers, closers, strict=True):
            closer.join(max(deadline - time.monotonic(), 0.0))
            if closer.is_alive():
                log.warning(
                    "the %s lane's Kafka consumer did not close within %.0f s: left behind", lane, CLOSE_WAIT
                )
        self._on_close(self)

    def _reopen_lost_lanes(self) -> None:
        if self._aside:
            return  # out of the groups on purpose
        kafka_answers = any(watch.coordinated for watch in self._watches.values())
        for lane, watch in self._watches.items():
            if watch.failed is not None:
                log.warning(
                    "the %s lane's Kafka consumer failed for good, opening it again: %s", lane, watch.failed
                )
            elif watch.lost and (kafka_answers or watch.lost_ms >= ALL_LANES_LOST_MS):
                log.warning(
                    "the %s lane's Kafka consumer has found no group coordinator for %d s: opening it again",
                    lane,
                    watch.lost_ms // 1000,
                )
            else:
                continue
            try:
                opened = self._open_lane(lane, self._topics[lane])
            except KafkaException as exc:  # the lost one stays, and is opened again at the next poll
                raise QueueUnavailable(f"cannot open the {lane} lane's Kafka consumer again: {exc}") from exc
            _close_lane(lane, self._consumers[lane], leave=watch.failed is None)
            self._consumers[lane], self._watches[lane] = opened
            self._ledgers[lane] = _Ledger()  # the new member starts at the group's committed offsets

    def _sweep(self, order: Sequence[str], max_items: int) -> list[Delivery]:
        """What is already fetched, in lane order, without waiting."""
        batch: list[Delivery] = []
        for lane in order:
            if len(batch) >= max_items:
                break
            batch += self._take(lane, max_items - len(batch), 0)
        return batch

    def _take(self, lane: str, max_items: int, timeout: float) -> list[Delivery]:
        try:
            messages = self._consumers[lane].consume(num_messages=max_items, timeout=timeout)
        except KafkaException as exc:
            raise QueueUnavailable(f"Kafka consume failed: {exc}") from exc
        deliveries = []
        for message in messages:
            delivery = self._delivery(lane, message)
            if delivery is not None:
                deliveries.append(delivery)
        return deliveries

    def _delivery(self, lane: str, message: Message) -> Delivery | None:
        error = message.error()
        if error is not None:
            # librdkafka reports a consumer's fatal error as an event of code _FATAL, not flagged fatal.
            if error.fatal() or error.code() == KafkaError._FATAL:
                self._watches[lane].failed = error  # opened again at the next poll
                return None
            if error.code() != KafkaError._PARTITION_EOF:
                self._lane_outages[lane].failed(str(error))
            return None
        self._lane_outages[lane].succeeded()
        headers = _headers(message)
        topic, partition, offset = message.topic() or "", message.partition() or 0, message.offset() or 0
        tp = (topic, partition)
        try:
            run = codec.decode(message.value(), headers.get(codec.CONTENT_TYPE_HEADER))
        except codec.MalformedMessage as exc:
            log.warning("skipping malformed message %s[%d]@%d: %s", topic, partition, offset, exc)
            position = self._ledgers[lane].skip(tp, offset)
            if position is not None:
                self._commit(lane, {tp: position})
            return None
        self._ledgers[lane].handed(tp, offset)
        token = KafkaPosition(lane, topic, partition, offset)
        return Delivery(run=run, lane=lane, token=token, trace_context=codec.trace_context_of(headers))

    def _commit(self, lane: str, positions: Mapping[TopicPartitionKey, int]) -> None:
        # Explicit offsets (never "the current ones"): a commit with nothing new would raise _NO_OFFSET.
        offsets = [TopicPartition(topic, partition, pos) for (topic, partition), pos in positions.items()]
        results = _commit_through_rebalance(self._consumers[lane], offsets)
        for result in results:
            if result.error is not None:
                where = f"{result.topic}[{result.partition}]"
                raise QueueUnavailable(f"Kafka commit failed for {where}: {result.error}")
            self._ledgers[lane].committed((result.topic, result.partition), result.offset)


def _subscribe(consumer: Consumer, topics: Sequence[str]) -> None:
    consumer.subscribe(list(topics), on_assign=_start_at_committed)


def _start_at_committed(consumer: Consumer, partitions: list[TopicPartition]) -> None:
    """Starts newly assigned partitions at the group's committed offsets, read here. Left to itself,
    librdkafka reads them with one OffsetFetch, and when the broker refuses it as a whole (NOT_COORDINATOR,
    as a broker that stalled does while it loads its groups again) it never asks again: the partitions stay
    assigned and are never fetched (librdkafka 2.16). A partition nothing was committed for starts at its
    beginning, as `auto.offset.reset` says."""
    committed = _committed(consumer, partitions)
    if committed is None:
        log.warning("committed offsets unknown: librdkafka reads them for %d partitions", len(partitions))
        consumer.incremental_assign(partitions)
        return
    for partition in committed:
        if partition.offset < 0:
            partition.offset = OFFSET_BEGINNING
    consumer.incremental_assign(committed)


def _committed(consumer: Consumer, partitions: list[TopicPartition]) -> list[TopicPartition] | None:
    deadline = time.monotonic() + COMMITTED_WAIT
    while True:
        try:
            committed = consumer.committed(partitions, timeout=COMMITTED_ASK)
            if not any(partition.error is not None for partition in committed):
                return committed
        except KafkaException as exc:
            log.info("reading committed offsets: %s", exc)
        if time.monotonic() >= deadline:
            return None
        time.sleep(0.1)


def _commit_through_rebalance(consumer: Consumer, offsets: list[TopicPartition]) -> list[TopicPartition]:
    """A synchronous commit, retried while the group rebalances (any member joining or leaving, including
    this consumer's other lanes at start-up, makes the broker refuse commits of the old generation)."""
    deadline = time.monotonic() + COMMIT_REBALANCE_WAIT
    while True:
        try:
            return consumer.commit(offsets=offsets, asynchronous=False) or []
        except KafkaException as exc:
            if exc.args[0].code() not in _REBALANCING or time.monotonic() >= deadline:
                raise QueueUnavailable(f"Kafka commit failed (the runs will come again): {exc}") from exc
        time.sleep(0.1)  # librdkafka rejoins in the background; the retry carries the new generation


def _leave(consumers: Sequence[Consumer]) -> None:
    """Leaves the consumers' groups, so that their partitions move to the other members at once rather than
    after a session timeout. Through unsubscribe(): a static member's close() does not leave."""
    for consumer in consumers:
        consumer.unsubscribe()
    # The leave is sent while the consumer is served: serve it until the partitions are gone. Whatever comes
    # meanwhile is not committed, so it goes to the partitions' next owner.
    deadline = time.monotonic() + STEP_ASIDE_WAIT
    while any(c.assignment() for c in consumers) and time.monotonic() < deadline:
        for consumer in consumers:
            consumer.consume(num_messages=1, timeout=WAIT_SLICE)


def _close_lane(lane: str, consumer: Consumer, *, leave: bool = True) -> None:
    """`leave`: False for a consumer that failed for good, which can no longer send anything."""
    try:
        if leave:
            _leave([consumer])
    except (KafkaException, RuntimeError) as exc:
        log.warning("leaving the %s lane's group: %s", lane, exc)
    try:
        consumer.close()
    except (KafkaException, RuntimeError) as exc:
        log.warning("closing the %s lane consumer: %s", lane, exc)


def _headers(message: Message) -> dict[str, str]:
    raw = message.headers() or []
    pairs = raw.items() if isinstance(raw, dict) else raw
    return {
        name: value.decode(errors="replace") if isinstance(value, bytes) else value or ""
        for name, value in pairs
    }
