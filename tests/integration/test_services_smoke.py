"""Smoke tests of the real services that `make test` starts (tools/services/services.sh).

Each one talks to the service named by its environment variable: JOBMESH_KAFKA_BOOTSTRAP,
JOBMESH_REDIS_URL, JOBMESH_DATABASE_URL.
"""

from __future__ import annotations

import time
import uuid

import pytest

from tests.support import require_service_url

KAFKA_WAIT_SECONDS = 30.0


@pytest.mark.kafka
def test_kafka_produce_then_consume_in_a_group() -> None:
    from confluent_kafka import Consumer, KafkaError, KafkaException, Producer

    bootstrap = require_service_url("JOBMESH_KAFKA_BOOTSTRAP")
    suffix = uuid.uuid4().hex
    topic = f"jobmesh-smoke-{suffix}"
    key, value = b"job-1", f"hello {suffix}".encode()

    delivered: list[object] = []

    def on_delivery(err: KafkaError | None, msg: object) -> None:
        delivered.append(err or msg)

    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "enable.idempotence": True})
    try:
        producer.produce(topic, key=key, value=value, on_delivery=on_delivery)
        remaining = producer.flush(KAFKA_WAIT_SECONDS)
    finally:
        producer.close()
    assert remaining == 0, "the message was not delivered in time"
    assert len(delivered) == 1
    assert not isinstance(delivered[0], KafkaError), f"delivery failed: {delivered[0]}"

    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"jobmesh-smoke-{suffix}",
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
            "session.timeout.ms": 6000,
            "heartbeat.interval.ms": 500,
            "max.poll.interval.ms": 10000,
        }
    )
    try:
        consumer.subscribe([topic])
        deadline = time.monotonic() + KAFKA_WAIT_SECONDS
        received = None
        while received is None and time.monotonic() < deadline:
            msg = consumer.poll(0.5)
            if msg is None:
                continue
            if msg.error():
                raise KafkaException(msg.error())
            received = msg
        assert received is not None, f"no message consumed from {topic} in {KAFKA_WAIT_SECONDS:.0f}s"
        assert received.topic() == topic
        assert received.key() == key
        assert received.value() == value
        consumer.commit(message=received, asynchronous=False)
    finally:
        consumer.close()


@pytest.mark.redis
def test_redis_ping_set_with_ttl_get() -> None:
    import redis

    url = require_service_url("JOBMESH_REDIS_URL")
    client = redis.Redis.from_url(url, socket_timeout=5, socket_connect_timeout=5)
    try:
        assert client.ping() is True
        key = f"jobmesh:smoke:{uuid.uuid4().hex}"
        assert client.set(key, b"value", ex=30) is True
        assert client.get(key) == b"value"
        assert 0 < client.ttl(key) <= 30
        assert client.delete(key) == 1
    finally:
        client.close()


@pytest.mark.postgres
def test_postgres_version_is_15_or_newer() -> None:
    import sqlalchemy

    url = require_service_url("JOBMESH_DATABASE_URL")
    engine = sqlalchemy.create_engine(url)
    try:
        with engine.connect() as conn:
            version = conn.execute(sqlalchemy.text("select version()")).scalar_one()
            server_version_num = int(conn.execute(sqlalchemy.text("show server_version_num")).scalar_one())
    finally:
        engine.dispose()
    assert version.startswith("PostgreSQL "), version
    assert server_version_num >= 150000, version
