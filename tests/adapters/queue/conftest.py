"""One contract suite, every adapter: the `backend` fixture runs each test in-process and on Kafka.

Kafka comes from JOBMESH_KAFKA_BOOTSTRAP (skipped locally, failed under CI when unset). One KafkaRunQueue (one
producer) serves a whole module; each test gets its own executor queue name, so its own topics and groups.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from jobmesh.adapters.queue.kafka import KafkaRunQueue
from jobmesh.adapters.queue.memory import MemoryRunQueue
from tests.adapters.queue.support import Backend, KafkaSideDoor, unique_name
from tests.support import require_service_url


@pytest.fixture(scope="session")
def kafka_bootstrap() -> str:
    return require_service_url("JOBMESH_KAFKA_BOOTSTRAP")


@pytest.fixture(scope="module")
def kafka_queue(kafka_bootstrap: str) -> Iterator[KafkaRunQueue]:
    queue = KafkaRunQueue(kafka_bootstrap, client_id="jobmesh-tests")
    yield queue
    queue.close()


@pytest.fixture(scope="module")
def kafka_side_door(kafka_bootstrap: str) -> Iterator[KafkaSideDoor]:
    door = KafkaSideDoor(kafka_bootstrap)
    yield door
    door.close()


def _memory_backend() -> Backend:
    queue = MemoryRunQueue()
    return Backend(
        kind="memory",
        queue=queue,
        name=unique_name(),
        inject_raw=lambda topic, _key, value: queue.publish_raw(topic, value),
        dead_letters=queue.dead_letters,
        settle=0.0,
    )


def _kafka_backend(request: pytest.FixtureRequest) -> Backend:
    door: KafkaSideDoor = request.getfixturevalue("kafka_side_door")
    return Backend(
        kind="kafka",
        queue=request.getfixturevalue("kafka_queue"),
        name=unique_name(),
        inject_raw=door.inject_raw,
        dead_letters=door.dead_letters,
        # A fetch of a partition can come a fetch later than the others' on a loaded machine: 0.5 s once
        # left 3 of 12 messages of one lane still to come.
        settle=2.0,
    )


@pytest.fixture(params=["memory", pytest.param("kafka", marks=pytest.mark.kafka)])
def backend(request: pytest.FixtureRequest) -> Iterator[Backend]:
    backend = _memory_backend() if request.param == "memory" else _kafka_backend(request)
    yield backend
    backend.close_consumers()
    if backend.kind == "memory":
        backend.queue.close()
