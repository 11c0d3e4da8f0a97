"""Settings and fixtures of the whole suite."""

import socket
from collections.abc import Iterator

import pytest
from hypothesis import settings

# Generated tests try this many examples in `make test`; `make unit` runs the fast tier with the `unit`
# profile (`--hypothesis-profile=unit`). A test may scale the count (the garbage tests take a tenth of it on
# SQLite) or set its own.
settings.register_profile("thorough", max_examples=10_000)
settings.register_profile("unit", max_examples=1_500)
settings.load_profile("thorough")


@pytest.fixture
def taken_port() -> Iterator[int]:
    """A loopback port that a listening socket holds for the test."""
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", 0))
        holder.listen()
        yield holder.getsockname()[1]
