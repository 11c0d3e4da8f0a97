"""A job whose `env` references a secret, created through the server on a real Kafka: the message on the
run's topic carries the reference as the job holds it (the server never sees a value), on every store."""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator

import pytest
from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, TopicPartition

from jobmesh.adapters.queue.codec import decode, topic_of
from jobmesh.adapters.queue.kafka import KafkaRunQueue
from jobmesh.adapters.signals.factory import open_signals
from jobmesh.core.ports.pipeline_store import SchedulerStore
from jobmesh.server.app import Services, build_services
from jobmesh.server.config import ServerConfig
from jobmesh.v1 import job_pb2, job_service_pb2, run_pb2, search_service_pb2
from tests.server.conftest import Api
from tests.support import SUITE_LOOP_LAG, require_service_url

pytestmark = pytest.mark.kafka
ENV = {"TOKEN": "secret://TOKEN", "PLAIN": "visible"}


@pytest.fixture(scope="module")
def grpc_servicer(store: SchedulerStore) -> Iterator[Services]:
    queue = KafkaRunQueue(require_service_url("JOBMESH_KAFKA_BOOTSTRAP"), client_id="jobmesh-tests")
    signals = open_signals(f"memory://secrets-kafka-{uuid.uuid4().hex[:8]}")
    services = build_services(
        ServerConfig(listen="127.0.0.1:0", max_loop_lag=SUITE_LOOP_LAG), store, queue, signals
    )
    yield services
    services.close()
    signals.close()
    queue.close()


def messages_on(topic: str, count: int) -> list[bytes]:
    """The raw values of the topic's first `count` messages, read by assignment (no group)."""
    consumer = Consumer(
        {"bootstrap.servers": require_service_url("JOBMESH_KAFKA_BOOTSTRAP"), "group.id": "unused"}
    )
    try:
        partitions = consumer.list_topics(topic, timeout=10).topics[topic].partitions
        consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in partitions])
        values: list[bytes] = []
        deadline = time.monotonic() + 20
        while len(values) < count and time.monotonic() < deadline:
            for message in consumer.consume(10, 0.5):
                error = message.error()
                assert error is None or error.code() == KafkaError._PARTITION_EOF, error
                if error is None:
                    values.append(message.value() or b"")
        return values
    finally:
        consumer.close()


def queued(api: Api, name: str) -> None:
    """Waits for the server's publish (the bypass sends in batches, after the create's answer)."""
    deadline = time.monotonic() + 20
    while (
        api.search.GetRun(search_service_pb2.GetRunRequest(name=name)).run.state != run_pb2.RUN_STATE_QUEUED
    ):
        assert time.monotonic() < deadline, f"{name} was never queued"
        time.sleep(0.1)


def test_the_kafka_message_carries_the_reference(api: Api) -> None:
    queue = f"secrets-{uuid.uuid4().hex[:8]}"
    job = job_pb2.Job(
        target=job_pb2.Target(command=job_pb2.Target.Command(argv=["env"], env=ENV)), queue=queue
    )
    job.schedule.immediate.SetInParent()
    created = api.jobs.CreateJob(job_service_pb2.CreateJobRequest(job=job))
    queued(api, created.run.name)
    [value] = messages_on(topic_of(queue, "normal"), 1)
    run = decode(value, None)
    assert run.attempt.run == created.run.name
    assert dict(run.target.command.env) == ENV
    assert b"secret://TOKEN" in value
