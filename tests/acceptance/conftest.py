"""Fixtures of the acceptance tests: a fresh database per module, and a mesh of processes per test."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.acceptance.mesh import Mesh
from tests.support import fresh_postgres_database, require_service_url


@pytest.fixture(scope="module")
def database() -> Iterator[str]:
    with fresh_postgres_database(require_service_url("JOBMESH_DATABASE_URL")) as url:
        yield url


@pytest.fixture
def mesh(tmp_path: Path, database: str) -> Iterator[Mesh]:
    kafka = require_service_url("JOBMESH_KAFKA_BOOTSTRAP")
    env = {
        "JOBMESH_DATABASE_URL": database,
        "JOBMESH_KAFKA_BOOTSTRAP": kafka,
        # A SIGKILLed executor's partitions pass to the others after 2 s (the test broker allows it).
        "JOBMESH_QUEUE_URL": f"kafka://{kafka}?session_timeout_ms=2000",
        "JOBMESH_REDIS_URL": require_service_url("JOBMESH_REDIS_URL"),
    }
    mesh = Mesh(tmp_path, env)
    try:
        yield mesh
    except BaseException:
        print(mesh.logs())
        raise
    finally:
        mesh.close()
