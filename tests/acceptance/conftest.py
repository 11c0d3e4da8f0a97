"""Fixtures of the acceptance tests: a fresh database per module, and a mesh of processes per test.

A mesh uses the suite's Kafka and Redis. A module that stops or freezes them takes `private_services`
instead: a Kafka and a Redis of its own, so that the tests running beside it on other workers are not
affected.
"""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
import tempfile
from collections.abc import Generator, Iterator
from pathlib import Path

import pytest

from tests.acceptance.mesh import Mesh
from tests.acceptance.processes import REPO
from tests.support import fresh_postgres_database, require_service_url

SERVICES = REPO / "tools" / "services" / "services.sh"
# Preferred ports of a private set: apart from the suite's own (tools/services/services.sh), and below the
# kernel's ephemeral range, so no client socket takes one while its service is stopped. Each pytest-xdist
# worker has a set of its own (100 higher a worker): two workers starting their sets at once would otherwise
# both find the same ports free, and one Kafka would fail to bind.
PRIVATE_PORTS = (25433, 27379, 28092, 28093, 27380, 28094)


def private_ports(worker: str) -> str:
    """`JOBMESH_SERVICES_PORTS` for the private set of the xdist worker named `worker` (`gw0`, `gw1`, ...;
    `master` without xdist)."""
    index = int(worker.removeprefix("gw")) if worker.startswith("gw") else 0
    return " ".join(str(port + 100 * index) for port in PRIVATE_PORTS)


@pytest.fixture(scope="module")
def database() -> Iterator[str]:
    with fresh_postgres_database(require_service_url("JOBMESH_DATABASE_URL")) as url:
        yield url


@pytest.fixture(scope="module")
def private_services(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, str]]:
    """A Kafka and a Redis of the module's own (`services.sh up`, PostgreSQL shared); yields their
    variables, with `JOBMESH_SERVICES_DIR` naming the folder that `services.sh kafka stop|start` takes."""
    shared = {"JOBMESH_DATABASE_URL": require_service_url("JOBMESH_DATABASE_URL")}
    yield from _private_set(tmp_path_factory.mktemp("services"), shared)


@pytest.fixture(scope="module")
def private_services_with_database() -> Iterator[dict[str, str]]:
    """A PostgreSQL, a Kafka and a Redis of the module's own, for a module that stops its database
    (`services.sh postgres stop|start`). The database keeps fsync and synchronous commits on
    (`JOBMESH_SERVICES_DURABLE`): what it acknowledged survives a crash, as in production."""
    # Not under pytest's own temporary folder: only its owner may enter that, and PostgreSQL runs as the
    # postgres user when the suite runs as root.
    folder = Path(tempfile.mkdtemp(prefix="jobmesh-services-"))
    folder.chmod(0o755)
    try:
        yield from _private_set(folder, {"JOBMESH_DATABASE_URL": "", "JOBMESH_SERVICES_DURABLE": "1"})
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def _private_set(folder: Path, given: dict[str, str]) -> Iterator[dict[str, str]]:
    env = {
        **os.environ,
        "JOBMESH_REDIS_URL": "",
        "JOBMESH_KAFKA_BOOTSTRAP": "",
        "JOBMESH_SERVICES_PORTS": private_ports(os.environ.get("PYTEST_XDIST_WORKER", "master")),
        **given,
    }
    try:
        subprocess.run(["bash", str(SERVICES), "up", str(folder)], env=env, cwd=REPO, check=True, timeout=180)
        yield {**_exports(folder / "env"), "JOBMESH_SERVICES_DIR": str(folder)}
    finally:
        subprocess.run(["bash", str(SERVICES), "down", str(folder)], cwd=REPO, check=False, timeout=120)


def _exports(env_file: Path) -> dict[str, str]:
    """The variables of an env file that `services.sh up` wrote: `export NAME=VALUE`, quoted by printf %q."""
    words = (shlex.split(line)[1] for line in env_file.read_text().splitlines() if line.startswith("export "))
    return dict(word.split("=", 1) for word in words)


@pytest.fixture
def services() -> dict[str, str]:
    """The Kafka and Redis of a mesh: the suite's own (a module that stops them overrides this fixture)."""
    return {
        "JOBMESH_KAFKA_BOOTSTRAP": require_service_url("JOBMESH_KAFKA_BOOTSTRAP"),
        "JOBMESH_REDIS_URL": require_service_url("JOBMESH_REDIS_URL"),
    }


CALL_FAILED = pytest.StashKey[bool]()


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(
    item: pytest.Item, call: pytest.CallInfo[None]
) -> Generator[None, pytest.TestReport, pytest.TestReport]:
    """Notes on the test whether its call failed, for the mesh's teardown: a failed assertion is not raised
    into the fixture."""
    report = yield
    if report.when == "call":
        item.stash[CALL_FAILED] = report.failed
    return report


@pytest.fixture
def mesh(
    request: pytest.FixtureRequest, tmp_path: Path, database: str, services: dict[str, str]
) -> Iterator[Mesh]:
    kafka = services["JOBMESH_KAFKA_BOOTSTRAP"]
    env = {
        "JOBMESH_DATABASE_URL": database,
        "JOBMESH_KAFKA_BOOTSTRAP": kafka,
        # A SIGKILLed executor's partitions pass to the others after 2 s (the test broker allows it).
        "JOBMESH_QUEUE_URL": f"kafka://{kafka}?session_timeout_ms=2000",
        "JOBMESH_REDIS_URL": services["JOBMESH_REDIS_URL"],
    }
    mesh = Mesh(tmp_path, env)
    try:
        yield mesh
        if request.node.stash.get(CALL_FAILED, False):  # shown in the failure's report
            print(mesh.logs())
    finally:
        mesh.close()
