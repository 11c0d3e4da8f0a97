"""Stream admission: the limits in all and per client address, and slots freed however a stream ends."""

from __future__ import annotations

import pytest

from jobmesh.core.errors import ResourceExhausted
from jobmesh.server.admission.stream_slots import StreamSlots, client_of


@pytest.mark.parametrize(
    ("peer", "client"),
    [
        ("ipv4:10.0.0.1:5000", "ipv4:10.0.0.1"),
        ("ipv6:[::1]:5000", "ipv6:[::1]"),
        ("unix:/run/jobmesh.sock", "unix:/run/jobmesh.sock"),
    ],
)
def test_a_client_is_its_address_without_the_port(peer: str, client: str) -> None:
    assert client_of(peer) == client


def test_a_client_past_its_limit_is_refused_while_others_are_let_in() -> None:
    slots = StreamSlots(total=10, per_client=2)
    with slots.held("ipv4:10.0.0.1:1"), slots.held("ipv4:10.0.0.1:2"):
        with pytest.raises(ResourceExhausted) as refused, slots.held("ipv4:10.0.0.1:3"):
            pass
        assert refused.value.metadata == {"scope": "client", "limit": "2"}
        with slots.held("ipv4:10.0.0.2:1"):
            assert slots.open == 3
    assert slots.open == 0


def test_the_server_past_its_limit_refuses_everyone_and_a_failed_stream_frees_its_slot() -> None:
    slots = StreamSlots(total=2, per_client=2)
    with pytest.raises(RuntimeError), slots.held("ipv4:10.0.0.1:1"):
        raise RuntimeError("the stream failed")
    with slots.held("ipv4:10.0.0.1:1"), slots.held("ipv4:10.0.0.2:1"):
        with pytest.raises(ResourceExhausted) as refused, slots.held("ipv4:10.0.0.3:1"):
            pass
        assert refused.value.metadata["scope"] == "server"
