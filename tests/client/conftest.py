"""A live `jobmesh dev` per test module (the acceptance tests' own `dev`, on a fresh store and a free port),
and the SDK's clients to it."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from jobmesh.client import Client
from tests.acceptance.processes import free_port
from tests.acceptance.test_dev import dev


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """The address of a `jobmesh dev` that runs any command."""
    address = f"127.0.0.1:{free_port()}"
    with dev(tmp_path_factory.mktemp("dev"), address):
        yield address


@pytest.fixture
def client(server: str) -> Iterator[Client]:
    with Client(server) as connected:
        yield connected
