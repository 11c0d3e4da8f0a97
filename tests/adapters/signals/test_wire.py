"""The Redis payloads decode what they encode and refuse anything else."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone

import pytest

from jobmesh.adapters.signals import wire
from jobmesh.core.attempts import AttemptRef
from jobmesh.core.ports.signals import CancelNotice


def test_a_notice_round_trips_compactly() -> None:
    sent = CancelNotice("executors/e:1", (AttemptRef("a", "b", 2),), "by ops — ü")
    encoded = wire.encode_notice(sent)
    assert wire.decode_notice(encoded) == sent
    assert encoded.startswith(b'{"v":1,"executor":"executors/e:1","attempts":[["jobs/a/runs/b",2]],')
    assert wire.decode_notice(wire.encode_notice(CancelNotice("e", (), ""))) == CancelNotice("e", (), "")


@pytest.mark.parametrize(
    "data",
    [
        b"",
        b"[]",
        b"not json",
        b'{"v":2,"executor":"e","attempts":[],"reason":""}',
        b'{"v":1,"executor":"e","attempts":[["r"]],"reason":""}',
        b'{"v":1,"executor":"e","attempts":[["r",true]],"reason":""}',
        b'{"v":1,"executor":7,"attempts":[],"reason":""}',
        b'{"v":1,"executor":"e","attempts":[]}',
        b"\xff\xfe",
    ],
)
def test_anything_else_is_not_a_notice(data: bytes) -> None:
    with pytest.raises(ValueError, match="not a cancel notice"):
        wire.decode_notice(data)


def test_a_heartbeat_round_trips_in_utc() -> None:
    at = datetime(2030, 1, 2, 5, 4, 5, 6, tzinfo=timezone(timedelta(hours=2)))
    decoded = wire.decode_heartbeat(wire.encode_heartbeat("executors/e1", at))
    assert decoded == at
    assert decoded.tzinfo is UTC
    for garbage in (b"garbage", b"{}", b'{"at":"yesterday"}', b'{"at":"2030-01-01T00:00:00"}'):
        with pytest.raises(ValueError, match="heartbeat"):
            wire.decode_heartbeat(garbage)


def test_ttls_round_up_to_a_millisecond() -> None:
    assert wire.ttl_ms(timedelta(microseconds=1)) == 1
    assert wire.ttl_ms(timedelta(seconds=2, microseconds=500)) == 2001
