"""Choosing the adapter by URL."""

from __future__ import annotations

import pytest

from jobmesh.adapters.queue.factory import KafkaQueueAddress, open_queue, parse_queue_url
from jobmesh.adapters.queue.kafka import KafkaRunQueue
from jobmesh.adapters.queue.memory import MemoryRunQueue


def test_memory_urls_with_one_name_share_one_queue() -> None:
    first, again, other = (
        open_queue("memory://factory-test"),
        open_queue("memory://factory-test"),
        open_queue("memory://"),
    )
    assert isinstance(first, MemoryRunQueue)
    assert first is again
    assert other is not first


@pytest.mark.parametrize(
    "url",
    [
        "kafka://127.0.0.1:1",
        "kafka://a:1,b.example:2",
        "127.0.0.1:1",
        "a:1, b:2",
        "kafka://[::1]:1?partitions=6&client_id=w",
    ],
)
def test_kafka_urls_and_bare_bootstrap_lists_open_kafka(url: str) -> None:
    queue = open_queue(url)
    try:
        assert isinstance(queue, KafkaRunQueue)
    finally:
        queue.close()


@pytest.mark.parametrize(
    "url",
    [
        "",
        "redis://localhost:6379",
        "kafka://",
        "kafka://host-without-port",
        "localhost",
        "memory://bad/name",
        "kafka://a:1?partitions=0",
        "kafka://a:1?acks=0",
        "kafka://a:1?partitions",
        "kafka://a:1?security_protocol=SASL_SSL",
        "kafka://a:1?ssl_password=x",
    ],
)
def test_anything_else_is_refused_clearly(url: str) -> None:
    with pytest.raises(ValueError, match=r"queue|Kafka|partitions|name|bootstrap"):
        open_queue(url)


def test_kafka_tls_settings_pass_to_librdkafka_by_their_names() -> None:
    url = (
        "kafka://broker:9093?security_protocol=ssl&ssl_ca_location=/etc/kafka/ca.pem"
        "&ssl_certificate_location=/etc/kafka/client.pem&ssl_key_location=/etc/kafka/client.key"
    )
    address = parse_queue_url(url)
    assert isinstance(address, KafkaQueueAddress)
    assert dict(address.security) == {
        "security.protocol": "SSL",
        "ssl.ca.location": "/etc/kafka/ca.pem",
        "ssl.certificate.location": "/etc/kafka/client.pem",
        "ssl.key.location": "/etc/kafka/client.key",
    }
    plain = parse_queue_url("kafka://broker:9092")
    assert isinstance(plain, KafkaQueueAddress)
    assert plain.security == ()


def test_kafka_timeouts_are_milliseconds_of_at_least_100() -> None:
    address = parse_queue_url("kafka://broker:9092?session_timeout_ms=2000&delivery_timeout_ms=3000")
    assert isinstance(address, KafkaQueueAddress)
    assert (address.session_timeout_ms, address.delivery_timeout_ms) == (2000, 3000)
    for bad in ("delivery_timeout_ms=99", "delivery_timeout_ms=3s", "session_timeout_ms=-1"):
        with pytest.raises(ValueError, match="must be a number of milliseconds"):
            parse_queue_url(f"kafka://broker:9092?{bad}")
